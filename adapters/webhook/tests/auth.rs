//! Destination authentication against real HTTP servers on 127.0.0.1: basic, header and OAuth2
//! client credentials with a token endpoint the test runs.

mod support;

use queuebox_domain::secret::Secret;
use queuebox_ports::publish::{OutboundMessage, PublishErrorKind, Publisher};
use queuebox_webhook::{HttpAuth, HttpDestination, HttpDestinationOptions, OAuth2Options};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::{Reply, TestServer};

const WAIT: Duration = Duration::from_secs(5);
const CLIENT_SECRET: &str = "cs-very-secret-41";

fn message() -> OutboundMessage {
    OutboundMessage {
        id: "22222222-2222-2222-2222-222222222222".to_owned(),
        topic: "invoice.paid".to_owned(),
        key: None,
        aggregate_type: None,
        payload: r#"{"invoice":7}"#.to_owned(),
        headers: Vec::new(),
        attempt: 0,
        ..OutboundMessage::default()
    }
}

async fn destination(options: HttpDestinationOptions) -> HttpDestination {
    match HttpDestination::new(options).await {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    }
}

fn with_auth(server: &TestServer, auth: HttpAuth) -> HttpDestinationOptions {
    let mut options = HttpDestinationOptions::new("protected", server.base_url());
    options.path = "/events".to_owned();
    options.timeout = Duration::from_secs(5);
    options.auth = auth;
    options
}

fn oauth(token_server: &TestServer) -> HttpAuth {
    HttpAuth::OAuth2(OAuth2Options {
        client_id: "queuebox".to_owned(),
        client_secret: Secret::new(CLIENT_SECRET),
        token_url: token_server.url("/oauth/token"),
        scope: Some("api:write".to_owned()),
        extra_params: vec![("audience".to_owned(), "https://api.example.com".to_owned())],
    })
}

/// A token endpoint that hands out `tok-1`, `tok-2`, ... with the given lifetime.
async fn token_server(expires_in: u64) -> TestServer {
    let issued = AtomicUsize::new(0);
    TestServer::start(move |_| {
        let n = issued.fetch_add(1, Ordering::SeqCst) + 1;
        Reply::status(200)
            .header("Content-Type", "application/json")
            .body(format!(
                r#"{{"access_token":"tok-{n}","token_type":"Bearer","expires_in":{expires_in}}}"#
            ))
    })
    .await
}

#[tokio::test]
async fn basic_auth_sends_the_encoded_pair() {
    let server = TestServer::start(|_| Reply::status(200)).await;
    let dest = destination(with_auth(
        &server,
        HttpAuth::Basic {
            username: "queuebox".to_owned(),
            password: Secret::new("pa ss"),
        },
    ))
    .await;
    dest.publish(&message()).await.expect("success");
    let request = &server.wait_for(1, WAIT).await[0];
    // base64("queuebox:pa ss")
    assert_eq!(
        request.header("authorization"),
        Some("Basic cXVldWVib3g6cGEgc3M=")
    );
}

#[tokio::test]
async fn header_auth_sends_its_header() {
    let server = TestServer::start(|_| Reply::status(200)).await;
    let dest = destination(with_auth(
        &server,
        HttpAuth::Header {
            name: "Authorization".to_owned(),
            value: Secret::new("Bearer static-token-1"),
        },
    ))
    .await;
    dest.publish(&message()).await.expect("success");
    let request = &server.wait_for(1, WAIT).await[0];
    assert_eq!(
        request.header_values("authorization"),
        ["Bearer static-token-1"]
    );
}

#[tokio::test]
async fn oauth2_fetches_once_and_caches_the_token() {
    let tokens = token_server(3600).await;
    let api = TestServer::start(|_| Reply::status(202)).await;
    let dest = destination(with_auth(&api, oauth(&tokens))).await;

    for _ in 0..3 {
        dest.publish(&message()).await.expect("success");
    }
    let calls = api.wait_for(3, WAIT).await;
    assert!(
        calls
            .iter()
            .all(|r| r.header("authorization") == Some("Bearer tok-1"))
    );
    let token_requests = tokens.requests();
    assert_eq!(token_requests.len(), 1, "the token should be cached");

    let form = &token_requests[0];
    assert_eq!(form.method, "POST");
    assert_eq!(form.target, "/oauth/token");
    assert_eq!(
        form.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(
        form.form_value("grant_type").as_deref(),
        Some("client_credentials")
    );
    assert_eq!(form.form_value("client_id").as_deref(), Some("queuebox"));
    assert_eq!(
        form.form_value("client_secret").as_deref(),
        Some(CLIENT_SECRET)
    );
    assert_eq!(form.form_value("scope").as_deref(), Some("api:write"));
    assert_eq!(
        form.form_value("audience").as_deref(),
        Some("https://api.example.com")
    );
}

#[tokio::test]
async fn oauth2_refetches_after_a_401_within_the_same_publish() {
    let tokens = token_server(3600).await;
    // The API refuses the first token, as if it had been revoked.
    let api = TestServer::start(|request| {
        if request.header("authorization") == Some("Bearer tok-1") {
            Reply::status(401).body(r#"{"error":"invalid_token"}"#)
        } else {
            Reply::status(200)
        }
    })
    .await;
    let dest = destination(with_auth(&api, oauth(&tokens))).await;

    dest.publish(&message())
        .await
        .expect("the retry with a new token succeeds");
    let calls = api.wait_for(2, WAIT).await;
    assert_eq!(calls[0].header("authorization"), Some("Bearer tok-1"));
    assert_eq!(calls[1].header("authorization"), Some("Bearer tok-2"));
    assert_eq!(tokens.requests().len(), 2);

    // The new token is cached from now on.
    dest.publish(&message()).await.expect("success");
    assert_eq!(
        api.wait_for(3, WAIT).await[2].header("authorization"),
        Some("Bearer tok-2")
    );
    assert_eq!(tokens.requests().len(), 2);
}

#[tokio::test]
async fn oauth2_a_second_401_fails_without_leaking_the_token() {
    let tokens = token_server(3600).await;
    let api = TestServer::start(|request| {
        let echoed = request
            .header("authorization")
            .unwrap_or_default()
            .to_owned();
        Reply::status(401).body(format!("rejected credentials: {echoed}"))
    })
    .await;
    let dest = destination(with_auth(&api, oauth(&tokens))).await;

    let error = dest.publish(&message()).await.expect_err("401 twice");
    assert_eq!(error.kind, PublishErrorKind::Rejected);
    assert!(error.reason.contains("401"), "{}", error.reason);
    assert!(!error.reason.contains("tok-"), "{}", error.reason);
    assert_eq!(api.requests().len(), 2, "one retry, not more");
}

#[tokio::test]
async fn oauth2_refetches_after_expiry() {
    let tokens = token_server(1).await;
    let api = TestServer::start(|_| Reply::status(200)).await;
    let dest = destination(with_auth(&api, oauth(&tokens))).await;

    dest.publish(&message()).await.expect("success");
    assert_eq!(tokens.requests().len(), 1);
    // A one-second token is refreshed 100 ms ahead of its end; wait past the whole second.
    let expired_at = Instant::now() + Duration::from_millis(1100);
    tokio::time::sleep_until(expired_at.into()).await;
    dest.publish(&message()).await.expect("success");

    let calls = api.wait_for(2, WAIT).await;
    assert_eq!(calls[0].header("authorization"), Some("Bearer tok-1"));
    assert_eq!(calls[1].header("authorization"), Some("Bearer tok-2"));
    assert_eq!(tokens.requests().len(), 2);
}

#[tokio::test]
async fn concurrent_publishes_share_one_token_fetch() {
    let tokens = token_server(3600).await;
    let api = TestServer::start(|_| Reply::status(200)).await;
    let dest = Arc::new(destination(with_auth(&api, oauth(&tokens))).await);

    let mut tasks = Vec::new();
    for _ in 0..8 {
        let dest = dest.clone();
        tasks.push(tokio::spawn(async move { dest.publish(&message()).await }));
    }
    for task in tasks {
        task.await.expect("join").expect("success");
    }
    assert_eq!(tokens.requests().len(), 1);
    assert_eq!(api.wait_for(8, WAIT).await.len(), 8);
}

#[tokio::test]
async fn a_token_endpoint_failure_is_an_auth_failure_without_the_secret() {
    // The endpoint echoes the form it received, secret included.
    let tokens = TestServer::start(|request| {
        Reply::status(400).body(format!("bad request: {} / {}", request.body, CLIENT_SECRET))
    })
    .await;
    let api = TestServer::start(|_| Reply::status(200)).await;
    let dest = destination(with_auth(&api, oauth(&tokens))).await;

    let error = dest.publish(&message()).await.expect_err("no token");
    assert_eq!(error.kind, PublishErrorKind::Auth);
    assert!(error.reason.contains("400"), "{}", error.reason);
    assert!(error.reason.contains("token endpoint"), "{}", error.reason);
    assert!(!error.reason.contains(CLIENT_SECRET), "{}", error.reason);
    assert!(!error.reason.contains("very-secret"), "{}", error.reason);
    assert!(api.requests().is_empty());
}

#[tokio::test]
async fn a_token_response_without_a_token_fails() {
    let tokens = TestServer::start(|_| Reply::status(200).body(r#"{"token_type":"Bearer"}"#)).await;
    let api = TestServer::start(|_| Reply::status(200)).await;
    let dest = destination(with_auth(&api, oauth(&tokens))).await;
    let error = dest.publish(&message()).await.expect_err("no token");
    assert_eq!(error.kind, PublishErrorKind::Auth);
    assert!(error.reason.contains("access_token"), "{}", error.reason);
}

#[tokio::test]
async fn credentials_echoed_by_a_failing_destination_are_masked() {
    let password = "p4ssw0rd-echo";
    let api = TestServer::start(|request| {
        let echoed = request.header("authorization").unwrap_or_default().to_owned();
        Reply::status(500).body(format!(
            "{{\"error\":\"boom\",\"password\":\"p4ssw0rd-echo\",\"seen\":\"{echoed}\"}} raw p4ssw0rd-echo"
        ))
    })
    .await;
    let dest = destination(with_auth(
        &api,
        HttpAuth::Basic {
            username: "queuebox".to_owned(),
            password: Secret::new(password),
        },
    ))
    .await;
    let error = dest.publish(&message()).await.expect_err("500");
    assert!(error.reason.contains("500"), "{}", error.reason);
    assert!(error.reason.contains("boom"), "{}", error.reason);
    assert!(!error.reason.contains(password), "{}", error.reason);
    // base64("queuebox:p4ssw0rd-echo") must not survive either.
    assert!(!error.reason.contains("cXVldWVib3g6"), "{}", error.reason);
}

#[tokio::test]
async fn debug_output_shows_no_secret() {
    let tokens = token_server(3600).await;
    let api = TestServer::start(|_| Reply::status(200)).await;
    let dest = destination(with_auth(&api, oauth(&tokens))).await;
    dest.publish(&message()).await.expect("success");
    let printed = format!("{dest:?}");
    assert!(!printed.contains(CLIENT_SECRET), "{printed}");
    assert!(!printed.contains("tok-1"), "{printed}");

    let basic = destination(with_auth(
        &api,
        HttpAuth::Basic {
            username: "queuebox".to_owned(),
            password: Secret::new("pw-in-debug"),
        },
    ))
    .await;
    let printed = format!("{basic:?}");
    assert!(!printed.contains("pw-in-debug"), "{printed}");
    assert!(!printed.contains("cXVldWVib3g6"), "{printed}");
}

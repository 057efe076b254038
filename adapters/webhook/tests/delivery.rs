//! Delivery behaviour of the HTTP destination against real HTTP servers on 127.0.0.1.

mod support;

use queuebox_domain::secret::Secret;
use queuebox_ports::publish::{OutboundMessage, PublishErrorKind, Publisher};
use queuebox_webhook::{HttpAuth, HttpDestination, HttpDestinationOptions};
use std::time::{Duration, Instant};
use support::{Reply, TestServer, closed_port_url};

const WAIT: Duration = Duration::from_secs(5);

fn message() -> OutboundMessage {
    OutboundMessage {
        id: "11111111-1111-1111-1111-111111111111".to_owned(),
        topic: "order.created".to_owned(),
        key: Some("cust-42".to_owned()),
        aggregate_type: Some("order".to_owned()),
        payload: r#"{"orderId":"o-1","amount":99.99}"#.to_owned(),
        headers: vec![("X-Tenant".to_owned(), "acme".to_owned())],
        attempt: 3,
        ..OutboundMessage::default()
    }
}

async fn destination(options: HttpDestinationOptions) -> HttpDestination {
    match HttpDestination::new(options).await {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    }
}

fn options(server: &TestServer, path: &str) -> HttpDestinationOptions {
    let mut options = HttpDestinationOptions::new("test", server.base_url());
    options.path = path.to_owned();
    options.timeout = Duration::from_secs(5);
    options
}

#[tokio::test]
async fn posts_the_payload_with_the_standard_headers() {
    let server = TestServer::start(|_| Reply::status(200)).await;
    let dest = destination(options(&server, "/events")).await;
    assert_eq!(dest.destination_type(), "http");
    assert_eq!(dest.url().as_str(), server.url("/events"));

    dest.publish(&message()).await.expect("200 is success");

    let requests = server.wait_for(1, WAIT).await;
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.target, "/events");
    assert_eq!(request.body, r#"{"orderId":"o-1","amount":99.99}"#);
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(
        request.header("x-message-id"),
        Some("11111111-1111-1111-1111-111111111111")
    );
    assert_eq!(request.header("x-topic"), Some("order.created"));
    assert_eq!(request.header("x-attempt"), Some("3"));
    assert_eq!(request.header("x-message-key"), Some("cust-42"));
    assert_eq!(request.header("x-tenant"), Some("acme"));
}

#[tokio::test]
async fn every_2xx_is_success_and_connections_are_reused() {
    let statuses = [200u16, 201, 202, 204, 299];
    let counter = std::sync::atomic::AtomicUsize::new(0);
    let server = TestServer::start(move |_| {
        let i = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Reply::status(statuses[i % statuses.len()]).body("ok")
    })
    .await;
    let dest = destination(options(&server, "/")).await;
    for _ in statuses {
        dest.publish(&message()).await.expect("2xx is success");
    }
    let requests = server.wait_for(statuses.len(), WAIT).await;
    assert!(
        requests.iter().all(|r| r.connection == 0),
        "sequential publishes should share one keep-alive connection: {:?}",
        requests.iter().map(|r| r.connection).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    let target = TestServer::start(|_| Reply::status(200)).await;
    let location = target.url("/stolen");
    let server = TestServer::start(move |_| Reply::status(302).header("Location", &location)).await;
    let dest = destination(options(&server, "/events")).await;

    let error = dest.publish(&message()).await.expect_err("3xx fails");
    assert_eq!(error.kind, PublishErrorKind::Rejected);
    assert!(error.reason.contains("302"), "{}", error.reason);
    assert_eq!(server.requests().len(), 1);
    assert!(target.requests().is_empty(), "the redirect target was hit");
}

#[tokio::test]
async fn client_and_server_errors_fail_with_status_and_a_cut_body() {
    for status in [400u16, 404, 500, 503] {
        let body = format!("error-{status}-{}", "x".repeat(5000));
        let server = TestServer::start(move |_| Reply::status(status).body(body.clone())).await;
        let mut opts = options(&server, "/events");
        opts.max_error_body_bytes = 100;
        let dest = destination(opts).await;

        let error = dest.publish(&message()).await.expect_err("non-2xx fails");
        assert_eq!(error.kind, PublishErrorKind::Rejected);
        assert!(
            error.reason.contains(&status.to_string()),
            "{}",
            error.reason
        );
        assert!(
            error.reason.contains(&format!("error-{status}-xxx")),
            "{}",
            error.reason
        );
        let (_, kept) = error.reason.split_once(": ").expect("body part");
        assert!(
            kept.len() <= 100,
            "kept {} bytes: {}",
            kept.len(),
            error.reason
        );
    }
}

#[tokio::test]
async fn a_slow_endpoint_times_out_within_about_the_timeout() {
    let server = TestServer::start(|_| Reply::status(200).delay(Duration::from_secs(10))).await;
    let mut opts = options(&server, "/slow");
    opts.timeout = Duration::from_millis(300);
    let dest = destination(opts).await;

    let started = Instant::now();
    let error = dest.publish(&message()).await.expect_err("timeout fails");
    let elapsed = started.elapsed();
    assert_eq!(error.kind, PublishErrorKind::Timeout, "{}", error.reason);
    assert!(error.reason.contains("300 ms"), "{}", error.reason);
    assert!(elapsed >= Duration::from_millis(250), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
}

#[tokio::test]
async fn a_refused_connection_fails() {
    let base = closed_port_url().await;
    let dest = destination(HttpDestinationOptions::new("down", base)).await;
    let error = dest.publish(&message()).await.expect_err("nothing listens");
    assert_eq!(
        error.kind,
        PublishErrorKind::Unreachable,
        "{}",
        error.reason
    );
    assert!(
        error.reason.contains("could not connect"),
        "{}",
        error.reason
    );
}

#[tokio::test]
async fn row_headers_win_and_framing_headers_are_dropped() {
    let server = TestServer::start(|_| Reply::status(200)).await;
    let mut opts = options(&server, "/events");
    opts.headers = vec![
        ("X-Team".to_owned(), "static-team".to_owned()),
        ("X-Static-Only".to_owned(), "static".to_owned()),
    ];
    opts.auth = HttpAuth::Header {
        name: "X-Auth".to_owned(),
        value: Secret::new("auth-value"),
    };
    let dest = destination(opts).await;

    let mut msg = message();
    msg.key = None;
    msg.headers = [
        ("x-team", "row-team"),
        ("X-AUTH", "row-auth"),
        ("Host", "evil.example"),
        ("Content-Length", "999"),
        ("Transfer-Encoding", "chunked"),
        ("Connection", "close"),
        ("Keep-Alive", "timeout=1"),
        ("Upgrade", "h2c"),
        ("Expect", "100-continue"),
        ("TE", "trailers"),
        ("Trailer", "X-Foo"),
        ("Proxy-Authorization", "Basic Zm9vOmJhcg=="),
        // what every relayed webhook row carries
        ("content-type", "text/plain; charset=utf-8"),
    ]
    .iter()
    .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
    .collect();
    dest.publish(&msg).await.expect("success");

    let request = &server.wait_for(1, WAIT).await[0];
    assert_eq!(request.header_values("x-team"), ["row-team"]);
    assert_eq!(request.header_values("x-auth"), ["row-auth"]);
    assert_eq!(request.header("x-static-only"), Some("static"));
    assert_eq!(
        request.header("host"),
        Some(server.addr.to_string().as_str())
    );
    assert_eq!(
        request.header("content-length"),
        Some(msg.payload.len().to_string().as_str())
    );
    for absent in [
        "transfer-encoding",
        "keep-alive",
        "upgrade",
        "expect",
        "te",
        "trailer",
        "proxy-authorization",
        "x-message-key",
    ] {
        assert!(request.header(absent).is_none(), "{absent} was sent");
    }
    assert_ne!(request.header("connection"), Some("close"));
    assert_eq!(request.header_values("content-type"), ["application/json"]);
    assert_eq!(request.body, msg.payload);
}

#[tokio::test]
async fn an_empty_key_sends_no_key_header() {
    let server = TestServer::start(|_| Reply::status(200)).await;
    let dest = destination(options(&server, "/")).await;
    let mut msg = message();
    msg.key = Some(String::new());
    dest.publish(&msg).await.expect("success");
    assert!(
        server.wait_for(1, WAIT).await[0]
            .header("x-message-key")
            .is_none()
    );
}

#[tokio::test]
async fn a_row_header_the_protocol_forbids_fails_the_publish() {
    let server = TestServer::start(|_| Reply::status(200)).await;
    let dest = destination(options(&server, "/")).await;
    let mut msg = message();
    msg.headers = vec![("Bad Name".to_owned(), "v".to_owned())];
    let error = dest.publish(&msg).await.expect_err("invalid name");
    assert_eq!(error.kind, PublishErrorKind::InvalidMessage);
    msg.headers = vec![("X-Ok".to_owned(), "line\nbreak".to_owned())];
    let error = dest.publish(&msg).await.expect_err("invalid value");
    assert_eq!(error.kind, PublishErrorKind::InvalidMessage);
    assert!(server.requests().is_empty());
}

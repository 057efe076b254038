//! The NATS publisher against the real server at `QB_TEST_NATS_URL` (and nats-servers of the
//! tests' own for credentials): the duplicate window dropping a publish retried after its
//! acknowledgement was lost, core NATS mode, and the credentials the configuration accepts.

#![allow(clippy::unwrap_used)]

mod support;

use futures::StreamExt;
use queuebox_conformance::proxy::{FaultProxy, closed_port};
use queuebox_domain::secret::Secret;
use queuebox_nats::{NatsCredentials, NatsPublisher, NatsPublisherOptions};
use queuebox_ports::publish::{OutboundMessage, PublishErrorKind, Publisher};
use std::time::Duration;
use support::{TestClient, nats_url, server_address, unique, wait_for};

fn message(id: &str) -> OutboundMessage {
    OutboundMessage {
        id: id.to_owned(),
        topic: "order.created".to_owned(),
        key: Some("k".to_owned()),
        payload: r#"{"n":1}"#.to_owned(),
        ..OutboundMessage::default()
    }
}

fn publisher(
    servers: &str,
    subject: &str,
    tweak: impl FnOnce(&mut NatsPublisherOptions),
) -> NatsPublisher {
    let mut options = NatsPublisherOptions::new("test", Secret::new(servers), subject);
    options.timeout = Duration::from_secs(2);
    tweak(&mut options);
    NatsPublisher::new(options).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_retried_after_its_ack_was_lost_is_stored_once() {
    let Some(url) = nats_url() else { return };
    let client = TestClient::connect(&url).await;
    let name = unique("dedup");
    client.stream(&name, &[&format!("{name}.>")], |_| {}).await;
    let proxy = FaultProxy::start(server_address(&url)).await;
    let publisher = publisher(
        &format!("nats://127.0.0.1:{}", proxy.port()),
        &format!("{name}.events"),
        |_| {},
    );
    publisher.connect().await.unwrap();
    // The server stores the message but its acknowledgement never reaches the publisher.
    proxy.hold();
    let id = uuid::Uuid::new_v4().to_string();
    let error = publisher.publish(&message(&id)).await.unwrap_err();
    assert_eq!(error.kind, PublishErrorKind::Timeout, "{error:?}");
    wait_for("the first copy stored", || async {
        (client.ids(&name).await.len() == 1).then_some(())
    })
    .await;
    proxy.release();
    // The dispatcher's retry: the same row id, so the same Nats-Msg-Id.
    publisher.publish(&message(&id)).await.unwrap();
    let mut stream = client.jetstream.get_stream(&name).await.unwrap();
    assert_eq!(
        stream.info().await.unwrap().state.messages,
        1,
        "the window dropped the copy"
    );
    assert_eq!(client.ids(&name).await, [id]);
    proxy.cut();
    client.delete(&name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_nats_publishes_without_a_stream() {
    let Some(url) = nats_url() else { return };
    let client = TestClient::connect(&url).await;
    let subject = format!("{}.core", unique("core"));
    let mut subscriber = client.client.subscribe(subject.clone()).await.unwrap();
    client.client.flush().await.unwrap();
    let publisher = publisher(&url, &subject, |o| o.jet_stream = false);
    publisher.publish(&message("core-1")).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), subscriber.next())
        .await
        .unwrap()
        .unwrap();
    let headers = got.headers.unwrap();
    assert_eq!(headers.get("x-message-id").unwrap().as_str(), "core-1");
    assert_eq!(got.payload.as_ref(), br#"{"n":1}"#);
}

/// A nats-server of the test's own with `args` (credentials), on a free port.
struct OwnServer {
    port: u16,
    child: std::process::Child,
}

impl OwnServer {
    async fn start(args: &[&str]) -> Self {
        let port = closed_port();
        let child = std::process::Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nats-server is installed (scripts/services.sh)");
        wait_for("the own nats-server to listen", || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(|_| ())
        })
        .await;
        Self { port, child }
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_password_and_token_credentials_are_sent_and_a_refusal_is_auth_without_the_secret() {
    if nats_url().is_none() {
        return;
    }
    let with_user = OwnServer::start(&["--user", "qb", "--pass", "pw-right-77"]).await;
    let servers = format!("nats://127.0.0.1:{}", with_user.port);
    let credentials = |user: &str, password: &str| NatsCredentials {
        username: Some(user.to_owned()),
        password: Some(Secret::new(password)),
        token: None,
    };
    let good = publisher(&servers, "a.b", |o| {
        o.jet_stream = false;
        o.credentials = credentials("qb", "pw-right-77");
    });
    good.publish(&message("1")).await.unwrap();
    let bad = publisher(&servers, "a.b", |o| {
        o.jet_stream = false;
        o.credentials = credentials("qb", "pw-wrong-88");
    });
    let error = bad.publish(&message("2")).await.unwrap_err();
    assert_eq!(error.kind, PublishErrorKind::Auth, "{error:?}");
    assert!(!error.reason.contains("pw-wrong-88"), "{}", error.reason);

    let with_token = OwnServer::start(&["--auth", "t0ken-right-99"]).await;
    let servers = format!("nats://127.0.0.1:{}", with_token.port);
    let token = |t: &str| NatsCredentials {
        token: Some(Secret::new(t)),
        ..NatsCredentials::default()
    };
    let good = publisher(&servers, "a.b", |o| {
        o.jet_stream = false;
        o.credentials = token("t0ken-right-99");
    });
    good.publish(&message("3")).await.unwrap();
    let bad = publisher(&servers, "a.b", |o| {
        o.jet_stream = false;
        o.credentials = token("t0ken-wrong-00");
    });
    let error = bad.publish(&message("4")).await.unwrap_err();
    assert_eq!(error.kind, PublishErrorKind::Auth, "{error:?}");
    assert!(!error.reason.contains("t0ken-wrong-00"), "{}", error.reason);
}

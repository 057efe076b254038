//! The publisher conformance suite (queuebox-conformance) against the NATS publisher and the real
//! server of `QB_TEST_NATS_URL` (skipped, with a message, when it is unset): a stream holding the
//! subject (accepting), a full stream that refuses new messages (refusing, a JetStream error
//! answer), a closed port (unreachable), and a TCP proxy holding the server's replies (silent).

#![allow(clippy::unwrap_used)]

mod support;

use async_nats::jetstream::stream::DiscardPolicy;
use async_trait::async_trait;
use queuebox_conformance::proxy::{FaultProxy, closed_port};
use queuebox_conformance::publish::{PublisherFixture, WAIT};
use queuebox_domain::secret::Secret;
use queuebox_nats::{NatsCredentials, NatsPublisher, NatsPublisherOptions};
use queuebox_ports::publish::Publisher;
use std::sync::Arc;
use std::time::Duration;
use support::{TestClient, nats_url, server_address, unique, wait_for};

/// The configured reason limit of every publisher.
const MAX_REASON: usize = 100;
/// How long the silent destination's publisher waits for the acknowledgement.
const SILENT_TIMEOUT: Duration = Duration::from_secs(2);
/// The token the unreachable publisher carries; it must never show in a reason.
const SECRET: &str = "qb-conformance-t0ken-4711";

struct NatsFixture {
    client: Option<TestClient>,
    stream: String,
    proxy: Option<FaultProxy>,
    held_at: u64,
}

fn url() -> String {
    nats_url().expect("available() checked QB_TEST_NATS_URL")
}

fn publisher(servers: &str, subject: &str, timeout: Duration) -> NatsPublisher {
    let mut options = NatsPublisherOptions::new("conformance", Secret::new(servers), subject);
    options.timeout = timeout;
    options.max_reason_bytes = MAX_REASON;
    NatsPublisher::new(options).unwrap_or_else(|e| panic!("{e}"))
}

impl NatsFixture {
    /// A stream over `<name>.>`, refusing new messages once it holds `max_messages` when set.
    async fn topology(max_messages: Option<i64>) -> Self {
        let client = TestClient::connect(&url()).await;
        let stream = unique("conf");
        client
            .stream(&stream, &[&format!("{stream}.>")], |config| {
                if let Some(max) = max_messages {
                    config.max_messages = max;
                    config.discard = DiscardPolicy::New;
                }
            })
            .await;
        Self {
            client: Some(client),
            stream,
            proxy: None,
            held_at: 0,
        }
    }

    fn subject(&self) -> String {
        format!("{}.events", self.stream)
    }
}

#[async_trait]
impl PublisherFixture for NatsFixture {
    fn available() -> bool {
        nats_url().is_some()
    }

    async fn accepting() -> (Self, Arc<dyn Publisher>) {
        let fixture = Self::topology(None).await;
        let publisher = publisher(&url(), &fixture.subject(), WAIT);
        (fixture, Arc::new(publisher))
    }

    async fn refusing() -> (Self, Arc<dyn Publisher>) {
        // A stream full at one message with `discard: new` answers every further publish with a
        // JetStream error ("maximum messages exceeded").
        let fixture = Self::topology(Some(1)).await;
        let client = fixture.client.as_ref().expect("a client");
        client
            .jetstream
            .publish(fixture.subject(), "{}".into())
            .await
            .unwrap()
            .await
            .unwrap();
        let publisher = publisher(&url(), &fixture.subject(), WAIT);
        (fixture, Arc::new(publisher))
    }

    async fn unreachable() -> (Self, Arc<dyn Publisher>) {
        let servers = format!("nats://127.0.0.1:{}", closed_port());
        let mut options = NatsPublisherOptions::new("conformance", Secret::new(servers), "x.y");
        options.credentials = NatsCredentials {
            token: Some(Secret::new(SECRET)),
            ..NatsCredentials::default()
        };
        options.timeout = WAIT;
        options.max_reason_bytes = MAX_REASON;
        let publisher = NatsPublisher::new(options).unwrap_or_else(|e| panic!("{e}"));
        let fixture = Self {
            client: None,
            stream: String::new(),
            proxy: None,
            held_at: 0,
        };
        (fixture, Arc::new(publisher))
    }

    async fn silent() -> (Self, Arc<dyn Publisher>) {
        let mut fixture = Self::topology(None).await;
        let proxy = FaultProxy::start(server_address(&url())).await;
        let publisher = publisher(
            &format!("nats://127.0.0.1:{}", proxy.port()),
            &fixture.subject(),
            SILENT_TIMEOUT,
        );
        // Connected before the proxy holds the server's replies, so a publish is what waits.
        publisher
            .connect()
            .await
            .expect("connects through the proxy");
        proxy.hold();
        fixture.held_at = proxy.upstream_bytes();
        fixture.proxy = Some(proxy);
        (fixture, Arc::new(publisher))
    }

    fn secret(&self) -> &str {
        SECRET
    }

    fn reason_limit(&self) -> usize {
        MAX_REASON
    }

    fn timeout(&self) -> Duration {
        SILENT_TIMEOUT
    }

    async fn received(&self) -> Vec<String> {
        match &self.client {
            Some(client) => client.ids(&self.stream).await,
            None => Vec::new(),
        }
    }

    async fn wait_until_reached(&self) {
        let proxy = self.proxy.as_ref().expect("a silent destination");
        wait_for("a publish to reach the server", || async {
            (proxy.upstream_bytes() > self.held_at).then_some(())
        })
        .await;
    }

    async fn release(&self) {
        if let Some(proxy) = &self.proxy {
            proxy.release();
        }
    }

    async fn done(self) {
        if let Some(proxy) = &self.proxy {
            proxy.release();
            proxy.cut();
        }
        if let Some(client) = &self.client {
            client.delete(&self.stream).await;
        }
    }
}

queuebox_conformance::publisher_conformance_suite!(NatsFixture);

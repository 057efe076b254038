//! The publisher conformance suite (queuebox-conformance) against the RabbitMQ publisher and the
//! real broker of `QB_TEST_AMQP_URL` (skipped, with a message, when it is unset): an exchange with
//! a bound queue (accepting), a bound queue that rejects every publish (refusing, a broker nack), a
//! closed port (unreachable), and a TCP proxy holding the broker's replies (silent).

mod support;

use async_trait::async_trait;
use lapin::ExchangeKind;
use lapin::options::BasicGetOptions;
use lapin::types::{FieldTable, ShortString};
use queuebox_conformance::proxy::{FaultProxy, closed_port};
use queuebox_conformance::publish::{PublisherFixture, WAIT};
use queuebox_domain::secret::Secret;
use queuebox_ports::publish::Publisher;
use queuebox_rabbitmq::{RabbitmqPublisher, RabbitmqPublisherOptions};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{
    TestClient, amqp_url, broker_address, options, reject_everything, unique, wait_for, with_port,
};

/// The configured reason limit of every publisher (at or above the adapter's floor of 64 bytes).
const MAX_REASON: usize = 100;

/// How long the silent destination's publisher waits for the broker's confirm.
const SILENT_TIMEOUT: Duration = Duration::from_secs(2);

struct AmqpFixture {
    client: Option<TestClient>,
    exchange: String,
    queue: Option<String>,
    proxy: Option<FaultProxy>,
    /// Proxy bytes from the client when the proxy started holding.
    held_at: u64,
    secret: String,
    received: Mutex<Vec<String>>,
}

fn url() -> String {
    amqp_url().expect("available() checked QB_TEST_AMQP_URL")
}

/// The password of an AMQP URL, or the whole URL when it has none.
fn password_of(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let authority = &url[start..];
    let authority = &authority[..authority.find('/').unwrap_or(authority.len())];
    match authority.rsplit_once('@') {
        Some((userinfo, _)) => match userinfo.split_once(':') {
            Some((_, password)) if !password.is_empty() => password.to_owned(),
            _ => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

fn publisher_options(url: &str, exchange: &str, timeout: Duration) -> RabbitmqPublisherOptions {
    let mut options = options(url, exchange);
    options.name = "conformance".to_owned();
    options.url = Secret::new(url);
    options.timeout = timeout;
    options.max_reason_bytes = MAX_REASON;
    options
}

fn publisher(options: RabbitmqPublisherOptions) -> RabbitmqPublisher {
    RabbitmqPublisher::new(options).unwrap_or_else(|e| panic!("{e}"))
}

impl AmqpFixture {
    /// An exchange with a queue bound to every routing key; `arguments` shape the queue.
    async fn topology(arguments: FieldTable) -> Self {
        let url = url();
        let exchange = unique("conf");
        let queue = unique("conf-q");
        let client = TestClient::connect(&url).await;
        client
            .declare_exchange(&exchange, ExchangeKind::Topic)
            .await;
        client.bind_queue(&queue, &exchange, "#", arguments).await;
        Self {
            client: Some(client),
            exchange,
            queue: Some(queue),
            proxy: None,
            held_at: 0,
            secret: password_of(&url),
            received: Mutex::new(Vec::new()),
        }
    }

    async fn with_publisher(self, url: &str, timeout: Duration) -> (Self, Arc<dyn Publisher>) {
        let publisher = publisher(publisher_options(url, &self.exchange, timeout));
        (self, Arc::new(publisher))
    }
}

#[async_trait]
impl PublisherFixture for AmqpFixture {
    fn available() -> bool {
        amqp_url().is_some()
    }

    async fn accepting() -> (Self, Arc<dyn Publisher>) {
        Self::topology(FieldTable::default())
            .await
            .with_publisher(&url(), WAIT)
            .await
    }

    async fn refusing() -> (Self, Arc<dyn Publisher>) {
        // The queue is full at length 0 and rejects publishes: the broker nacks every message.
        Self::topology(reject_everything())
            .await
            .with_publisher(&url(), WAIT)
            .await
    }

    async fn unreachable() -> (Self, Arc<dyn Publisher>) {
        let secret = "qb-conformance-s3cret-4711";
        let url =
            with_port(&url(), closed_port()).replacen("guest:guest", &format!("guest:{secret}"), 1);
        let fixture = Self {
            client: None,
            exchange: unique("conf-down"),
            queue: None,
            proxy: None,
            held_at: 0,
            secret: if url.contains(secret) {
                secret.to_owned()
            } else {
                password_of(&url)
            },
            received: Mutex::new(Vec::new()),
        };
        fixture.with_publisher(&url, WAIT).await
    }

    async fn silent() -> (Self, Arc<dyn Publisher>) {
        let mut fixture = Self::topology(FieldTable::default()).await;
        let proxy = FaultProxy::start(broker_address(&url())).await;
        let through_proxy = with_port(&url(), proxy.port());
        let publisher = publisher(publisher_options(
            &through_proxy,
            &fixture.exchange,
            SILENT_TIMEOUT,
        ));
        // Connected (and the exchange declared) before the proxy holds the broker's replies, so a
        // publish is what waits, not the connection.
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
        &self.secret
    }

    fn reason_limit(&self) -> usize {
        MAX_REASON
    }

    fn timeout(&self) -> Duration {
        SILENT_TIMEOUT
    }

    async fn received(&self) -> Vec<String> {
        if let (Some(client), Some(queue)) = (&self.client, &self.queue) {
            loop {
                let got = client
                    .channel
                    .basic_get(
                        ShortString::from(queue.as_str()),
                        BasicGetOptions { no_ack: true },
                    )
                    .await
                    .unwrap_or_else(|e| panic!("read the queue: {e}"));
                let Some(message) = got else { break };
                let id = message
                    .delivery
                    .properties
                    .message_id()
                    .as_ref()
                    .map(ShortString::to_string)
                    .unwrap_or_default();
                self.received.lock().expect("lock").push(id);
            }
        }
        self.received.lock().expect("lock").clone()
    }

    async fn wait_until_reached(&self) {
        let proxy = self.proxy.as_ref().expect("a silent destination");
        wait_for("a publish to reach the broker", || async {
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
            let queues: Vec<&str> = self.queue.iter().map(String::as_str).collect();
            client.clean(&[&self.exchange], &queues).await;
        }
    }
}

queuebox_conformance::publisher_conformance_suite!(AmqpFixture);

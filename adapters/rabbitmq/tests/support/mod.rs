//! Shared helpers of the RabbitMQ publisher tests: the broker from `QB_TEST_AMQP_URL`, unique
//! names, a test client that declares, binds and reads back, and `rabbitmqctl`. The TCP fault
//! proxy and the closed port are queuebox-conformance's.

#![allow(dead_code, clippy::unwrap_used)]

use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use queuebox_domain::secret::Secret;
use queuebox_ports::publish::OutboundMessage;
use queuebox_rabbitmq::RabbitmqPublisherOptions;
use std::future::Future;
use std::process::Command;
use std::time::Duration;

/// How long a test waits for a condition before it fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// The broker URL, or `None` (with a message) when the variable is unset.
pub fn amqp_url() -> Option<String> {
    match std::env::var("QB_TEST_AMQP_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!(
                "skipped: QB_TEST_AMQP_URL is not set (eval \"$(bash scripts/services.sh)\" first)"
            );
            None
        }
    }
}

/// A name no other test uses.
pub fn unique(prefix: &str) -> String {
    format!("qb-test-{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// `url` with its virtual host replaced by `vhost`.
pub fn with_vhost(url: &str, vhost: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let end = url[start..].find('/').map_or(url.len(), |i| start + i);
    format!("{}/{vhost}", &url[..end])
}

/// `url` with its port replaced by `port` (host kept).
pub fn with_port(url: &str, port: u16) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let end = url[start..].find('/').map_or(url.len(), |i| start + i);
    let authority = &url[start..end];
    let host_end = authority.rfind(':').unwrap_or(authority.len());
    format!(
        "{}{}:{port}{}",
        &url[..start],
        &authority[..host_end],
        &url[end..]
    )
}

/// Options for a publisher to `exchange` on the test broker, with a short timeout.
pub fn options(url: &str, exchange: &str) -> RabbitmqPublisherOptions {
    let mut options = RabbitmqPublisherOptions::new("test-events", Secret::new(url), exchange);
    options.timeout = Duration::from_secs(10);
    options
}

/// A message of topic `topic`.
pub fn message(topic: &str) -> OutboundMessage {
    OutboundMessage {
        id: uuid::Uuid::new_v4().to_string(),
        topic: topic.to_owned(),
        key: Some("cust-42".to_owned()),
        aggregate_type: Some("order".to_owned()),
        payload: r#"{"orderId":"o-1","region":"eu"}"#.to_owned(),
        headers: vec![("x-tenant".to_owned(), "acme".to_owned())],
        attempt: 0,
        ..OutboundMessage::default()
    }
}

/// Polls `check` until it yields a value or [`WAIT`] passes.
pub async fn wait_for<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    queuebox_conformance::wait::wait_for(what, WAIT, check).await
}

/// A message read back from a queue.
#[derive(Debug)]
pub struct Received {
    pub exchange: String,
    pub routing_key: String,
    pub properties: BasicProperties,
    pub body: Vec<u8>,
}

impl Received {
    /// A header as text (a long string), if present.
    pub fn header_text(&self, name: &str) -> Option<String> {
        match self.header(name)? {
            AMQPValue::LongString(value) => {
                Some(String::from_utf8_lossy(value.as_bytes()).into_owned())
            }
            _ => None,
        }
    }

    /// A header as it arrived.
    pub fn header(&self, name: &str) -> Option<&AMQPValue> {
        self.properties.headers().as_ref()?.inner().get(name)
    }
}

/// The test's own connection, for topology and reading back.
pub struct TestClient {
    pub connection: Connection,
    pub channel: Channel,
}

impl TestClient {
    pub async fn connect(url: &str) -> Self {
        let connection = Connection::connect(url, ConnectionProperties::default())
            .await
            .unwrap_or_else(|e| panic!("test client cannot connect: {e}"));
        let channel = connection.create_channel().await.unwrap();
        Self {
            connection,
            channel,
        }
    }

    /// Declares `exchange` as the publisher does (durable) with `kind`.
    pub async fn declare_exchange(&self, exchange: &str, kind: ExchangeKind) {
        self.channel
            .exchange_declare(
                ShortString::from(exchange),
                kind,
                ExchangeDeclareOptions {
                    durable: true,
                    ..ExchangeDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
    }

    /// Declares an auto-deleted queue with `arguments` bound to `exchange` with `binding_key`.
    pub async fn bind_queue(
        &self,
        queue: &str,
        exchange: &str,
        binding_key: &str,
        arguments: FieldTable,
    ) {
        self.channel
            .queue_declare(
                ShortString::from(queue),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                arguments,
            )
            .await
            .unwrap();
        self.channel
            .queue_bind(
                ShortString::from(queue),
                ShortString::from(exchange),
                ShortString::from(binding_key),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
    }

    /// The next message of `queue`, waiting up to [`WAIT`].
    pub async fn next_message(&self, queue: &str) -> Received {
        let channel = self.channel.clone();
        let queue = queue.to_owned();
        wait_for("a message in the queue", || {
            let channel = channel.clone();
            let queue = queue.clone();
            async move {
                let got = channel
                    .basic_get(
                        ShortString::from(queue.as_str()),
                        BasicGetOptions { no_ack: true },
                    )
                    .await
                    .unwrap()?;
                let delivery = got.delivery;
                Some(Received {
                    exchange: delivery.exchange.to_string(),
                    routing_key: delivery.routing_key.to_string(),
                    properties: delivery.properties,
                    body: delivery.data,
                })
            }
        })
        .await
    }

    /// How many messages `queue` holds now.
    pub async fn depth(&self, queue: &str) -> u32 {
        self.channel
            .queue_declare(
                ShortString::from(queue),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap()
            .message_count()
    }

    /// Removes what a test declared.
    pub async fn clean(&self, exchanges: &[&str], queues: &[&str]) {
        for queue in queues {
            let _ = self
                .channel
                .queue_delete(ShortString::from(*queue), QueueDeleteOptions::default())
                .await;
        }
        for exchange in exchanges {
            let _ = self
                .channel
                .exchange_delete(
                    ShortString::from(*exchange),
                    ExchangeDeleteOptions::default(),
                )
                .await;
        }
    }
}

/// Queue arguments that make the broker nack every publish routed to the queue.
pub fn reject_everything() -> FieldTable {
    let mut arguments = FieldTable::default();
    arguments.insert(ShortString::from("x-max-length"), AMQPValue::LongInt(0));
    arguments.insert(
        ShortString::from("x-overflow"),
        AMQPValue::LongString(LongString::from("reject-publish")),
    );
    arguments
}

/// Runs `rabbitmqctl` with `args`; the test broker must be this machine's.
pub fn rabbitmqctl(args: &[&str]) -> String {
    let output = Command::new("rabbitmqctl")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("this test needs rabbitmqctl of the broker at QB_TEST_AMQP_URL: {e}")
        });
    assert!(
        output.status.success(),
        "rabbitmqctl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A virtual host of its own for one test, removed on drop.
pub struct TestVhost {
    pub name: String,
}

impl TestVhost {
    pub fn create(user: &str) -> Self {
        let name = unique("vhost");
        rabbitmqctl(&["-q", "add_vhost", &name]);
        rabbitmqctl(&["-q", "set_permissions", "-p", &name, user, ".*", ".*", ".*"]);
        Self { name }
    }

    /// The number of client connections open on this vhost.
    pub fn connections(&self) -> usize {
        rabbitmqctl(&["-q", "--no-table-headers", "list_connections", "vhost"])
            .lines()
            .filter(|line| line.trim() == self.name)
            .count()
    }

    /// Makes the broker close every connection of this vhost.
    pub fn close_connections(&self) {
        rabbitmqctl(&[
            "-q",
            "close_all_connections",
            "-p",
            &self.name,
            "closed by the QueueBox test",
        ]);
    }
}

impl Drop for TestVhost {
    fn drop(&mut self) {
        let _ = Command::new("rabbitmqctl")
            .args(["-q", "delete_vhost", &self.name])
            .output();
    }
}

/// `host:port` of the broker in `url`.
pub fn broker_address(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let end = url[start..].find('/').map_or(url.len(), |i| start + i);
    let authority = &url[start..end];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:5672")
    }
}

/// Declares a durable queue as an operator would.
pub async fn declare_queue(channel: &Channel, queue: &str) {
    channel
        .queue_declare(
            ShortString::from(queue),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
}

//! The publisher conformance suite (queuebox-conformance) against the Kafka publisher and the real
//! broker of `QB_TEST_KAFKA_BOOTSTRAP` (skipped, with a message, when it is unset): a topic
//! (accepting), a compacted topic the publisher sends records without a key to, which the broker
//! refuses (refusing), a closed port (unreachable), and the proxied listener behind a TCP proxy
//! holding the broker's answers (silent).

#![allow(clippy::unwrap_used)]

mod support;

use async_trait::async_trait;
use queuebox_conformance::proxy::FaultProxy;
use queuebox_conformance::proxy::closed_port;
use queuebox_conformance::publish::PublisherFixture;
use queuebox_domain::secret::Secret;
use queuebox_kafka::{KafkaPublisher, KafkaPublisherOptions, SecurityProtocol};
use queuebox_ports::publish::Publisher;
use std::sync::Arc;
use std::time::Duration;
use support::{Collector, PROXY_PORT, bootstrap, create_topic, delete_topics, unique};

/// The configured reason limit of every publisher (at or above the adapter's floor of 64 bytes).
const MAX_REASON: usize = 120;
/// The silent destination's publish budget (the smallest the adapter accepts).
const SILENT_TIMEOUT: Duration = Duration::from_secs(2);
/// A password the publishers carry (over SASL it would be sent; here it must never show).
const SECRET: &str = "kafka-conformance-secret";

struct KafkaFixture {
    topic: String,
    collector: Option<Collector>,
    proxy: Option<(FaultProxy, tokio::sync::MutexGuard<'static, ()>)>,
    held_at: u64,
}

fn publisher_options(servers: &str, topic: &str, timeout: Duration) -> KafkaPublisherOptions {
    let mut options = KafkaPublisherOptions::new("conformance", servers, topic);
    options.timeout = timeout;
    options.max_reason_bytes = MAX_REASON;
    // The password is set without SASL: librdkafka ignores it, and a reason must not show it.
    options.connection.sasl_password = Some(Secret::new(SECRET));
    options.connection.security_protocol = SecurityProtocol::Plaintext;
    options
}

fn publisher(options: KafkaPublisherOptions) -> Arc<dyn Publisher> {
    Arc::new(KafkaPublisher::new(options).unwrap_or_else(|e| panic!("{e}")))
}

impl KafkaFixture {
    fn plain(topic: String, collector: Option<Collector>) -> Self {
        Self {
            topic,
            collector,
            proxy: None,
            held_at: 0,
        }
    }
}

#[async_trait]
impl PublisherFixture for KafkaFixture {
    fn available() -> bool {
        bootstrap().is_some() && support::proxied().is_some()
    }

    async fn accepting() -> (Self, Arc<dyn Publisher>) {
        let topic = unique("conf");
        create_topic(&topic, 1, &[]).await;
        let collector = Collector::start(&topic, 1);
        let publisher = publisher(publisher_options(
            &bootstrap().unwrap(),
            &topic,
            Duration::from_secs(10),
        ));
        (Self::plain(topic, Some(collector)), publisher)
    }

    async fn refusing() -> (Self, Arc<dyn Publisher>) {
        // A compacted topic refuses a record without a key (INVALID_RECORD).
        let topic = unique("conf-compact");
        create_topic(&topic, 1, &[("cleanup.policy", "compact")]).await;
        let collector = Collector::start(&topic, 1);
        let mut options = publisher_options(&bootstrap().unwrap(), &topic, Duration::from_secs(10));
        options.key_template = String::new();
        (Self::plain(topic, Some(collector)), publisher(options))
    }

    async fn unreachable() -> (Self, Arc<dyn Publisher>) {
        let servers = format!("127.0.0.1:{}", closed_port());
        let publisher = publisher(publisher_options(&servers, "conf-down", SILENT_TIMEOUT));
        (Self::plain("conf-down".to_owned(), None), publisher)
    }

    async fn silent() -> (Self, Arc<dyn Publisher>) {
        let guard = PROXY_PORT.lock().await;
        let topic = unique("conf-silent");
        create_topic(&topic, 1, &[]).await;
        let collector = Collector::start(&topic, 1);
        let proxy = support::proxy().await;
        let publisher = publisher(publisher_options(proxy.address(), &topic, SILENT_TIMEOUT));
        // One publish through the proxy first, so the producer holds its connection and the
        // topic's metadata; what is held afterwards is the answer to a produce.
        let warm = queuebox_conformance::publish::message("conformance.warm");
        support::wait_for("a first publish through the proxy", || async {
            publisher.publish(&warm).await.ok()
        })
        .await;
        proxy.hold();
        let held_at = proxy.upstream_bytes();
        let fixture = Self {
            topic,
            collector: Some(collector),
            proxy: Some((proxy, guard)),
            held_at,
        };
        (fixture, publisher)
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
        self.collector
            .as_ref()
            .map(Collector::ids)
            .unwrap_or_default()
    }

    async fn wait_until_reached(&self) {
        let (proxy, _) = self.proxy.as_ref().expect("only the silent fixture holds");
        let from = self.held_at;
        support::wait_for("a produce request through the proxy", || async {
            (proxy.upstream_bytes() > from).then_some(())
        })
        .await;
    }

    async fn release(&self) {
        if let Some((proxy, _)) = &self.proxy {
            proxy.release();
        }
    }

    async fn done(self) {
        if self.collector.is_some() {
            delete_topics(&[&self.topic]).await;
        }
    }
}

queuebox_conformance::publisher_conformance_suite!(KafkaFixture);

//! The source conformance suite (`queuebox-conformance`) against the real brokers at
//! `QB_TEST_KAFKA_BOOTSTRAP`: the Kafka source client run by the application's source driver,
//! one single-partition topic and one group per test.

#![allow(clippy::unwrap_used)]

mod support;

use async_trait::async_trait;
use queuebox_application::source::SourceDriver;
use queuebox_conformance::source::{RETRY_DELAY, RunningSource, SourceFixture};
use queuebox_kafka::{KafkaSource, KafkaSourceOptions};
use queuebox_ports::ingest::Ingest;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::FutureProducer;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use support::{bootstrap, create_topic, delete_topics, producer, send, skip, unique};

struct Kafka {
    topic: String,
    group: String,
    producer: FutureProducer,
    published: AtomicU64,
}

#[async_trait]
impl SourceFixture for Kafka {
    fn available() -> bool {
        !skip()
    }

    async fn fresh() -> Self {
        let topic = unique("conf-src");
        create_topic(&topic, 1, &[]).await;
        Self {
            group: format!("{topic}-group"),
            topic,
            producer: producer(),
            published: AtomicU64::new(0),
        }
    }

    fn start(&self, ingest: Arc<dyn Ingest>) -> RunningSource {
        let mut options = KafkaSourceOptions::new(
            "conformance",
            bootstrap().unwrap(),
            vec![self.topic.clone()],
            &self.group,
        );
        options.retry_delay_min = RETRY_DELAY;
        options.retry_delay_max = RETRY_DELAY * 4;
        options.probe_interval = Duration::from_millis(500);
        let driver = SourceDriver::new(KafkaSource::new(options).unwrap(), ingest);
        RunningSource::spawn(driver.health(), |stop| driver.run(stop))
    }

    async fn publish(&self, body: &[u8]) {
        send(&self.producer, &self.topic, Some(0), None, body, &[]).await;
        self.published.fetch_add(1, Ordering::SeqCst);
    }

    async fn unsettled(&self) -> u64 {
        let (group, topic) = (self.group.clone(), self.topic.clone());
        let committed = tokio::task::spawn_blocking(move || {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", bootstrap().unwrap())
                .set("group.id", &group)
                .create()
                .unwrap();
            let mut list = TopicPartitionList::new();
            list.add_partition(&topic, 0);
            consumer
                .committed_offsets(list, Duration::from_secs(10))
                .ok()
                .and_then(|c| match c.find_partition(&topic, 0)?.offset() {
                    Offset::Offset(o) => u64::try_from(o).ok(),
                    _ => Some(0),
                })
        })
        .await
        .unwrap()
        .unwrap_or(0);
        self.published
            .load(Ordering::SeqCst)
            .saturating_sub(committed)
    }

    fn name(&self) -> String {
        format!("topic `{}`", self.topic)
    }

    async fn remove(&self) {
        delete_topics(&[&self.topic]).await;
    }

    async fn restore(&self) {
        // A deleted topic takes a moment to go; creating it again fails until then.
        for _ in 0..50 {
            let created = tokio::spawn({
                let topic = self.topic.clone();
                async move { create_topic(&topic, 1, &[]).await }
            })
            .await;
            if created.is_ok() {
                self.published.store(0, Ordering::SeqCst);
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("topic {} could not be created again", self.topic);
    }

    async fn done(self) {
        delete_topics(&[&self.topic]).await;
    }
}

queuebox_conformance::source_conformance_suite!(Kafka);

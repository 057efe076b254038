//! The source conformance suite (`queuebox-conformance`) against the real broker at
//! `QB_TEST_AMQP_URL`: the RabbitMQ source client run by the application's source driver, one
//! durable queue per test.

#![allow(clippy::unwrap_used)]

mod support;

use async_trait::async_trait;
use lapin::BasicProperties;
use lapin::options::BasicPublishOptions;
use lapin::types::ShortString;
use queuebox_application::source::SourceDriver;
use queuebox_conformance::source::{RETRY_DELAY, RunningSource, SourceFixture};
use queuebox_domain::secret::Secret;
use queuebox_ports::ingest::Ingest;
use queuebox_rabbitmq::{RabbitmqSource, RabbitmqSourceOptions};
use std::sync::Arc;
use std::time::Duration;
use support::{TestClient, amqp_url, declare_queue, rabbitmqctl, unique};

struct Rabbitmq {
    url: String,
    queue: String,
    client: TestClient,
}

impl Rabbitmq {
    async fn declare(&self) {
        declare_queue(&self.client.channel, &self.queue).await;
    }
}

#[async_trait]
impl SourceFixture for Rabbitmq {
    fn available() -> bool {
        amqp_url().is_some()
    }

    async fn fresh() -> Self {
        let url = amqp_url().unwrap();
        let client = TestClient::connect(&url).await;
        let fixture = Self {
            queue: unique("conf-src"),
            url,
            client,
        };
        fixture.declare().await;
        fixture
    }

    fn start(&self, ingest: Arc<dyn Ingest>) -> RunningSource {
        let mut options =
            RabbitmqSourceOptions::new("conformance", Secret::new(self.url.as_str()), &self.queue);
        options.reconnect_delay_min = Duration::from_millis(50);
        options.reconnect_delay_max = Duration::from_millis(250);
        options.requeue_delay_min = RETRY_DELAY;
        options.requeue_delay_max = RETRY_DELAY * 4;
        let driver = SourceDriver::new(RabbitmqSource::new(options).unwrap(), ingest);
        RunningSource::spawn(driver.health(), |stop| driver.run(stop))
    }

    async fn publish(&self, body: &[u8]) {
        self.client
            .channel
            .basic_publish(
                ShortString::from(""),
                ShortString::from(self.queue.as_str()),
                BasicPublishOptions::default(),
                body,
                BasicProperties::default(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }

    async fn unsettled(&self) -> u64 {
        let listing = rabbitmqctl(&[
            "-q",
            "--no-table-headers",
            "list_queues",
            "-p",
            "/",
            "name",
            "messages_ready",
            "messages_unacknowledged",
        ]);
        listing
            .lines()
            .find_map(|line| {
                let mut fields = line.split_whitespace();
                if fields.next()? != self.queue {
                    return None;
                }
                let ready: u64 = fields.next()?.parse().ok()?;
                let unacked: u64 = fields.next()?.parse().ok()?;
                Some(ready + unacked)
            })
            .unwrap_or(u64::MAX)
    }

    fn name(&self) -> String {
        format!("queue `{}`", self.queue)
    }

    async fn remove(&self) {
        self.client.clean(&[], &[&self.queue]).await;
    }

    async fn restore(&self) {
        self.declare().await;
    }

    async fn done(self) {
        self.client.clean(&[], &[&self.queue]).await;
    }
}

queuebox_conformance::source_conformance_suite!(Rabbitmq);

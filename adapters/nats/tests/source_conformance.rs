//! The source conformance suite (`queuebox-conformance`) against the real server at
//! `QB_TEST_NATS_URL`: the NATS source client run by the application's source driver, one
//! stream per test.

#![allow(clippy::unwrap_used)]

mod support;

use async_trait::async_trait;
use queuebox_application::source::SourceDriver;
use queuebox_conformance::source::{RETRY_DELAY, RunningSource, SourceFixture};
use queuebox_domain::secret::Secret;
use queuebox_nats::{NatsSource, NatsSourceOptions};
use queuebox_ports::ingest::Ingest;
use std::sync::Arc;
use std::time::Duration;
use support::{TestClient, nats_url, unique};

const DURABLE: &str = "conformance";

struct Nats {
    url: String,
    stream: String,
    client: TestClient,
}

impl Nats {
    async fn create(&self) {
        let subjects = format!("{}.>", self.stream);
        self.client.stream(&self.stream, &[&subjects], |_| {}).await;
    }
}

#[async_trait]
impl SourceFixture for Nats {
    fn available() -> bool {
        nats_url().is_some()
    }

    async fn fresh() -> Self {
        let url = nats_url().unwrap();
        let client = TestClient::connect(&url).await;
        let fixture = Self {
            stream: unique("conf"),
            url,
            client,
        };
        fixture.create().await;
        fixture
    }

    fn start(&self, ingest: Arc<dyn Ingest>) -> RunningSource {
        let mut options = NatsSourceOptions::new(
            "conformance",
            Secret::new(self.url.as_str()),
            &self.stream,
            DURABLE,
        );
        options.retry_delay_min = Duration::from_millis(50);
        options.retry_delay_max = Duration::from_millis(250);
        options.nak_delay_min = RETRY_DELAY;
        options.nak_delay_max = RETRY_DELAY * 4;
        // A killed source's message comes back after this.
        options.ack_wait = Duration::from_secs(2);
        let driver = SourceDriver::new(NatsSource::new(options).unwrap(), ingest);
        RunningSource::spawn(driver.health(), |stop| driver.run(stop))
    }

    async fn publish(&self, body: &[u8]) {
        self.client
            .jetstream
            .publish(format!("{}.x", self.stream), body.to_vec().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }

    async fn unsettled(&self) -> u64 {
        let Ok(stream) = self.client.jetstream.get_stream(&self.stream).await else {
            return u64::MAX;
        };
        match stream.consumer_info(DURABLE).await {
            Ok(info) => info.num_pending + u64::try_from(info.num_ack_pending).unwrap_or(u64::MAX),
            Err(_) => u64::MAX,
        }
    }

    fn name(&self) -> String {
        format!("stream `{}`", self.stream)
    }

    async fn remove(&self) {
        self.client.delete(&self.stream).await;
    }

    async fn restore(&self) {
        self.create().await;
    }

    async fn done(self) {
        self.client.delete(&self.stream).await;
    }
}

queuebox_conformance::source_conformance_suite!(Nats);

//! The source conformance suite (queuebox-conformance) against the Redis source under the driver
//! and the real server of `QB_TEST_REDIS_URL` (skipped, with a message, when it is unset). Each
//! fixture reads a fresh stream through the group `qb` as the consumer `conformance`, so a source
//! started again after a kill reads its own pending entries first. "Gone" is the stream key
//! holding a string: Redis has no missing stream for a group reader (the source creates stream
//! and group when missing), but a key of the wrong type refuses every group command.

#![allow(clippy::unwrap_used)]

mod support;

use async_trait::async_trait;
use queuebox_application::source::SourceDriver;
use queuebox_conformance::source::{RETRY_DELAY, RunningSource, SourceFixture, WAIT};
use queuebox_domain::secret::Secret;
use queuebox_ports::ingest::Ingest;
use queuebox_redis::{RedisSource, RedisSourceOptions};
use redis::aio::MultiplexedConnection;
use std::sync::Arc;
use std::time::Duration;
use support::{connection, redis_url, unique};

struct RedisFixture {
    url: String,
    stream: String,
    redis: MultiplexedConnection,
}

#[async_trait]
impl SourceFixture for RedisFixture {
    fn available() -> bool {
        redis_url().is_some()
    }

    async fn fresh() -> Self {
        let url = redis_url().expect("available() checked QB_TEST_REDIS_URL");
        let redis = connection(&url).await;
        Self {
            url,
            stream: unique("srcconf"),
            redis,
        }
    }

    fn start(&self, ingest: Arc<dyn Ingest>) -> RunningSource {
        let mut options = RedisSourceOptions::new(
            "conformance",
            Secret::new(self.url.clone()),
            self.stream.clone(),
            "qb",
            "conformance",
        );
        options.block = Duration::from_millis(200);
        options.store_retry_min = RETRY_DELAY;
        options.store_retry_max = RETRY_DELAY * 4;
        options.retry_delay_max = Duration::from_millis(500);
        options.drain_timeout = WAIT / 2;
        let driver = SourceDriver::new(RedisSource::new(options).unwrap(), ingest);
        RunningSource::spawn(driver.health(), move |stop| driver.run(stop))
    }

    async fn publish(&self, body: &[u8]) {
        let _: String = redis::cmd("XADD")
            .arg(&self.stream)
            .arg("*")
            .arg("payload")
            .arg(body)
            .query_async(&mut self.redis.clone())
            .await
            .unwrap();
    }

    async fn unsettled(&self) -> u64 {
        // The group's pending entries plus its lag (entries not delivered yet).
        let groups: redis::Value = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(&self.stream)
            .query_async(&mut self.redis.clone())
            .await
            .unwrap_or(redis::Value::Nil);
        let redis::Value::Array(groups) = groups else {
            return 0;
        };
        let mut total = 0;
        for group in groups {
            let fields: Vec<(String, redis::Value)> = match group {
                redis::Value::Array(flat) => flat
                    .chunks(2)
                    .filter_map(|c| match (&c[0], c.get(1)) {
                        (redis::Value::BulkString(k), Some(v)) => {
                            Some((String::from_utf8_lossy(k).into_owned(), v.clone()))
                        }
                        _ => None,
                    })
                    .collect(),
                _ => continue,
            };
            for (name, value) in fields {
                if (name == "pending" || name == "lag")
                    && let redis::Value::Int(n) = value
                {
                    total += u64::try_from(n).unwrap_or(0);
                }
            }
        }
        total
    }

    fn name(&self) -> String {
        self.stream.clone()
    }

    async fn remove(&self) {
        let mut redis = self.redis.clone();
        let _: () = redis::cmd("DEL")
            .arg(&self.stream)
            .query_async(&mut redis)
            .await
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg(&self.stream)
            .arg("not a stream")
            .query_async(&mut redis)
            .await
            .unwrap();
    }

    async fn restore(&self) {
        let _: () = redis::cmd("DEL")
            .arg(&self.stream)
            .query_async(&mut self.redis.clone())
            .await
            .unwrap();
    }

    async fn done(self) {
        let _: Result<(), _> = redis::cmd("DEL")
            .arg(&self.stream)
            .query_async(&mut self.redis.clone())
            .await;
    }
}

queuebox_conformance::source_conformance_suite!(RedisFixture);

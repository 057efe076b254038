//! The publisher conformance suite (queuebox-conformance) against the Redis publisher and the real
//! server of `QB_TEST_REDIS_URL` (skipped, with a message, when it is unset): a fresh stream key
//! (accepting), a key that holds a string so every `XADD` is answered `WRONGTYPE` (refusing), a
//! closed port (unreachable), and a TCP proxy holding the server's answers (silent).

#![allow(clippy::unwrap_used)]

mod support;

use async_trait::async_trait;
use queuebox_conformance::proxy::{FaultProxy, closed_port};
use queuebox_conformance::publish::{PublisherFixture, WAIT};
use queuebox_domain::secret::Secret;
use queuebox_ports::publish::Publisher;
use queuebox_redis::{RedisPublisher, RedisPublisherOptions};
use redis::aio::MultiplexedConnection;
use std::sync::Arc;
use std::time::Duration;
use support::{connection, ids, redis_url, server_address, unique, wait_for};

/// The configured reason limit of every publisher.
const MAX_REASON: usize = 100;
/// How long the silent destination's publisher waits for the answer.
const SILENT_TIMEOUT: Duration = Duration::from_secs(2);
/// The password the unreachable publisher's URL carries; it must never show in a reason.
const SECRET: &str = "qb-conformance-pw-4711";

struct RedisFixture {
    connection: Option<MultiplexedConnection>,
    stream: String,
    proxy: Option<FaultProxy>,
    sent_at_hold: u64,
}

fn url() -> String {
    redis_url().expect("available() checked QB_TEST_REDIS_URL")
}

fn publisher(url: &str, stream: &str, timeout: Duration) -> RedisPublisher {
    let mut options = RedisPublisherOptions::new("conformance", Secret::new(url), stream);
    options.timeout = timeout;
    options.max_reason_bytes = MAX_REASON;
    RedisPublisher::new(options).unwrap_or_else(|e| panic!("{e}"))
}

impl RedisFixture {
    async fn fresh() -> Self {
        Self {
            connection: Some(connection(&url()).await),
            stream: unique("conf"),
            proxy: None,
            sent_at_hold: 0,
        }
    }
}

#[async_trait]
impl PublisherFixture for RedisFixture {
    fn available() -> bool {
        redis_url().is_some()
    }

    async fn accepting() -> (Self, Arc<dyn Publisher>) {
        let fixture = Self::fresh().await;
        let publisher = publisher(&url(), &fixture.stream, WAIT);
        (fixture, Arc::new(publisher))
    }

    async fn refusing() -> (Self, Arc<dyn Publisher>) {
        // The key holds a string: Redis answers every XADD with WRONGTYPE.
        let mut fixture = Self::fresh().await;
        let connection = fixture.connection.as_mut().expect("a connection");
        let _: () = redis::cmd("SET")
            .arg(&fixture.stream)
            .arg("not a stream")
            .query_async(connection)
            .await
            .unwrap();
        let publisher = publisher(&url(), &fixture.stream, WAIT);
        (fixture, Arc::new(publisher))
    }

    async fn unreachable() -> (Self, Arc<dyn Publisher>) {
        let url = format!("redis://queuebox:{SECRET}@127.0.0.1:{}", closed_port());
        let fixture = Self {
            connection: None,
            stream: String::new(),
            proxy: None,
            sent_at_hold: 0,
        };
        (fixture, Arc::new(publisher(&url, "x", WAIT)))
    }

    async fn silent() -> (Self, Arc<dyn Publisher>) {
        let mut fixture = Self::fresh().await;
        let proxy = FaultProxy::start(server_address(&url())).await;
        let publisher = publisher(
            &format!("redis://127.0.0.1:{}", proxy.port()),
            &fixture.stream,
            SILENT_TIMEOUT,
        );
        // Connected before the proxy holds the answers, so a publish is what waits.
        publisher
            .connect()
            .await
            .expect("connects through the proxy");
        proxy.hold();
        fixture.sent_at_hold = proxy.upstream_bytes();
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
        match &self.connection {
            Some(connection) => ids(&mut connection.clone(), &self.stream).await,
            None => Vec::new(),
        }
    }

    async fn wait_until_reached(&self) {
        let proxy = self.proxy.as_ref().expect("a silent destination");
        wait_for("a publish to reach the server", || async {
            (proxy.upstream_bytes() > self.sent_at_hold).then_some(())
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
        }
        if let Some(mut connection) = self.connection {
            let _: Result<(), _> = redis::cmd("DEL")
                .arg(&self.stream)
                .query_async(&mut connection)
                .await;
        }
    }
}

queuebox_conformance::publisher_conformance_suite!(RedisFixture);

//! The publisher conformance suite (queuebox-conformance) against the Redis publisher and the real
//! server of `QB_TEST_REDIS_URL` (skipped, with a message, when it is unset): a fresh stream key
//! (accepting), a key that holds a string so every `XADD` is answered `WRONGTYPE` (refusing), a
//! closed port (unreachable), and a TCP relay holding the server's answers (silent).

#![allow(clippy::unwrap_used)]

mod support;

use async_trait::async_trait;
use queuebox_conformance::publish::{PublisherFixture, WAIT};
use queuebox_domain::secret::Secret;
use queuebox_ports::publish::Publisher;
use queuebox_redis::{RedisPublisher, RedisPublisherOptions};
use redis::aio::MultiplexedConnection;
use std::sync::Arc;
use std::time::Duration;
use support::{Relay, closed_port, connection, ids, redis_url, server_address, unique, wait_for};

/// The configured reason limit of every publisher.
const MAX_REASON: usize = 100;
/// How long the silent destination's publisher waits for the answer.
const SILENT_TIMEOUT: Duration = Duration::from_secs(2);
/// The password the unreachable publisher's URL carries; it must never show in a reason.
const SECRET: &str = "qb-conformance-pw-4711";

struct RedisFixture {
    connection: Option<MultiplexedConnection>,
    stream: String,
    relay: Option<Relay>,
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
            relay: None,
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
            relay: None,
            sent_at_hold: 0,
        };
        (fixture, Arc::new(publisher(&url, "x", WAIT)))
    }

    async fn silent() -> (Self, Arc<dyn Publisher>) {
        let mut fixture = Self::fresh().await;
        let relay = Relay::start(server_address(&url())).await;
        let publisher = publisher(
            &format!("redis://127.0.0.1:{}", relay.port),
            &fixture.stream,
            SILENT_TIMEOUT,
        );
        // Connected before the relay holds the answers, so a publish is what waits.
        publisher
            .connect()
            .await
            .expect("connects through the relay");
        relay.hold();
        fixture.sent_at_hold = relay.sent();
        fixture.relay = Some(relay);
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
        let relay = self.relay.as_ref().expect("a silent destination");
        wait_for("a publish to reach the server", || async {
            (relay.sent() > self.sent_at_hold).then_some(())
        })
        .await;
    }

    async fn release(&self) {
        if let Some(relay) = &self.relay {
            relay.release();
        }
    }

    async fn done(self) {
        if let Some(relay) = &self.relay {
            relay.release();
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

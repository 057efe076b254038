//! The publisher conformance suite (queuebox-conformance) against the HTTP destination: real
//! receivers on 127.0.0.1 (tests/support) that answer 2xx, answer 500, do not exist (a closed
//! port) or hold their answer until released.

mod support;

use async_trait::async_trait;
use queuebox_conformance::publish::PublisherFixture;
use queuebox_domain::secret::Secret;
use queuebox_ports::publish::Publisher;
use queuebox_webhook::{HttpAuth, HttpDestination, HttpDestinationOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Reply, Request, TestServer, closed_port_url};

/// The credential every destination sends (a static auth header); a refusing receiver echoes it.
const SECRET: &str = "qb-conformance-s3cret-4711";

/// `http.maxErrorBodyBytes` of every destination.
const MAX_BODY: usize = 100;

/// The HTTP destination cuts the receiver's body to `maxErrorBodyBytes` and puts the status line
/// before it; this is the longest such line the refusing receiver (HTTP 500) causes.
const STATUS_LINE: &str = "the destination answered HTTP 500 Internal Server Error: ";

/// How long the silent receiver's publisher waits for an answer.
const SILENT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a held answer is held (far beyond any timeout of the suite).
const HELD: Duration = Duration::from_secs(120);

struct HttpFixture {
    server: Option<TestServer>,
    received: Arc<Mutex<Vec<String>>>,
    held: Arc<AtomicBool>,
}

impl HttpFixture {
    /// A receiver answering with `answer`, and a destination posting to it.
    async fn start(
        answer: impl Fn(&Request, bool) -> Reply + Send + Sync + 'static,
        timeout: Duration,
    ) -> (Self, Arc<dyn Publisher>) {
        let received = Arc::new(Mutex::new(Vec::new()));
        let held = Arc::new(AtomicBool::new(false));
        let server = {
            let received = Arc::clone(&received);
            let held = Arc::clone(&held);
            TestServer::start(move |request| {
                let reply = answer(request, held.load(Ordering::SeqCst));
                if (200..300).contains(&reply.status)
                    && reply.delay.is_zero()
                    && let Some(id) = request.header("x-message-id")
                {
                    received.lock().expect("lock").push(id.to_owned());
                }
                reply
            })
            .await
        };
        let publisher = destination(server.base_url(), timeout).await;
        let fixture = Self {
            server: Some(server),
            received,
            held,
        };
        (fixture, publisher)
    }
}

async fn destination(base_url: String, timeout: Duration) -> Arc<dyn Publisher> {
    let mut options = HttpDestinationOptions::new("conformance", base_url);
    options.path = "/events".to_owned();
    options.timeout = timeout;
    options.max_error_body_bytes = MAX_BODY;
    options.auth = HttpAuth::Header {
        name: "X-Api-Key".to_owned(),
        value: Secret::new(SECRET),
    };
    match HttpDestination::new(options).await {
        Ok(destination) => Arc::new(destination),
        Err(error) => panic!("{error}"),
    }
}

#[async_trait]
impl PublisherFixture for HttpFixture {
    async fn accepting() -> (Self, Arc<dyn Publisher>) {
        Self::start(|_, _| Reply::status(200), Duration::from_secs(10)).await
    }

    async fn refusing() -> (Self, Arc<dyn Publisher>) {
        Self::start(
            |request, _| {
                let key = request.header("x-api-key").unwrap_or_default();
                Reply::status(500).body(format!(
                    "refused the key {key}: {}",
                    "x".repeat(MAX_BODY * 50)
                ))
            },
            Duration::from_secs(10),
        )
        .await
    }

    async fn unreachable() -> (Self, Arc<dyn Publisher>) {
        let publisher = destination(closed_port_url().await, Duration::from_secs(10)).await;
        let fixture = Self {
            server: None,
            received: Arc::default(),
            held: Arc::default(),
        };
        (fixture, publisher)
    }

    async fn silent() -> (Self, Arc<dyn Publisher>) {
        let (fixture, publisher) = Self::start(
            |_, held| {
                if held {
                    Reply::status(200).delay(HELD)
                } else {
                    Reply::status(200)
                }
            },
            SILENT_TIMEOUT,
        )
        .await;
        fixture.held.store(true, Ordering::SeqCst);
        (fixture, publisher)
    }

    fn secret(&self) -> &str {
        SECRET
    }

    fn reason_limit(&self) -> usize {
        STATUS_LINE.len() + MAX_BODY
    }

    fn timeout(&self) -> Duration {
        SILENT_TIMEOUT
    }

    async fn received(&self) -> Vec<String> {
        self.received.lock().expect("lock").clone()
    }

    async fn wait_until_reached(&self) {
        self.server
            .as_ref()
            .expect("a receiver")
            .wait_for(1, queuebox_conformance::publish::WAIT)
            .await;
    }

    async fn release(&self) {
        self.held.store(false, Ordering::SeqCst);
    }
}

queuebox_conformance::publisher_conformance_suite!(HttpFixture);

//! Shared helpers of the Redis adapter tests: the server from `QB_TEST_REDIS_URL`, unique keys, a
//! plain client that reads streams back, and a TCP relay that can hold the server's answers.

#![allow(dead_code, clippy::unwrap_used)]

use redis::aio::MultiplexedConnection;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long a test waits for a condition before it fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// The server URL, or `None` (with a message) when the variable is unset.
pub fn redis_url() -> Option<String> {
    let url = std::env::var("QB_TEST_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty());
    if url.is_none() {
        eprintln!(
            "skipped: QB_TEST_REDIS_URL is not set (eval \"$(bash scripts/services.sh)\" first)"
        );
    }
    url
}

/// A key no other test uses.
pub fn unique(prefix: &str) -> String {
    format!("qb:{prefix}:{}", uuid::Uuid::new_v4().simple())
}

/// Waits until `check` gives a value, or fails after [`WAIT`] naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A plain connection for setting up keys and reading streams back.
pub async fn connection(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Every entry of `stream` as `(entry id, fields in order)`.
pub async fn entries(
    connection: &mut MultiplexedConnection,
    stream: &str,
) -> Vec<(String, Vec<(String, String)>)> {
    let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(stream)
        .arg("-")
        .arg("+")
        .query_async(connection)
        .await
        .unwrap_or_default();
    entries
}

/// The `x-message-id` field of every entry of `stream`.
pub async fn ids(connection: &mut MultiplexedConnection, stream: &str) -> Vec<String> {
    entries(connection, stream)
        .await
        .into_iter()
        .filter_map(|(_, fields)| {
            fields
                .into_iter()
                .find(|(n, _)| n == "x-message-id")
                .map(|(_, v)| v)
        })
        .collect()
}

/// `host:port` of the server in `url`.
pub fn server_address(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest).to_owned()
}

/// A port on 127.0.0.1 where nothing listens.
pub fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A TCP relay in front of the server that can hold the server's answers back.
pub struct Relay {
    pub port: u16,
    held: Arc<AtomicBool>,
    resume: Arc<Notify>,
    sent: Arc<AtomicU64>,
}

impl Relay {
    /// A relay on 127.0.0.1 to `target` (`host:port`).
    pub async fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay = Self {
            port: listener.local_addr().unwrap().port(),
            held: Arc::new(AtomicBool::new(false)),
            resume: Arc::new(Notify::new()),
            sent: Arc::new(AtomicU64::new(0)),
        };
        let (held, resume, sent) = (
            Arc::clone(&relay.held),
            Arc::clone(&relay.resume),
            Arc::clone(&relay.sent),
        );
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&target).await else {
                    continue;
                };
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_server, mut to_server) = server.into_split();
                let counted = Arc::clone(&sent);
                tokio::spawn(async move {
                    let mut buffer = [0u8; 8192];
                    while let Ok(n @ 1..) = from_client.read(&mut buffer).await {
                        counted.fetch_add(n as u64, Ordering::SeqCst);
                        if to_server.write_all(&buffer[..n]).await.is_err() {
                            break;
                        }
                    }
                });
                let (held, resume) = (Arc::clone(&held), Arc::clone(&resume));
                tokio::spawn(async move {
                    let mut buffer = [0u8; 8192];
                    while let Ok(n @ 1..) = from_server.read(&mut buffer).await {
                        loop {
                            let resumed = resume.notified();
                            if !held.load(Ordering::SeqCst) {
                                break;
                            }
                            resumed.await;
                        }
                        if to_client.write_all(&buffer[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        relay
    }

    /// The server's answers wait in the relay from now on.
    pub fn hold(&self) {
        self.held.store(true, Ordering::SeqCst);
    }

    /// The held answers and later ones pass again.
    pub fn release(&self) {
        self.held.store(false, Ordering::SeqCst);
        self.resume.notify_waiters();
    }

    /// Bytes the clients have sent so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }
}

/// An ingest pipeline that records what it is handed and answers from a script: the first
/// `fail_first` calls fail to store, every later one stores (a repeated `x-message-id` is a
/// duplicate).
pub struct Recorder {
    fail_first: AtomicU64,
    pub calls: std::sync::Mutex<Vec<queuebox_ports::ingest::Received>>,
    stored: std::sync::Mutex<Vec<String>>,
}

impl Recorder {
    pub fn new(fail_first: u64) -> Arc<Self> {
        Arc::new(Self {
            fail_first: AtomicU64::new(fail_first),
            calls: std::sync::Mutex::new(Vec::new()),
            stored: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The `x-message-id` of each stored message, in store order.
    pub fn stored(&self) -> Vec<String> {
        self.stored.lock().unwrap().clone()
    }

    pub fn calls(&self) -> usize {
        self.calls.lock().unwrap().len()
    }
}

#[async_trait::async_trait]
impl queuebox_ports::ingest::Ingest for Recorder {
    async fn ingest(
        &self,
        _source: &str,
        received: queuebox_ports::ingest::Received,
    ) -> queuebox_ports::ingest::Ingested {
        use queuebox_ports::ingest::{IngestOutcome, Ingested, Rejection};
        let id = received
            .headers
            .iter()
            .find(|(n, _)| n == "x-message-id")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        self.calls.lock().unwrap().push(received);
        let failing = self
            .fail_first
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        let outcome = if failing {
            IngestOutcome::Rejected(Rejection::StorageFailed)
        } else {
            let mut stored = self.stored.lock().unwrap();
            if stored.contains(&id) {
                IngestOutcome::Duplicate
            } else {
                stored.push(id);
                IngestOutcome::Stored {
                    id: uuid::Uuid::new_v4(),
                }
            }
        };
        Ingested::early(outcome)
    }
}

/// `XADD stream * x-message-id <id> payload <payload>`; returns the entry id.
pub async fn add(
    connection: &mut MultiplexedConnection,
    stream: &str,
    id: &str,
    payload: &str,
) -> String {
    redis::cmd("XADD")
        .arg(stream)
        .arg("*")
        .arg("x-message-id")
        .arg(id)
        .arg("payload")
        .arg(payload)
        .query_async(connection)
        .await
        .unwrap()
}

/// How many entries of `group` are pending (delivered, not acknowledged).
pub async fn pending(connection: &mut MultiplexedConnection, stream: &str, group: &str) -> usize {
    let summary: redis::Value = redis::cmd("XPENDING")
        .arg(stream)
        .arg(group)
        .query_async(connection)
        .await
        .unwrap();
    match summary {
        redis::Value::Array(parts) => match parts.first() {
            Some(redis::Value::Int(n)) => usize::try_from(*n).unwrap(),
            _ => 0,
        },
        _ => 0,
    }
}

//! What the Kafka adapter's integration tests share: the broker addresses `scripts/services.sh`
//! exports, topics created and deleted through the admin API, a collector that reads a topic from
//! its start, and a TCP proxy on the broker's proxied listener.

#![allow(dead_code, clippy::unwrap_used)]

use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Headers;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// How long a test waits for anything the broker does.
pub const WAIT: Duration = Duration::from_secs(30);

/// The PLAINTEXT bootstrap address, or `None` (the test then says it is skipped).
pub fn bootstrap() -> Option<String> {
    std::env::var("QB_TEST_KAFKA_BOOTSTRAP")
        .ok()
        .filter(|v| !v.is_empty())
}

/// The SASL_PLAINTEXT (SCRAM) bootstrap address.
pub fn sasl_bootstrap() -> Option<String> {
    std::env::var("QB_TEST_KAFKA_SASL_BOOTSTRAP")
        .ok()
        .filter(|v| !v.is_empty())
}

/// `user:password` pairs of the SCRAM users: the one with every right and the one with none.
pub fn scram_user(variable: &str) -> (String, String) {
    let value = std::env::var(variable).unwrap_or_else(|_| panic!("{variable} is not set"));
    let (user, password) = value.split_once(':').unwrap();
    (user.to_owned(), password.to_owned())
}

/// The proxied listener: the address a proxy must listen on and the address it forwards to.
pub fn proxied() -> Option<(String, String)> {
    let value = std::env::var("QB_TEST_KAFKA_PROXIED").ok()?;
    let (listen, target) = value.split_once("->")?;
    Some((listen.to_owned(), target.to_owned()))
}

/// Prints why the test does not run and returns true when Kafka is not configured.
pub fn skip() -> bool {
    if bootstrap().is_some() {
        return false;
    }
    eprintln!("skipped: QB_TEST_KAFKA_BOOTSTRAP is not set (run scripts/services.sh)");
    true
}

/// A name no other test uses.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

fn admin() -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap().unwrap())
        .create()
        .unwrap()
}

/// Creates `topic` with `partitions` partitions and the topic settings `configs`.
pub async fn create_topic(topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (key, value) in configs {
        new = new.set(key, value);
    }
    let results = admin()
        .create_topics(&[new], &AdminOptions::new().operation_timeout(Some(WAIT)))
        .await
        .unwrap();
    for result in results {
        result.unwrap_or_else(|(topic, code)| panic!("creating topic {topic}: {code}"));
    }
}

/// Deletes `topics` (best effort: a test that failed may have left them half made).
pub async fn delete_topics(topics: &[&str]) {
    let _ = admin().delete_topics(topics, &AdminOptions::new()).await;
}

/// One record as a test reads it back.
#[derive(Debug, Clone)]
pub struct Record {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<String>,
    pub payload: String,
    pub headers: Vec<(String, String)>,
}

impl Record {
    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads every partition of a topic from its start in the background.
pub struct Collector {
    records: Arc<Mutex<Vec<Record>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Collector {
    /// Starts reading `topic` (its `partitions` partitions) from offset 0.
    pub fn start(topic: &str, partitions: i32) -> Self {
        let consumer: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap().unwrap())
            .set("group.id", unique("collector"))
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        let mut assignment = TopicPartitionList::new();
        for partition in 0..partitions {
            assignment
                .add_partition_offset(topic, partition, Offset::Beginning)
                .unwrap();
        }
        consumer.assign(&assignment).unwrap();
        let records = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&records);
        let task = tokio::spawn(async move {
            loop {
                let Ok(message) = consumer.recv().await else {
                    continue;
                };
                let headers = message
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| {
                                (
                                    h.key.to_owned(),
                                    String::from_utf8_lossy(h.value.unwrap_or_default()).into(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                sink.lock().unwrap().push(Record {
                    partition: message.partition(),
                    offset: message.offset(),
                    key: message.key().map(|k| String::from_utf8_lossy(k).into()),
                    payload: String::from_utf8_lossy(message.payload().unwrap_or_default()).into(),
                    headers,
                });
            }
        });
        Self { records, task }
    }

    /// Everything read so far.
    pub fn records(&self) -> Vec<Record> {
        self.records.lock().unwrap().clone()
    }

    /// The `x-message-id` of every record read so far.
    pub fn ids(&self) -> Vec<String> {
        self.records()
            .iter()
            .filter_map(|r| r.header("x-message-id").map(str::to_owned))
            .collect()
    }

    /// Waits until at least `count` records were read, and returns them all.
    pub async fn wait_for_count(&self, count: usize) -> Vec<Record> {
        wait_for(&format!("{count} records"), || async {
            let records = self.records();
            (records.len() >= count).then_some(records)
        })
        .await
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A producer for records a source test consumes.
pub fn producer() -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap().unwrap())
        .set("enable.idempotence", "true")
        .create()
        .unwrap()
}

/// Sends one record with `key`, `payload` and `headers` to `topic`, partition `partition`.
pub async fn send(
    producer: &FutureProducer,
    topic: &str,
    partition: Option<i32>,
    key: Option<&str>,
    payload: &[u8],
    headers: &[(&str, &str)],
) {
    let mut owned = rdkafka::message::OwnedHeaders::new();
    for (name, value) in headers {
        owned = owned.insert(rdkafka::message::Header {
            key: name,
            value: Some(*value),
        });
    }
    let mut record = FutureRecord::to(topic).payload(payload).headers(owned);
    if let Some(key) = key {
        record = record.key(key);
    }
    if let Some(partition) = partition {
        record = record.partition(partition);
    }
    producer
        .send(record, Duration::from_secs(10))
        .await
        .unwrap_or_else(|(e, _)| panic!("sending to {topic}: {e}"));
}

/// Polls `check` every 20 ms until it gives a value, failing the test after [`WAIT`].
pub async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A port nothing listens on.
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The proxied listener is one fixed port: tests that use it take this lock.
pub static PROXY_PORT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A TCP proxy from the proxied listener's advertised address to its real one, which can hold
/// the broker's answers or cut every connection.
pub struct Proxy {
    pub address: String,
    shared: Arc<ProxyShared>,
    epoch: watch::Sender<u64>,
    accept: tokio::task::JoinHandle<()>,
}

struct ProxyShared {
    hold_down: AtomicBool,
    released: tokio::sync::Notify,
    upstream_bytes: AtomicU64,
}

impl Proxy {
    /// Listens on the proxied listener's advertised address.
    pub async fn start() -> Self {
        let (listen, target) = proxied().expect("QB_TEST_KAFKA_PROXIED is not set");
        // A proxy dropped just before may still hold the port until its task has stopped.
        let listener = wait_for("the proxied port to be free", || async {
            TcpListener::bind(&listen).await.ok()
        })
        .await;
        let shared = Arc::new(ProxyShared {
            hold_down: AtomicBool::new(false),
            released: tokio::sync::Notify::new(),
            upstream_bytes: AtomicU64::new(0),
        });
        let (epoch, _) = watch::channel(0u64);
        let accept_shared = Arc::clone(&shared);
        let accept_epoch = epoch.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(broker) = TcpStream::connect(&target).await else {
                    continue;
                };
                let shared = Arc::clone(&accept_shared);
                let mut cut = accept_epoch.subscribe();
                cut.mark_unchanged();
                tokio::spawn(async move {
                    tokio::select! {
                        () = pipe(client, broker, shared) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Self {
            address: listen,
            shared,
            epoch,
            accept,
        }
    }

    /// Stops passing the broker's bytes to the clients (they wait in the socket).
    pub fn hold(&self) {
        self.shared.hold_down.store(true, Ordering::SeqCst);
    }

    /// Passes the broker's bytes again.
    pub fn release(&self) {
        self.shared.hold_down.store(false, Ordering::SeqCst);
        self.shared.released.notify_waiters();
    }

    /// Bytes the clients sent so far.
    pub fn upstream_bytes(&self) -> u64 {
        self.shared.upstream_bytes.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.epoch.send_modify(|epoch| *epoch += 1);
    }
}

async fn pipe(client: TcpStream, broker: TcpStream, shared: Arc<ProxyShared>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut broker_read, mut broker_write) = broker.into_split();
    let up_shared = Arc::clone(&shared);
    let up = async move {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let n = match client_read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            up_shared
                .upstream_bytes
                .fetch_add(n as u64, Ordering::SeqCst);
            if broker_write.write_all(&buffer[..n]).await.is_err() {
                return;
            }
        }
    };
    let down = async move {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let n = match broker_read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            while shared.hold_down.load(Ordering::SeqCst) {
                let released = shared.released.notified();
                if !shared.hold_down.load(Ordering::SeqCst) {
                    break;
                }
                released.await;
            }
            if client_write.write_all(&buffer[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

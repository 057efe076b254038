//! What the Kafka adapter's integration tests share: the broker addresses `scripts/services.sh`
//! exports, topics created and deleted through the admin API, a collector that reads a topic from
//! its start, and queuebox-conformance's TCP fault proxy on the broker's proxied listener.

#![allow(dead_code, clippy::unwrap_used)]

use queuebox_conformance::proxy::FaultProxy;
use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Headers;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
pub async fn wait_for<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    queuebox_conformance::wait::wait_for(what, WAIT, check).await
}

/// The proxied listener is one fixed port: tests that use it take this lock.
pub static PROXY_PORT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A fault proxy from the proxied listener's advertised address to its real one (the caller
/// holds [`PROXY_PORT`]).
pub async fn proxy() -> FaultProxy {
    let (listen, target) = proxied().expect("QB_TEST_KAFKA_PROXIED is not set");
    FaultProxy::start_on(&listen, target).await
}

//! The Kafka inbox source: the topics of one source read by one consumer of its group.
//!
//! [`KafkaSource::run`] subscribes to `topics` in the group `groupId` and reads records in
//! batches of up to `maxPollRecords`. Each record becomes a
//! [`Received`](queuebox_ports::ingest::Received) (see `convert`) handed to [`Ingest::ingest`].
//! Records of one partition with the same record key are stored one after the other, in offset
//! order; the others side by side. Once the whole batch has answered, each partition's unbroken
//! run of done records is stored as the group's next offset (see `offsets`), and librdkafka
//! commits stored offsets every second, when partitions are taken away in a rebalance, and at
//! the stop. A record whose store failed is read again: the consumer seeks back to it after a
//! delay that grows while stores keep failing. So an offset is committed only after the rows of
//! every record before it committed, and a crash in between reads the records again, which the
//! inbox's idempotency key turns into duplicates.
//!
//! While a batch is being stored the consumer is not polled, so a rebalance waits for the batch
//! to finish and its offsets to be stored.

mod convert;
mod health;
mod offsets;
mod options;
mod settle;

pub use health::KafkaSourceHealth;
pub use options::{
    AutoOffsetReset, DEFAULT_MAX_POLL_RECORDS, DEFAULT_PROBE_INTERVAL, DEFAULT_RETRY_DELAY_MAX,
    DEFAULT_RETRY_DELAY_MIN, KafkaSourceOptions,
};

use crate::client::{client_config, redactor};
use crate::context::{LinkContext, LinkProblem};
use crate::error::KafkaError;
use futures::FutureExt;
use offsets::{Handled, plan};
use queuebox_domain::redact::Redactor;
use queuebox_ports::health::HealthCheck as _;
use queuebox_ports::ingest::Ingest;
use rdkafka::Message;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::message::OwnedMessage;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaErrorCode;
use settle::{Settlement, settlement};
use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How much of a failure reason is kept.
const MAX_REASON_BYTES: usize = 1024;
/// How long one broker call of the source (a metadata probe, a seek, the final commit) may block.
const BROKER_CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How often an unhealthy source checks its brokers and topics again.
const UNHEALTHY_PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// How often librdkafka commits the stored offsets.
const AUTO_COMMIT_INTERVAL: Duration = Duration::from_secs(1);
/// How long the group waits for a member that stopped answering (killed) before it hands the
/// member's partitions to the others. Kafka's floor is 6 s; 10 s keeps a crashed replica's
/// partitions idle briefly without rebalancing on a short pause.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// The most record data librdkafka fetches ahead per consumer, in KiB (its default, 64 MiB, would
/// hold a large share of the process's memory goal for records nobody reads yet).
const PREFETCH_MAX_KBYTES: u32 = 16 * 1024;
/// Records fetched ahead per `maxPollRecords`: enough to keep the next batches ready without
/// librdkafka's default of 100,000 records.
const PREFETCH_BATCHES: u32 = 10;
/// How often librdkafka refreshes the topics' metadata, so a topic created later is read and a
/// deleted one is noticed without waiting librdkafka's default five minutes.
const METADATA_REFRESH: Duration = Duration::from_secs(5);

type Client = StreamConsumer<LinkContext>;

/// One configured Kafka inbox source.
///
/// Build it at start with [`KafkaSource::new`] (no connection is made), register
/// [`KafkaSource::health`] with the health registry, then drive [`KafkaSource::run`] as a worker
/// until the shutdown.
pub struct KafkaSource {
    name: String,
    topics: Vec<String>,
    max_poll_records: usize,
    retry_delay_min: Duration,
    retry_delay_max: Duration,
    probe_interval: Duration,
    config: ClientConfig,
    context: LinkContext,
    ingest: Arc<dyn Ingest>,
    health: KafkaSourceHealth,
    redactor: Redactor,
}

impl std::fmt::Debug for KafkaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSource")
            .field("name", &self.name)
            .field("topics", &self.topics)
            .field("max_poll_records", &self.max_poll_records)
            .finish_non_exhaustive()
    }
}

impl KafkaSource {
    /// Checks the options; opens no connection.
    ///
    /// The checks: the brokers and security keys; at least one topic, none blank and each a
    /// valid topic name; a group id; `maxPollRecords` above 0.
    ///
    /// # Errors
    /// [`KafkaError::InvalidSetting`] naming the source and the key; never the password.
    pub fn new(options: KafkaSourceOptions, ingest: Arc<dyn Ingest>) -> Result<Self, KafkaError> {
        let owner = format!("source `{}`", options.name);
        let invalid = |what: String| KafkaError::InvalidSetting {
            owner: owner.clone(),
            what,
        };
        if options.topics.is_empty() {
            return Err(invalid("topics names no topic".to_owned()));
        }
        for topic in &options.topics {
            if let Some(problem) = crate::record::topic_name_problem(topic) {
                return Err(invalid(format!(
                    "topics: `{topic}` is not a Kafka topic name: {problem}"
                )));
            }
        }
        if options.group_id.trim().is_empty() {
            return Err(invalid("groupId must not be blank".to_owned()));
        }
        if options.max_poll_records == 0 {
            return Err(invalid("maxPollRecords must be above 0".to_owned()));
        }
        let mut connection = options.connection.clone();
        if connection.client_id.is_none() {
            connection.client_id = Some(format!("queuebox-{}", options.name));
        }
        let mut config = client_config(&owner, &connection)?;
        config
            .set("group.id", &options.group_id)
            .set("enable.auto.commit", "true")
            .set("enable.auto.offset.store", "false")
            .set(
                "auto.commit.interval.ms",
                AUTO_COMMIT_INTERVAL.as_millis().to_string(),
            )
            .set("auto.offset.reset", options.auto_offset_reset.as_str())
            .set(
                "session.timeout.ms",
                SESSION_TIMEOUT.as_millis().to_string(),
            )
            .set(
                "topic.metadata.refresh.interval.ms",
                METADATA_REFRESH.as_millis().to_string(),
            )
            .set(
                "queued.min.messages",
                options
                    .max_poll_records
                    .saturating_mul(PREFETCH_BATCHES)
                    .max(1000)
                    .to_string(),
            )
            .set(
                "queued.max.messages.kbytes",
                PREFETCH_MAX_KBYTES.to_string(),
            );
        Ok(Self {
            health: health::component(&options.name),
            name: options.name,
            topics: options.topics,
            max_poll_records: usize::try_from(options.max_poll_records).unwrap_or(usize::MAX),
            retry_delay_min: options.retry_delay_min,
            retry_delay_max: options.retry_delay_max.max(options.retry_delay_min),
            probe_interval: options.probe_interval,
            config,
            context: LinkContext::default(),
            ingest,
            redactor: redactor(&connection, MAX_REASON_BYTES),
        })
    }

    /// The health component `kafka.<name>` of this source (shares its state).
    pub fn health(&self) -> KafkaSourceHealth {
        self.health.clone()
    }

    /// Consumes until `stop` completes, then stores and commits the offsets of what it handled,
    /// leaves the group and returns.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        let mut stop = pin!(stop.fuse());
        let consumer = match self.subscribe() {
            Ok(consumer) => Arc::new(consumer),
            Err(reason) => {
                // librdkafka refused settings that passed our checks: nothing to retry.
                tracing::error!(source = %self.name, "{reason}");
                self.health.down(reason);
                stop.await;
                return;
            }
        };
        let prober = tokio::spawn(probe_loop(
            Arc::clone(&consumer),
            self.topics.clone(),
            self.context.clone(),
            self.health.clone(),
            self.redactor.clone(),
            self.probe_interval,
        ));
        let mut failures: u32 = 0;
        loop {
            let first = tokio::select! {
                () = &mut stop => break,
                record = consumer.recv() => record,
            };
            let mut batch = Vec::with_capacity(self.max_poll_records.min(1024));
            match first {
                Ok(record) => batch.push(record.detach()),
                Err(error) => {
                    self.consumer_error(&error);
                    continue;
                }
            }
            while batch.len() < self.max_poll_records {
                match consumer.recv().now_or_never() {
                    Some(Ok(record)) => batch.push(record.detach()),
                    Some(Err(error)) => {
                        self.consumer_error(&error);
                        break;
                    }
                    None => break,
                }
            }
            let settlements = self.handle(&batch).await;
            let retry_wait = self.settle(&consumer, &batch, &settlements).await;
            match retry_wait {
                None => failures = 0,
                Some(asked) => {
                    failures = failures.saturating_add(1);
                    let wait = asked.unwrap_or_else(|| self.retry_delay(failures));
                    tokio::select! {
                        () = &mut stop => break,
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
        prober.abort();
        self.health.down("stopped");
        // Commit what was stored, then leave the group (the consumer's close, in its drop).
        let name = self.name.clone();
        let closing = tokio::task::spawn_blocking(move || {
            if let Err(error) = consumer.commit_consumer_state(CommitMode::Sync) {
                // Nothing stored since the last commit is reported as an error too.
                tracing::debug!(source = %name, "final offset commit: {error}");
            }
            drop(consumer);
        });
        if let Err(error) = closing.await {
            tracing::warn!(source = %self.name, "closing the Kafka consumer failed: {error}");
        }
    }

    /// The consumer, subscribed to the topics.
    fn subscribe(&self) -> Result<Client, String> {
        let consumer: Client = self
            .config
            .create_with_context(self.context.clone())
            .map_err(|e| {
                self.redactor.redact(&format!(
                    "source `{}`: the Kafka consumer cannot be created: {e}",
                    self.name
                ))
            })?;
        let topics: Vec<&str> = self.topics.iter().map(String::as_str).collect();
        consumer.subscribe(&topics).map_err(|e| {
            self.redactor
                .redact(&format!("source `{}`: subscribing failed: {e}", self.name))
        })?;
        Ok(consumer)
    }

    /// Reports an error the consumer returned instead of a record.
    fn consumer_error(&self, error: &RdKafkaError) {
        let reason = match error.rdkafka_error_code() {
            Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) => {
                format!(
                    "a topic of {} does not exist on the brokers: {error}",
                    self.topics.join(", ")
                )
            }
            _ => format!("the consumer reported: {error}"),
        };
        let reason = self.redactor.redact(&reason);
        tracing::warn!(source = %self.name, "{reason}");
        self.health.down(reason);
    }

    /// Hands every record of `batch` to the pipeline and returns each one's settlement, in batch
    /// order. Records of one partition with one record key go one after the other.
    async fn handle(&self, batch: &[OwnedMessage]) -> Vec<Settlement> {
        let mut chains: Vec<Vec<usize>> = Vec::new();
        let mut keyed: HashMap<(&str, i32, &[u8]), usize> = HashMap::new();
        for (index, record) in batch.iter().enumerate() {
            match record.key().filter(|key| !key.is_empty()) {
                Some(key) => {
                    let chain = *keyed
                        .entry((record.topic(), record.partition(), key))
                        .or_insert_with(|| {
                            chains.push(Vec::new());
                            chains.len() - 1
                        });
                    chains[chain].push(index);
                }
                None => chains.push(vec![index]),
            }
        }
        let mut settlements = vec![Settlement::Done; batch.len()];
        let results = futures::future::join_all(chains.into_iter().map(|chain| async move {
            let mut settled = Vec::with_capacity(chain.len());
            for index in chain {
                let received = convert::received(&batch[index]);
                let ingested = self.ingest.ingest(&self.name, received).await;
                settled.push((index, settlement(&ingested.outcome)));
            }
            settled
        }))
        .await;
        for (index, settled) in results.into_iter().flatten() {
            settlements[index] = settled;
        }
        settlements
    }

    /// Stores the offsets the batch allows and seeks back where records must be read again.
    /// Returns `None` when every record is done, else the wait a record asked for, if any.
    async fn settle(
        &self,
        consumer: &Arc<Client>,
        batch: &[OwnedMessage],
        settlements: &[Settlement],
    ) -> Option<Option<Duration>> {
        let mut retry: Option<Option<Duration>> = None;
        let mut handled = Vec::with_capacity(batch.len());
        for (record, settled) in batch.iter().zip(settlements) {
            match settled {
                Settlement::Done => {}
                Settlement::DoneUnstored { reason } => tracing::error!(
                    source = %self.name,
                    topic = record.topic(),
                    partition = record.partition(),
                    offset = record.offset(),
                    "the record was refused and not stored; moving past it: {reason}"
                ),
                Settlement::Retry { reason, wait } => {
                    tracing::warn!(
                        source = %self.name,
                        topic = record.topic(),
                        partition = record.partition(),
                        offset = record.offset(),
                        "the record will be read again: {reason}"
                    );
                    let longest = match (retry.flatten(), *wait) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                    retry = Some(longest);
                }
            }
            handled.push(Handled {
                topic: record.topic(),
                partition: record.partition(),
                offset: record.offset(),
                done: settled.is_done(),
            });
        }
        let plans = plan(&handled);
        let mut stored = TopicPartitionList::new();
        for partition in &plans {
            if let Some(offset) = partition.store
                && let Err(error) = stored.add_partition_offset(
                    &partition.topic,
                    partition.partition,
                    Offset::Offset(offset),
                )
            {
                tracing::warn!(source = %self.name, "offset list: {error}");
            }
        }
        // A partition the group took away meanwhile refuses the store: its next owner reads the
        // records again from the last commit, and the idempotency key drops the copies.
        if stored.count() > 0
            && let Err(error) = consumer.store_offsets(&stored)
        {
            tracing::warn!(source = %self.name, "storing offsets failed: {error}");
        }
        for partition in plans {
            let Some(offset) = partition.seek else {
                continue;
            };
            let seeking = Arc::clone(consumer);
            let (topic, number) = (partition.topic.clone(), partition.partition);
            let sought = tokio::task::spawn_blocking(move || {
                seeking.seek(&topic, number, Offset::Offset(offset), BROKER_CALL_TIMEOUT)
            })
            .await;
            match sought {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!(
                    source = %self.name,
                    topic = %partition.topic,
                    partition = partition.partition,
                    "seeking back to offset {offset} failed: {error}"
                ),
                Err(error) => tracing::warn!(source = %self.name, "seek task: {error}"),
            }
        }
        retry
    }

    /// The wait before reading failed records again after `failures` failed batches in a row.
    fn retry_delay(&self, failures: u32) -> Duration {
        let factor = 2_u32.saturating_pow(failures.saturating_sub(1).min(16));
        self.retry_delay_min
            .saturating_mul(factor)
            .min(self.retry_delay_max)
    }
}

/// Keeps the health component current: asks the brokers for the topics' metadata every
/// `interval` while healthy, every second while not.
async fn probe_loop(
    consumer: Arc<Client>,
    topics: Vec<String>,
    context: LinkContext,
    health: KafkaSourceHealth,
    redactor: Redactor,
    interval: Duration,
) {
    loop {
        let started = Instant::now();
        let probing = Arc::clone(&consumer);
        let probed =
            tokio::task::spawn_blocking(move || probing.fetch_metadata(None, BROKER_CALL_TIMEOUT))
                .await;
        let state = match probed {
            Ok(Ok(metadata)) => {
                let missing: Vec<&str> = topics
                    .iter()
                    .filter(|topic| {
                        !metadata
                            .topics()
                            .iter()
                            .any(|t| t.name() == topic.as_str() && t.error().is_none())
                    })
                    .map(String::as_str)
                    .collect();
                if missing.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "topic `{}` does not exist on the brokers; create it (QueueBox never creates a source's topics)",
                        missing.join("`, `")
                    ))
                }
            }
            Ok(Err(error)) => Err(match context.error_since(started) {
                Some(link) if link.problem == LinkProblem::Auth => {
                    format!("the brokers refused the login: {}", link.reason)
                }
                Some(link) => format!("no broker reachable: {}", link.reason),
                None => format!("no broker answered the metadata request: {error}"),
            }),
            Err(error) => Err(format!("the metadata probe failed: {error}")),
        };
        let wait = match state {
            Ok(()) => {
                health.up();
                interval
            }
            Err(reason) => {
                let reason = redactor.redact(&reason);
                if health.state().as_ref().err() != Some(&reason) {
                    tracing::warn!(component = %health.name(), "{reason}");
                }
                health.down(reason);
                UNHEALTHY_PROBE_INTERVAL
            }
        };
        tokio::time::sleep(wait).await;
    }
}

//! The Kafka inbox source: the broker calls of one consumer of the source's group, behind the
//! [`SourceClient`] port. The application's source driver runs it: it stores each batch through
//! the ingest pipeline, then settles it here (see `queuebox_application::source`).
//!
//! [`SourceClient::connect`] subscribes to `topics` in the group `groupId` (once; librdkafka
//! reconnects to the brokers itself) and asks the brokers for the topics' metadata, so a broker
//! that cannot be reached or a missing topic shows in the health component. A batch is up to
//! `maxPollRecords` records; the plan asks the driver for whole batches, so the consumer is not
//! polled while a batch is being stored, and a rebalance waits for the batch to finish and its
//! offsets to be stored. Each record becomes a [`Received`](queuebox_ports::ingest::Received)
//! (see `convert`); its order key is its topic, partition and record key, so records of one
//! partition with one record key are stored one after the other, in offset order.
//!
//! [`SourceClient::settle`] stores, per partition, the offset after the unbroken run of
//! acknowledged records as the group's next offset (see `offsets`), and seeks back to the first
//! record to read again; librdkafka commits stored offsets every second, when partitions are
//! taken away in a rebalance, and at the stop. So an offset is committed only after the rows of
//! every record before it committed, and a crash in between reads the records again, which the
//! inbox's idempotency key turns into duplicates.

mod convert;
mod offsets;
mod options;

pub use options::{
    AutoOffsetReset, DEFAULT_MAX_POLL_RECORDS, DEFAULT_PROBE_INTERVAL, DEFAULT_RETRY_DELAY_MAX,
    DEFAULT_RETRY_DELAY_MIN, KafkaSourceOptions,
};

use crate::client::{client_config, redactor};
use crate::context::{LinkContext, LinkProblem};
use crate::error::KafkaError;
use async_trait::async_trait;
use futures::FutureExt;
use offsets::{Handled, plan};
use queuebox_domain::redact::Redactor;
use queuebox_ports::backoff::Backoff;
use queuebox_ports::source::{Delivery, Settle, SourceClient, SourceFailure, SourcePlan};
use rdkafka::Message;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::message::OwnedMessage;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaErrorCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How much of a failure reason is kept.
const MAX_REASON_BYTES: usize = 1024;
/// How long one broker call of the source (a metadata probe, a seek, the final commit) may block.
const BROKER_CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How often an unhealthy source checks its brokers and topics again (its reconnect wait).
const UNHEALTHY_PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// How long a stopping source waits for the batch being stored.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
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

/// One configured Kafka inbox source: the client the source driver runs.
pub struct KafkaSource {
    name: String,
    topics: Vec<String>,
    max_poll_records: usize,
    retry: Backoff,
    probe_interval: Duration,
    config: ClientConfig,
    context: LinkContext,
    consumer: Option<Arc<Client>>,
    redactor: Redactor,
}

/// Where a record sits: what settling it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaToken {
    topic: String,
    partition: i32,
    offset: i64,
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
    pub fn new(options: KafkaSourceOptions) -> Result<Self, KafkaError> {
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
            name: options.name,
            topics: options.topics,
            max_poll_records: usize::try_from(options.max_poll_records).unwrap_or(usize::MAX),
            retry: Backoff::new(options.retry_delay_min, options.retry_delay_max),
            probe_interval: options.probe_interval,
            config,
            context: LinkContext::default(),
            consumer: None,
            redactor: redactor(&connection, MAX_REASON_BYTES),
        })
    }

    /// The source name.
    pub fn name(&self) -> &str {
        &self.name
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

    /// The failure of an error the consumer returned instead of a record.
    fn consumer_error(&self, error: &RdKafkaError) -> SourceFailure {
        let reason = match error.rdkafka_error_code() {
            Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) => {
                format!(
                    "a topic of {} does not exist on the brokers: {error}",
                    self.topics.join(", ")
                )
            }
            _ => format!("the consumer reported: {error}"),
        };
        SourceFailure::new(self.redactor.redact(&reason))
    }

    /// Asks the brokers for the topics' metadata: they answer, and every topic exists.
    async fn probe(&self, consumer: &Arc<Client>) -> Result<(), SourceFailure> {
        let started = Instant::now();
        let probing = Arc::clone(consumer);
        let probed =
            tokio::task::spawn_blocking(move || probing.fetch_metadata(None, BROKER_CALL_TIMEOUT))
                .await;
        let reason = match probed {
            Ok(Ok(metadata)) => {
                let missing: Vec<&str> = self
                    .topics
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
                    return Ok(());
                }
                format!(
                    "topic `{}` does not exist on the brokers; create it (QueueBox never creates a source's topics)",
                    missing.join("`, `")
                )
            }
            Ok(Err(error)) => match self.context.error_since(started) {
                Some(link) if link.problem == LinkProblem::Auth => {
                    format!("the brokers refused the login: {}", link.reason)
                }
                Some(link) => format!("no broker reachable: {}", link.reason),
                None => format!("no broker answered the metadata request: {error}"),
            },
            Err(error) => format!("the metadata probe failed: {error}"),
        };
        Err(SourceFailure::new(self.redactor.redact(&reason)))
    }

    fn delivery(record: OwnedMessage) -> Delivery<KafkaToken> {
        let received = convert::received(&record);
        let order_key = record.key().filter(|key| !key.is_empty()).map(|key| {
            format!(
                "{}/{}/{}",
                record.topic(),
                record.partition(),
                String::from_utf8_lossy(key)
            )
        });
        Delivery {
            token: KafkaToken {
                topic: record.topic().to_owned(),
                partition: record.partition(),
                offset: record.offset(),
            },
            received,
            order_key,
        }
    }
}

#[async_trait]
impl SourceClient for KafkaSource {
    type Token = KafkaToken;

    fn plan(&self) -> SourcePlan {
        SourcePlan {
            kind: crate::BACKEND,
            source: self.name.clone(),
            consumes: format!("topics `{}`", self.topics.join("`, `")),
            batch: self.max_poll_records,
            whole_batches: true,
            reconnect: Backoff::new(UNHEALTHY_PROBE_INTERVAL, UNHEALTHY_PROBE_INTERVAL),
            retry: self.retry,
            drain_timeout: DRAIN_TIMEOUT,
            check_every: Some(self.probe_interval),
        }
    }

    async fn connect(&mut self) -> Result<(), SourceFailure> {
        let consumer = match &self.consumer {
            Some(consumer) => Arc::clone(consumer),
            None => {
                // librdkafka refusing settings that passed our checks shows as a health reason
                // that stays: every attempt is refused the same way.
                let consumer = Arc::new(self.subscribe().map_err(SourceFailure::new)?);
                self.consumer = Some(Arc::clone(&consumer));
                consumer
            }
        };
        self.probe(&consumer).await
    }

    async fn receive(&self, max: usize) -> Result<Vec<Delivery<KafkaToken>>, SourceFailure> {
        let Some(consumer) = &self.consumer else {
            return Err(SourceFailure::new("not subscribed"));
        };
        let mut batch = Vec::with_capacity(max.min(1024));
        match consumer.recv().await {
            Ok(record) => batch.push(Self::delivery(record.detach())),
            Err(error) => return Err(self.consumer_error(&error)),
        }
        while batch.len() < max {
            match consumer.recv().now_or_never() {
                Some(Ok(record)) => batch.push(Self::delivery(record.detach())),
                // An error after the first record shows on the next receive.
                _ => break,
            }
        }
        Ok(batch)
    }

    async fn settle(&self, settled: Vec<(KafkaToken, Settle)>) {
        let Some(consumer) = &self.consumer else {
            return;
        };
        let handled: Vec<Handled<'_>> = settled
            .iter()
            .map(|(token, settle)| Handled {
                topic: &token.topic,
                partition: token.partition,
                offset: token.offset,
                done: *settle == Settle::Ack,
            })
            .collect();
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
    }

    async fn check(&self) -> Result<(), SourceFailure> {
        match &self.consumer {
            Some(consumer) => self.probe(consumer).await,
            None => Err(SourceFailure::new("not subscribed")),
        }
    }

    async fn close(&mut self) {
        let Some(consumer) = self.consumer.take() else {
            return;
        };
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
}

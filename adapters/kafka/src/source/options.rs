//! What one Kafka source is built from: the `sources.<name>` block of type `kafka` (the keys the
//! ingest pipeline reads, such as `idempotencyKeyPath` and `attributeHeaders`, are not here).

use crate::options::KafkaConnection;
use std::time::Duration;

/// `maxPollRecords` when the configuration sets none.
pub const DEFAULT_MAX_POLL_RECORDS: u32 = 100;
/// The wait before a record whose store failed is read again, after the first failure.
pub const DEFAULT_RETRY_DELAY_MIN: Duration = Duration::from_millis(100);
/// The longest such wait, reached while stores keep failing.
pub const DEFAULT_RETRY_DELAY_MAX: Duration = Duration::from_secs(5);
/// How often the source asks the brokers whether its topics exist while it is healthy; while it is
/// not, it asks every second.
pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_secs(5);

/// `autoOffsetReset`: where a group without a committed offset starts reading a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoOffsetReset {
    /// The oldest record the broker still holds, the default.
    #[default]
    Earliest,
    /// Only records written after the group joined.
    Latest,
}

impl AutoOffsetReset {
    /// The configuration spelling, which is also librdkafka's value.
    pub fn as_str(self) -> &'static str {
        match self {
            AutoOffsetReset::Earliest => "earliest",
            AutoOffsetReset::Latest => "latest",
        }
    }
}

/// The settings of one Kafka source.
#[derive(Debug, Clone)]
pub struct KafkaSourceOptions {
    /// The source name (the key under `sources`), handed to the ingest pipeline.
    pub name: String,
    /// The brokers and the security settings.
    pub connection: KafkaConnection,
    /// `topics`.
    pub topics: Vec<String>,
    /// `groupId`: every replica with the same group shares the partitions.
    pub group_id: String,
    /// `autoOffsetReset`.
    pub auto_offset_reset: AutoOffsetReset,
    /// `maxPollRecords`: the most records read and stored as one batch.
    pub max_poll_records: u32,
    /// The first wait before reading a failed record again; doubled per further failure.
    pub retry_delay_min: Duration,
    /// The longest wait before reading a failed record again.
    pub retry_delay_max: Duration,
    /// How often a healthy source checks its brokers and topics.
    pub probe_interval: Duration,
}

impl KafkaSourceOptions {
    /// Options with every documented default.
    pub fn new(
        name: impl Into<String>,
        bootstrap_servers: impl Into<String>,
        topics: Vec<String>,
        group_id: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            connection: KafkaConnection {
                bootstrap_servers: bootstrap_servers.into(),
                ..KafkaConnection::default()
            },
            topics,
            group_id: group_id.into(),
            auto_offset_reset: AutoOffsetReset::Earliest,
            max_poll_records: DEFAULT_MAX_POLL_RECORDS,
            retry_delay_min: DEFAULT_RETRY_DELAY_MIN,
            retry_delay_max: DEFAULT_RETRY_DELAY_MAX,
            probe_interval: DEFAULT_PROBE_INTERVAL,
        }
    }
}

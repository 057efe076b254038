//! What one Redis source is built from: the `sources.<name>` block of type `redis`, and the few
//! settings the configuration has no key for.

use queuebox_domain::secret::Secret;
use std::time::Duration;

/// `batchSize` when the configuration sets none.
pub const DEFAULT_BATCH_SIZE: u32 = 100;
/// `blockMs` when the configuration sets none.
pub const DEFAULT_BLOCK: Duration = Duration::from_secs(2);
/// `claimIdleMs` when the configuration sets none.
pub const DEFAULT_CLAIM_IDLE: Duration = Duration::from_secs(30);
/// `maxDeliveries` when the configuration sets none.
pub const DEFAULT_MAX_DELIVERIES: u32 = 5;
/// The wait after the first failed connection before the next.
pub const DEFAULT_RETRY_DELAY_MIN: Duration = Duration::from_millis(100);
/// The longest wait between two connection attempts.
pub const DEFAULT_RETRY_DELAY_MAX: Duration = Duration::from_secs(5);
/// The first wait before a message whose store failed is handed back.
pub const DEFAULT_STORE_RETRY_MIN: Duration = Duration::from_millis(100);
/// The longest such wait while stores keep failing.
pub const DEFAULT_STORE_RETRY_MAX: Duration = Duration::from_secs(5);
/// How long a stopping source lets the batch being stored finish.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// The bound of each command that is not a blocking read.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// The settings of one Redis source.
#[derive(Debug, Clone)]
pub struct RedisSourceOptions {
    /// The source name (the key under `sources`), handed to the ingest pipeline.
    pub name: String,
    /// `url`: `redis://[user[:password]@]host[:port][/db]` (a secret).
    pub url: Secret,
    /// `stream`: the stream key read.
    pub stream: String,
    /// `group`: the consumer group (created at the start of the stream when missing, and the
    /// stream with it).
    pub group: String,
    /// `consumer`: this process's name in the group. Two processes need two names.
    pub consumer: String,
    /// `batchSize`: the most entries read at once, and the most in the pipeline at once.
    pub batch_size: u32,
    /// `blockMs`: how long one read waits on the server for new entries.
    pub block: Duration,
    /// `claimIdleMs`: an entry delivered to a consumer and not acknowledged for this long is
    /// claimed (`XAUTOCLAIM`) by this one.
    pub claim_idle: Duration,
    /// `maxDeliveries`: an entry claimed or read again after this many deliveries goes to the
    /// dead-letter stream instead of the pipeline; 0 never dead-letters.
    pub max_deliveries: u32,
    /// `deadLetterStream`: where such entries go.
    pub dead_letter_stream: String,
    /// The wait after a failed connection, doubled per further failure up to `retry_delay_max`.
    pub retry_delay_min: Duration,
    /// The longest wait between two connection attempts.
    pub retry_delay_max: Duration,
    /// The first wait before a message whose store failed is handed back again.
    pub store_retry_min: Duration,
    /// The longest such wait.
    pub store_retry_max: Duration,
    /// How long a stopping source waits for the batch being stored.
    pub drain_timeout: Duration,
    /// The bound of each command that is not a blocking read.
    pub command_timeout: Duration,
}

impl RedisSourceOptions {
    /// Options with every documented default; the dead-letter stream is `<stream>:dead`.
    pub fn new(
        name: impl Into<String>,
        url: Secret,
        stream: impl Into<String>,
        group: impl Into<String>,
        consumer: impl Into<String>,
    ) -> Self {
        let stream = stream.into();
        Self {
            name: name.into(),
            url,
            dead_letter_stream: format!("{stream}:dead"),
            stream,
            group: group.into(),
            consumer: consumer.into(),
            batch_size: DEFAULT_BATCH_SIZE,
            block: DEFAULT_BLOCK,
            claim_idle: DEFAULT_CLAIM_IDLE,
            max_deliveries: DEFAULT_MAX_DELIVERIES,
            retry_delay_min: DEFAULT_RETRY_DELAY_MIN,
            retry_delay_max: DEFAULT_RETRY_DELAY_MAX,
            store_retry_min: DEFAULT_STORE_RETRY_MIN,
            store_retry_max: DEFAULT_STORE_RETRY_MAX,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
        }
    }
}

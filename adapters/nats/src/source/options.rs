//! What one NATS source is built from: the `sources.<name>` block of type `nats`, and the few
//! settings the configuration has no key for.

use crate::connect::NatsCredentials;
use queuebox_domain::secret::Secret;
use std::time::Duration;

/// `ackWaitMs` when the configuration sets none.
pub const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(30);
/// `batchSize` when the configuration sets none.
pub const DEFAULT_BATCH_SIZE: u32 = 100;
/// The wait after the first failed setup (connect, stream check, consumer) before the next.
pub const DEFAULT_RETRY_DELAY_MIN: Duration = Duration::from_millis(100);
/// The longest wait between two setup attempts.
pub const DEFAULT_RETRY_DELAY_MAX: Duration = Duration::from_secs(5);
/// The shortest redelivery delay asked for with a negative acknowledgement while stores keep
/// failing (the first failure after a success is handed back at once).
pub const DEFAULT_NAK_DELAY_MIN: Duration = Duration::from_millis(100);
/// The longest such delay.
pub const DEFAULT_NAK_DELAY_MAX: Duration = Duration::from_secs(5);
/// How long a stopping source lets the messages being stored finish and settle.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// The bound of each setup step (connecting, reading the stream, creating the consumer).
pub const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The settings of one NATS source.
#[derive(Debug, Clone)]
pub struct NatsSourceOptions {
    /// The source name (the key under `sources`), handed to the ingest pipeline.
    pub name: String,
    /// `servers`: URLs separated by commas (a secret: a URL may carry a password).
    pub servers: Secret,
    /// `username`/`password` or `token`.
    pub credentials: NatsCredentials,
    /// `stream`: the JetStream stream, which QueueBox never creates.
    pub stream: String,
    /// `durable`: the durable pull consumer QueueBox reads through (created when missing).
    pub durable: String,
    /// `filterSubject`: the consumer's subject filter; `None` reads every subject of the stream.
    pub filter_subject: Option<String>,
    /// `ackWaitMs`: how long JetStream waits for an acknowledgement before it redelivers.
    pub ack_wait: Duration,
    /// `batchSize`: the most messages asked for in one pull, and the most in the pipeline at once.
    pub batch_size: u32,
    /// The wait after a failed setup, doubled per further failure up to `retry_delay_max`.
    pub retry_delay_min: Duration,
    /// The longest wait between two setup attempts.
    pub retry_delay_max: Duration,
    /// The shortest redelivery delay of a negative acknowledgement while stores keep failing.
    pub nak_delay_min: Duration,
    /// The longest such delay.
    pub nak_delay_max: Duration,
    /// How long a stopping source waits for the messages being stored.
    pub drain_timeout: Duration,
    /// The bound of each setup step.
    pub setup_timeout: Duration,
}

impl NatsSourceOptions {
    /// Options with every documented default.
    pub fn new(
        name: impl Into<String>,
        servers: Secret,
        stream: impl Into<String>,
        durable: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            servers,
            credentials: NatsCredentials::default(),
            stream: stream.into(),
            durable: durable.into(),
            filter_subject: None,
            ack_wait: DEFAULT_ACK_WAIT,
            batch_size: DEFAULT_BATCH_SIZE,
            retry_delay_min: DEFAULT_RETRY_DELAY_MIN,
            retry_delay_max: DEFAULT_RETRY_DELAY_MAX,
            nak_delay_min: DEFAULT_NAK_DELAY_MIN,
            nak_delay_max: DEFAULT_NAK_DELAY_MAX,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            setup_timeout: DEFAULT_SETUP_TIMEOUT,
        }
    }
}

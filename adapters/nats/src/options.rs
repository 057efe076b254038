//! What one NATS destination is built from: the `destinations.<name>` block of type `nats`, with
//! its static `headers`, and the few settings the configuration has no key for.

use crate::connect::NatsCredentials;
use queuebox_domain::secret::Secret;
use queuebox_domain::template::address::AddressColumn;
use std::time::Duration;

/// `timeoutMs` when the configuration sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of a failure reason is kept when the caller sets no limit (the
/// `http.maxErrorBodyBytes` default).
pub const DEFAULT_MAX_REASON_BYTES: usize = 2048;
/// The wait after the first failed connection attempt.
pub const DEFAULT_RECONNECT_DELAY_MIN: Duration = Duration::from_millis(100);
/// The longest wait between two first-connection attempts.
pub const DEFAULT_RECONNECT_DELAY_MAX: Duration = Duration::from_secs(5);

/// The settings of one NATS destination.
#[derive(Debug, Clone)]
pub struct NatsPublisherOptions {
    /// The destination name (the key under `destinations`).
    pub name: String,
    /// `servers`: URLs separated by commas. A URL may carry a password, so the whole value is a
    /// secret.
    pub servers: Secret,
    /// `username`/`password` or `token`.
    pub credentials: NatsCredentials,
    /// `subject`: a literal subject or an address template over the row.
    pub subject: String,
    /// `subjectFrom`: a row column that holds the subject; it wins over `subject`.
    pub subject_from: Option<AddressColumn>,
    /// `jetStream`: wait for the JetStream acknowledgement (true, the default) or publish on core
    /// NATS with no acknowledgement.
    pub jet_stream: bool,
    /// `headers`: static headers on every message, in configuration order.
    pub headers: Vec<(String, String)>,
    /// `timeoutMs`: the whole budget of one publish (connecting when needed, sending, the
    /// acknowledgement).
    pub timeout: Duration,
    /// How much of a failure reason is kept (`http.maxErrorBodyBytes`).
    pub max_reason_bytes: usize,
    /// The wait after a failed first connection before the next attempt, doubled per further
    /// failure up to `reconnect_delay_max`. A publish inside the wait fails at once.
    pub reconnect_delay_min: Duration,
    /// The longest wait between two first-connection attempts.
    pub reconnect_delay_max: Duration,
}

impl NatsPublisherOptions {
    /// Options with every documented default.
    pub fn new(name: impl Into<String>, servers: Secret, subject: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            servers,
            credentials: NatsCredentials::default(),
            subject: subject.into(),
            subject_from: None,
            jet_stream: true,
            headers: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            max_reason_bytes: DEFAULT_MAX_REASON_BYTES,
            reconnect_delay_min: DEFAULT_RECONNECT_DELAY_MIN,
            reconnect_delay_max: DEFAULT_RECONNECT_DELAY_MAX,
        }
    }
}

//! What one Redis destination is built from: the `destinations.<name>` block of type `redis`, with
//! its static `headers`, and the few settings the configuration has no key for.

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
/// The longest wait between two connection attempts.
pub const DEFAULT_RECONNECT_DELAY_MAX: Duration = Duration::from_secs(5);

/// How `maxLen` trims the stream on each add.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trim {
    /// `MAXLEN ~ n`: Redis trims whole internal nodes only, so the stream may hold somewhat more
    /// than `n` entries; cheap.
    Approximate(u64),
    /// `MAXLEN = n`: the stream never holds more than `n` entries after the add.
    Exact(u64),
}

/// The settings of one Redis destination.
#[derive(Debug, Clone)]
pub struct RedisPublisherOptions {
    /// The destination name (the key under `destinations`).
    pub name: String,
    /// `url`: `redis://[user[:password]@]host[:port][/db]` (a secret: it may carry a password).
    pub url: Secret,
    /// `stream`: a literal stream key or an address template over the row.
    pub stream: String,
    /// `streamFrom`: a row column that holds the stream key; it wins over `stream`.
    pub stream_from: Option<AddressColumn>,
    /// `maxLen` with `maxLenApproximate`: trimming on each add; `None` never trims.
    pub trim: Option<Trim>,
    /// `headers`: static fields on every entry, in configuration order.
    pub headers: Vec<(String, String)>,
    /// `timeoutMs`: the whole budget of one publish (connecting when needed, the add).
    pub timeout: Duration,
    /// How much of a failure reason is kept (`http.maxErrorBodyBytes`).
    pub max_reason_bytes: usize,
    /// The wait after a failed connection attempt, doubled per further failure up to
    /// `reconnect_delay_max`. A publish inside the wait fails at once.
    pub reconnect_delay_min: Duration,
    /// The longest wait between two connection attempts.
    pub reconnect_delay_max: Duration,
}

impl RedisPublisherOptions {
    /// Options with every documented default.
    pub fn new(name: impl Into<String>, url: Secret, stream: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            url,
            stream: stream.into(),
            stream_from: None,
            trim: None,
            headers: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            max_reason_bytes: DEFAULT_MAX_REASON_BYTES,
            reconnect_delay_min: DEFAULT_RECONNECT_DELAY_MIN,
            reconnect_delay_max: DEFAULT_RECONNECT_DELAY_MAX,
        }
    }
}

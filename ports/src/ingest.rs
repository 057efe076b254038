//! The inbound port of the inbox: what a source adapter (the HTTP routes, a broker consumer) calls
//! with each received message, and the outcome it translates into its own answer
//! (a status code, an acknowledgement).

use async_trait::async_trait;
use std::time::Duration;
use thiserror::Error;
use uuid::Uuid;

/// One received message as the adapter read it: the headers in arrival order (a repeated name
/// appears once per value; names in any letter case) and the raw body bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Received {
    /// `(name, value)` pairs in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body exactly as received (signatures are computed over these bytes).
    pub body: Vec<u8>,
    /// The broker's own identifier of the message, the third choice of idempotency key (docs/how-to/bridge-*.md):
    /// the AMQP `messageId` property, or NATS's `Nats-Msg-Id` header. `None` for HTTP.
    pub message_id: Option<String>,
    /// The Kafka record key: the third choice of idempotency key and the last of aggregate id.
    pub record_key: Option<String>,
    /// The broker's own correlation id, read when no `X-Correlation-Id` header gives one: the
    /// AMQP `correlation_id` property. `None` for HTTP, Kafka and NATS.
    pub correlation_id: Option<String>,
}

impl Received {
    /// A message of `headers` and `body` with no broker identifiers (what HTTP receives).
    pub fn new(headers: Vec<(String, String)>, body: Vec<u8>) -> Self {
        Self {
            headers,
            body,
            message_id: None,
            record_key: None,
            correlation_id: None,
        }
    }
}

/// Why a message was refused after the credential check and the filter.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum Rejection {
    /// The body is not a JSON document.
    #[error("Invalid JSON")]
    InvalidJson,
    /// The body is JSON nested deeper than the parser reads.
    #[error("Invalid JSON: nested deeper than {limit} levels")]
    TooDeep {
        /// The deepest nesting read.
        limit: usize,
    },
    /// The body holds a number beyond what the parser reads (a 64-bit float), such as `1e400`.
    #[error("Invalid JSON: a number is out of range (beyond a 64-bit float)")]
    NumberOutOfRange,
    /// A value of the message cannot be stored: a field longer than its column, the character
    /// U+0000, a value the database refuses. Sending it again gets the same answer.
    #[error("{reason}")]
    Unstorable {
        /// What cannot be stored, naming the field and the limit, never the value.
        reason: String,
    },
    /// The idempotency key path found no usable value in the body.
    #[error("Idempotency key not found at path {path}")]
    KeyNotFound {
        /// The configured `idempotencyKeyPath`.
        path: String,
    },
    /// The source transform failed with `onError` `Fail` or `Dead` (an HTTP source answers 422).
    #[error("Transform failed: {reason}")]
    TransformFailed {
        /// What failed, naming the error kind and the engine's message.
        reason: String,
    },
    /// The database write failed; the sender may send the message again.
    #[error("Storage failed")]
    StorageFailed,
}

impl From<queuebox_domain::inbox::limits::Unstorable> for Rejection {
    fn from(unstorable: queuebox_domain::inbox::limits::Unstorable) -> Self {
        Rejection::Unstorable {
            reason: unstorable.to_string(),
        }
    }
}

/// What became of one received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IngestOutcome {
    /// A new inbox row with this id.
    Stored {
        /// The `id` of the inbox row.
        id: Uuid,
    },
    /// A new inbox row stored `dead` at once, with the original payload: a broker source's
    /// message that its transform rejected. The broker acknowledges it; nothing is lost.
    StoredDead {
        /// The `id` of the inbox row.
        id: Uuid,
        /// The reason stored on the row.
        reason: String,
    },
    /// The source already holds a row with this idempotency key; nothing was written.
    Duplicate,
    /// The header filter dropped the message; nothing was written.
    Filtered,
    /// The request failed the source's credential check; the reason names the check, never a
    /// credential.
    Unauthorized {
        /// What failed, for the answer.
        reason: String,
    },
    /// The source's rate limit refused the message; a retry after this wait can pass.
    RateLimited {
        /// How long until the limit admits a request again.
        retry_after: Duration,
    },
    /// The message was refused; nothing was written.
    Rejected(Rejection),
    /// The adapter named a source the pipeline does not know (a wiring fault, never the sender's).
    UnknownSource,
}

/// The outcome with the correlation id the message was given, when processing reached that step
/// (after the credential check and the filter), so the adapter can echo it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ingested {
    /// The correlation id stored (or that would have been stored) with the message.
    pub correlation_id: Option<String>,
    /// What happened.
    pub outcome: IngestOutcome,
}

impl Ingested {
    /// An outcome reached before the correlation id was set.
    pub fn early(outcome: IngestOutcome) -> Self {
        Self {
            correlation_id: None,
            outcome,
        }
    }
}

/// The ingest pipeline as a source adapter sees it.
#[async_trait]
pub trait Ingest: Send + Sync {
    /// Runs one received message of `source` (the name under `sources`) through the pipeline:
    /// rate limit, credentials, filter, correlation id, JSON, extraction, transform, store.
    ///
    /// An implementation MUST NOT fail: every problem is an [`IngestOutcome`], so the adapter
    /// always has an answer to give.
    async fn ingest(&self, source: &str, received: Received) -> Ingested;

    /// The idempotency key [`Ingest::ingest`] would store `received` under at `source`, read
    /// without storing anything; `None` when the implementation cannot tell (an HTTP source, an
    /// unknown source, or an implementation that does not look).
    ///
    /// A source adapter that stores messages side by side uses it to store two messages of one
    /// key in the order the broker gave them, so the first is the one kept. The answer only
    /// orders stores; [`Ingest::ingest`] still decides the stored key.
    fn idempotency_key(&self, _source: &str, _received: &Received) -> Option<String> {
        None
    }
}

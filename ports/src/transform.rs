//! The transformer port: JSONata expressions compiled once at start and applied to payloads at the
//! source, route and destination stages (and by the admin test route).
//!
//! A [`Transformer`] compiles an expression with its [`TransformLimits`] into a
//! [`CompiledTransform`]; the compiled transform is shared (`Arc`) and applied to many payloads,
//! concurrently. Each application receives the payload as JSON text and the [`TransformContext`]
//! of one stage, which decides exactly which `$` variables the expression can read.

use async_trait::async_trait;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use thiserror::Error;
use uuid::Uuid;

/// The bounds of one evaluation (`timeoutMs` and `maxDepth` of a `transform` block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransformLimits {
    /// Wall-clock time one evaluation may take.
    pub timeout: Duration,
    /// How deep one evaluation may recurse.
    pub max_depth: u32,
}

impl TransformLimits {
    /// The defaults of a `transform` block: 100 ms and depth 100.
    pub const DEFAULT: TransformLimits = TransformLimits {
        timeout: Duration::from_millis(100),
        max_depth: 100,
    };
}

impl Default for TransformLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// What a stage does when its transform fails (`onError` of the block). What each strategy means
/// at each stage and for each source kind is the caller's business; this is only the choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorStrategy {
    /// `Fail`: a delivery fails and retries; a source rejects the message.
    Fail,
    /// `Skip`: the stage passes its input on unchanged.
    Skip,
    /// `Dead`: a delivery goes dead at once; a source rejects the message.
    Dead,
}

impl ErrorStrategy {
    /// The configuration spelling, also the `strategy` label of the failure counter.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fail => "Fail",
            Self::Skip => "Skip",
            Self::Dead => "Dead",
        }
    }
}

impl fmt::Display for ErrorStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The variables of the source stage: a message received by a source, before it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceContext {
    /// `$messageId`: the id the new inbox row will get.
    pub message_id: Uuid,
    /// `$eventType` and `$topic`: the event type extracted from the original body. `$topic` is the
    /// empty string and `$eventType` is `null` when there is none.
    pub event_type: Option<String>,
    /// `$timestamp`: the receipt time.
    pub received_at: SystemTime,
    /// `$source`: the source name.
    pub source: String,
    /// `$headers`: the received headers as stored on the row (credential headers already removed),
    /// in arrival order. A name given more than once keeps its first value.
    pub headers: Vec<(String, String)>,
    /// `$idempotencyKey`: the key extracted from the original body, `null` when there is none.
    pub idempotency_key: Option<String>,
}

/// The variables of the route and destination stages: one delivery attempt of an outbox row.
/// `$source`, `$headers`, `$idempotencyKey` and `$eventType` are not bound at these stages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryContext {
    /// `$messageId`: the `id` of the outbox row.
    pub message_id: Uuid,
    /// `$topic`: the `topic` of the row.
    pub topic: String,
    /// `$attempt`: the `attempt` of the row (0 on the first delivery).
    pub attempt: i32,
    /// `$timestamp`: the `created_at` of the row.
    pub created_at: SystemTime,
}

/// The variables of `POST /admin/transform/test`: `$attempt` is 0, `$headers`,
/// `$idempotencyKey` and `$eventType` are not bound, `$source` only when the caller sent one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminTestContext {
    /// `$messageId`: a random id per request.
    pub message_id: Uuid,
    /// `$topic`: the request's `mockTopic`.
    pub topic: String,
    /// `$source`: the request's `mockSource`, unbound when absent.
    pub source: Option<String>,
    /// `$timestamp`: the time of the request.
    pub timestamp: SystemTime,
}

impl AdminTestContext {
    /// A context with a random `$messageId` and the current time.
    pub fn new(topic: impl Into<String>, source: Option<String>) -> Self {
        Self {
            message_id: Uuid::new_v4(),
            topic: topic.into(),
            source,
            timestamp: SystemTime::now(),
        }
    }
}

/// The stage an expression runs at, with that stage's variables. Each variant binds exactly the
/// variables its stage lists and nothing else; a variable that is not bound reads as undefined in
/// the expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransformContext {
    /// `sources.<name>.transform`.
    Source(SourceContext),
    /// `routes[i].transform` and `destinations.<name>.transform`.
    Delivery(DeliveryContext),
    /// The admin test route.
    AdminTest(AdminTestContext),
}

impl TransformContext {
    /// The value of `$messageId`.
    pub fn message_id(&self) -> Uuid {
        match self {
            Self::Source(c) => c.message_id,
            Self::Delivery(c) => c.message_id,
            Self::AdminTest(c) => c.message_id,
        }
    }

    /// The value of `$topic`.
    pub fn topic(&self) -> &str {
        match self {
            Self::Source(c) => c.event_type.as_deref().unwrap_or(""),
            Self::Delivery(c) => &c.topic,
            Self::AdminTest(c) => &c.topic,
        }
    }

    /// The value of `$attempt`.
    pub fn attempt(&self) -> i32 {
        match self {
            Self::Delivery(c) => c.attempt,
            Self::Source(_) | Self::AdminTest(_) => 0,
        }
    }

    /// The instant `$timestamp` shows (as ISO-8601 text, see
    /// `queuebox_domain::timestamp::iso_utc_millis`).
    pub fn timestamp(&self) -> SystemTime {
        match self {
            Self::Source(c) => c.received_at,
            Self::Delivery(c) => c.created_at,
            Self::AdminTest(c) => c.timestamp,
        }
    }
}

/// The limit an evaluation ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransformLimit {
    /// It ran longer than `timeoutMs`.
    Timeout,
    /// It recursed deeper than `maxDepth` (or than the native stack allows).
    Depth,
    /// It built a value larger than the engine allows.
    Size,
}

/// What kind of failure a [`TransformError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransformErrorKind {
    /// The expression does not compile; only [`Transformer::compile`] returns it.
    Compile,
    /// The expression failed on this payload (a type error, a failed `$error()`, input that is
    /// not JSON).
    Evaluation,
    /// The evaluation hit one of its limits.
    Limit(TransformLimit),
    /// The expression produced no value (JSONata's undefined, for example a path that matches
    /// nothing); see [`TransformOutput::into_payload`].
    Undefined,
}

impl TransformErrorKind {
    /// A short, stable label for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Compile => "compile",
            Self::Evaluation => "evaluation",
            Self::Limit(TransformLimit::Timeout) => "timeout",
            Self::Limit(TransformLimit::Depth) => "depth",
            Self::Limit(TransformLimit::Size) => "size",
            Self::Undefined => "undefined",
        }
    }
}

impl fmt::Display for TransformErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed compile or evaluation. `message` names the cause (with the engine's error code and
/// position when it has them) and never holds payload data beyond what the engine reports about
/// the expression, so it is safe to log, to store in `last_error` and to answer with.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{message}")]
pub struct TransformError {
    /// Compile, evaluation, limit or undefined.
    pub kind: TransformErrorKind,
    /// The explanation.
    pub message: String,
}

impl TransformError {
    /// An error of `kind`.
    pub fn new(kind: TransformErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// True for a timeout, depth or size limit.
    pub fn is_limit(&self) -> bool {
        matches!(self.kind, TransformErrorKind::Limit(_))
    }
}

/// The result of one evaluation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransformOutput {
    /// A JSON value, as JSON text.
    Json(String),
    /// JSONata's undefined: the expression produced nothing (a path that matched nothing, a
    /// conditional without an else branch that did not apply).
    Undefined,
}

impl TransformOutput {
    /// The payload to store or deliver. Undefined cannot be stored or sent (it is not a JSON
    /// document), so every stage treats it as a failed transform: an error of kind
    /// [`TransformErrorKind::Undefined`] that the block's `onError` strategy handles. The admin
    /// test route shows undefined instead of failing.
    ///
    /// # Errors
    /// [`TransformErrorKind::Undefined`] for [`TransformOutput::Undefined`].
    pub fn into_payload(self) -> Result<String, TransformError> {
        match self {
            Self::Json(text) => Ok(text),
            Self::Undefined => Err(TransformError::new(
                TransformErrorKind::Undefined,
                "the expression produced no value (undefined)",
            )),
        }
    }
}

/// An expression compiled with its limits, ready to apply to any number of payloads at once.
#[async_trait]
pub trait CompiledTransform: Send + Sync + fmt::Debug {
    /// The source text of the expression.
    fn expression(&self) -> &str;

    /// The limits every evaluation runs under.
    fn limits(&self) -> TransformLimits;

    /// Evaluates the expression with `payload` (JSON text) as `$` and the variables of
    /// `context`'s stage.
    ///
    /// An adapter MUST stop an evaluation that exceeds the limits and report it as
    /// [`TransformErrorKind::Limit`], MUST NOT bind any variable the context's stage does not
    /// list, and MUST NOT block the async runtime's worker thread for longer than a small bound
    /// (a few milliseconds), whatever the timeout: a slow evaluation continues off the worker.
    /// Dropping the future abandons the result; the evaluation itself still stops at its timeout.
    ///
    /// # Errors
    /// [`TransformErrorKind::Evaluation`] when the expression fails on this payload or the payload
    /// is not JSON, [`TransformErrorKind::Limit`] when a limit stops it. An undefined result is
    /// not an error here: it is [`TransformOutput::Undefined`].
    async fn apply(
        &self,
        payload: &str,
        context: &TransformContext,
    ) -> Result<TransformOutput, TransformError>;
}

/// A JSONata implementation.
pub trait Transformer: Send + Sync {
    /// Compiles `expression` once, to be applied under `limits`.
    ///
    /// # Errors
    /// [`TransformErrorKind::Compile`] when the expression does not compile, naming the problem
    /// and its position. The caller adds the configuration key path.
    fn compile(
        &self,
        expression: &str,
        limits: TransformLimits,
    ) -> Result<Arc<dyn CompiledTransform>, TransformError>;
}

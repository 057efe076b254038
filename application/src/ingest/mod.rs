//! The ingest pipeline every source kind shares: from the received headers and raw body of one
//! message to a stored inbox row (or the reason there is none).
//!
//! The steps run in the documented order, and each step that refuses the message ends it:
//! rate limit, credentials, header filter, correlation id, JSON parse, extraction, source
//! transform, store. The order matters to the sender: a refused credential must not reveal
//! whether the filter would pass, and the correlation id is echoed only once the message got past
//! the checks that decide whether it is processed at all.

mod attributes;
mod body;
mod coalesce;
mod rate;
mod source_stage;
#[cfg(test)]
mod tests;

pub use coalesce::{CoalesceOptions, CoalescingInbox};
pub use rate::RateLimiter;

use crate::telemetry::IngestEvents;
use crate::trace::Traced;
use crate::transform::StageTransform;
use async_trait::async_trait;
use queuebox_domain::inbox::auth::CredentialCheck;
use queuebox_domain::inbox::correlation::{CORRELATION_ID_HEADER, correlation_id};
use queuebox_domain::inbox::dead_letter;
use queuebox_domain::inbox::filter::HeaderFilter;
use queuebox_domain::inbox::header_value;
use queuebox_domain::inbox::headers::stored_headers;
use queuebox_domain::inbox::limits::{self, MAX_KEY_CHARS, RowField, Unstorable};
use queuebox_domain::jsonpath::JsonPath;
use queuebox_ports::inbox::{Consumption, InboxStore, NewInboxMessage, Stored};
use queuebox_ports::ingest::{Ingest, IngestOutcome, Ingested, Received, Rejection};
use queuebox_ports::transform::{SourceContext, TransformContext};
use source_stage::SourceStage;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tracing::Instrument as _;

/// What the pipeline needs to know about one source, built from its configuration at start.
#[derive(Debug, Clone)]
pub struct IngestSource {
    /// The source name (the key under `sources`), stored in the `source` column.
    pub name: String,
    /// `idempotencyKeyPath`.
    pub idempotency_key_path: JsonPath,
    /// `eventTypePath`.
    pub event_type_path: Option<JsonPath>,
    /// `aggregateIdPath`.
    pub aggregate_id_path: Option<JsonPath>,
    /// `consumption`, stored on each row at receipt.
    pub consumption: Consumption,
    /// The `auth` block of an HTTP source.
    pub auth: Option<CredentialCheck>,
    /// The `filter` block.
    pub filter: Option<HeaderFilter>,
    /// `rateLimit.requestsPerMinute` of an HTTP source.
    pub requests_per_minute: Option<u32>,
    /// Whether the sender can be told "no" (HTTP) or the message must be kept (a broker).
    pub kind: IngestKind,
    /// The `transform` block, compiled.
    pub transform: Option<StageTransform>,
}

/// How a source hands over its messages, which decides what a refused message becomes and where
/// its attributes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IngestKind {
    /// An HTTP source: the sender still holds a message it gets an error for, so a refusal
    /// stores nothing and is answered; the attributes come from the body alone.
    Http,
    /// A RabbitMQ, Kafka or NATS source: the message is acknowledged whatever happens, so a
    /// refusal stores it as a dead row instead of losing it; the attributes also come from headers
    /// and the broker's own identifiers (docs/how-to/bridge-*.md).
    Broker(AttributeHeaders),
}

impl IngestKind {
    /// Whether this is a broker source.
    pub fn is_broker(&self) -> bool {
        matches!(self, IngestKind::Broker(_))
    }
}

/// The header names a broker source reads three attributes from (`attributeHeaders`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttributeHeaders {
    /// The idempotency key: read before `idempotencyKeyPath`.
    pub idempotency_key: String,
    /// The aggregate id: read after `aggregateIdPath`.
    pub aggregate_id: String,
    /// The event type: read after `eventTypePath`.
    pub event_type: String,
}

impl Default for AttributeHeaders {
    fn default() -> Self {
        Self {
            idempotency_key: "x-idempotency-key".into(),
            aggregate_id: "x-aggregate-id".into(),
            event_type: "x-event-type".into(),
        }
    }
}

/// The wall clock in Unix milliseconds, as the HMAC timestamp guard reads it.
pub type UnixClock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> UnixClock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    })
}

struct Prepared {
    spec: IngestSource,
    limiter: Option<RateLimiter>,
}

/// The ingest pipeline over an inbox store.
pub struct IngestPipeline {
    store: Arc<dyn InboxStore>,
    sources: HashMap<String, Prepared>,
    clock: UnixClock,
}

impl IngestPipeline {
    /// A pipeline for `sources`, storing into `store`, reading `clock` for timestamp checks.
    pub fn new(store: Arc<dyn InboxStore>, sources: Vec<IngestSource>, clock: UnixClock) -> Self {
        let now = Instant::now();
        let sources = sources
            .into_iter()
            .map(|spec| {
                let limiter = spec
                    .requests_per_minute
                    .map(|limit| RateLimiter::per_minute(limit, now));
                (spec.name.clone(), Prepared { spec, limiter })
            })
            .collect();
        Self {
            store,
            sources,
            clock,
        }
    }

    async fn run(&self, source: &Prepared, received: Received, trace: &Traced) -> Ingested {
        let spec = &source.spec;
        if let Some(limiter) = &source.limiter
            && let Err(retry_after) = limiter.try_acquire(Instant::now())
        {
            return Ingested::early(IngestOutcome::RateLimited { retry_after });
        }
        if let Some(check) = &spec.auth
            && let Err(failure) = check.verify(&received.headers, &received.body, (self.clock)())
        {
            tracing::info!(source = %spec.name, reason = %failure, "inbox request refused: credentials");
            return Ingested::early(IngestOutcome::Unauthorized {
                reason: failure.to_string(),
            });
        }
        if let Some(filter) = &spec.filter
            && !filter.passes(&received.headers)
        {
            IngestEvents::filtered(&spec.name);
            return Ingested::early(IngestOutcome::Filtered);
        }

        // The header first, then the broker's own property (docs/reference/headers.md), then a new id.
        let correlation = correlation_id(
            header_value(&received.headers, CORRELATION_ID_HEADER)
                .into_iter()
                .chain(received.correlation_id.as_deref()),
            || uuid::Uuid::new_v4().to_string(),
        );
        let outcome = self
            .store_message(spec, received, &correlation, trace)
            .await;
        Ingested {
            correlation_id: Some(correlation),
            outcome,
        }
    }

    /// Parse, extract, check, transform, check, store.
    async fn store_message(
        &self,
        spec: &IngestSource,
        received: Received,
        correlation: &str,
        trace: &Traced,
    ) -> IngestOutcome {
        let document = match body::parse(&received.body) {
            Ok(document) => document,
            Err(rejection) => return self.refuse(spec, received, correlation, rejection).await,
        };
        if limits::may_hold_nul(&received.body)
            && let Err(unstorable) = limits::check_payload(&document)
        {
            return self
                .refuse(spec, received, correlation, unstorable.into())
                .await;
        }
        let Some(attributes) = attributes::extract(spec, &received, &document) else {
            IngestEvents::extraction_failed();
            return IngestOutcome::Rejected(Rejection::KeyNotFound {
                path: match attributes::provider_headers(spec).0 {
                    Some(header) => format!("{header} (a header)"),
                    None => spec.idempotency_key_path.to_string(),
                },
            });
        };
        let attributes::Attributes {
            idempotency_key,
            event_type,
            aggregate_id,
        } = attributes;
        let mut headers = stored_headers(
            &received.headers,
            spec.auth.as_ref().map(CredentialCheck::credential_header),
        );
        // The stored trace context is the receive span's, so the relay and pull clients continue it.
        trace.inject(&mut headers);
        if let Err(unstorable) =
            check_row_fields(&idempotency_key, &aggregate_id, &event_type, &headers)
        {
            return self
                .refuse(spec, received, correlation, unstorable.into())
                .await;
        }

        let id = uuid::Uuid::new_v4();
        // The body parsed as JSON, so it is UTF-8; the bytes are stored as sent (the database
        // normalises JSONB anyway) rather than re-serialised.
        let original = match String::from_utf8(received.body) {
            Ok(text) => text,
            Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
        };

        // The source transform runs after the extraction (which read the original body) and
        // before the store, so also before the duplicate check.
        let (payload, dead_reason) = match &spec.transform {
            None => (original, None),
            Some(transform) => {
                let context = TransformContext::Source(SourceContext {
                    message_id: id,
                    event_type: event_type.clone(),
                    received_at: SystemTime::now(),
                    source: spec.name.clone(),
                    headers: headers.clone(),
                    idempotency_key: Some(idempotency_key.clone()),
                });
                match source_stage::run(spec, transform, original, &context, correlation).await {
                    SourceStage::Store {
                        payload,
                        dead_reason,
                    } => (payload, dead_reason),
                    SourceStage::Reject(rejection) => return IngestOutcome::Rejected(rejection),
                }
            }
        };
        // What a transform made must fit the table too (the original was checked above).
        if spec.transform.is_some()
            && let Err(unstorable) = limits::check_payload_text(&payload)
        {
            let reason = format!("the source transform's result cannot be stored: {unstorable}");
            let row = Unkept {
                body: payload.into_bytes(),
                idempotency_key,
                headers,
            };
            return self.unstorable(spec, row, correlation, reason).await;
        }
        let message = NewInboxMessage {
            id,
            source: spec.name.clone(),
            idempotency_key,
            aggregate_id,
            event_type,
            payload,
            headers,
            correlation_id: Some(correlation.to_owned()),
            consumption: spec.consumption,
            dead_reason,
        };
        self.insert(spec, message, correlation).await
    }

    /// Stores `message` and names the outcome. A value the database refuses is the sender's
    /// error (an HTTP 422), or a dead row of a broker message.
    async fn insert(
        &self,
        spec: &IngestSource,
        message: NewInboxMessage,
        correlation: &str,
    ) -> IngestOutcome {
        match self.insert_row(spec, &message, correlation).await {
            Ok(outcome) => outcome,
            Err(reason) => {
                let row = Unkept {
                    body: message.payload.into_bytes(),
                    idempotency_key: message.idempotency_key,
                    headers: message.headers,
                };
                self.unstorable(spec, row, correlation, reason).await
            }
        }
    }

    /// A message refused for a value the table cannot hold, found after its key was read: an
    /// HTTP source answers 422; a broker source keeps it as a dead row.
    async fn unstorable(
        &self,
        spec: &IngestSource,
        row: Unkept,
        correlation: &str,
        reason: String,
    ) -> IngestOutcome {
        match spec.kind {
            IngestKind::Http => {
                IngestEvents::extraction_failed();
                IngestOutcome::Rejected(Rejection::Unstorable { reason })
            }
            IngestKind::Broker(_) => self.store_dead(spec, row, correlation, reason).await,
        }
    }

    /// One insert; `Err` carries the reason when the database refused a value as data.
    async fn insert_row(
        &self,
        spec: &IngestSource,
        message: &NewInboxMessage,
        correlation: &str,
    ) -> Result<IngestOutcome, String> {
        match self.store.insert(message).await {
            Ok(Stored::New(id)) => {
                IngestEvents::stored();
                Ok(match &message.dead_reason {
                    Some(reason) => IngestOutcome::StoredDead {
                        id,
                        reason: reason.clone(),
                    },
                    None => IngestOutcome::Stored { id },
                })
            }
            Ok(Stored::Duplicate) => {
                IngestEvents::duplicate();
                Ok(IngestOutcome::Duplicate)
            }
            Ok(Stored::Refused { reason }) => {
                tracing::info!(
                    source = %spec.name,
                    correlation_id = %correlation,
                    %reason,
                    "inbox message refused by the database"
                );
                Err(format!("the database cannot store this message: {reason}"))
            }
            Err(error) => {
                IngestEvents::storage_failed();
                tracing::error!(
                    source = %spec.name,
                    correlation_id = %correlation,
                    %error,
                    "inbox message not stored"
                );
                Ok(IngestOutcome::Rejected(Rejection::StorageFailed))
            }
        }
    }

    /// A message whose content is refused: an HTTP source answers the refusal (the sender still
    /// holds the message); a broker source stores it as a dead row and the broker acknowledges it,
    /// so it is kept and can never come back forever (docs/how-to/bridge-*.md).
    async fn refuse(
        &self,
        spec: &IngestSource,
        received: Received,
        correlation: &str,
        rejection: Rejection,
    ) -> IngestOutcome {
        IngestEvents::extraction_failed();
        match &spec.kind {
            IngestKind::Http => IngestOutcome::Rejected(rejection),
            IngestKind::Broker(attribute_headers) => {
                // The key in the order docs/reference/headers.md gives, without the body's path (the body could not
                // be read, or holds what the table cannot).
                let row = Unkept {
                    idempotency_key: attributes::broker_key(attribute_headers, &received, None),
                    headers: stored_headers(&received.headers, None)
                        .into_iter()
                        .filter(|(name, value)| !name.contains('\0') && !value.contains('\0'))
                        .collect(),
                    body: received.body,
                };
                self.store_dead(spec, row, correlation, rejection.to_string())
                    .await
            }
        }
    }

    /// Stores a broker message `dead` with `reason`, its payload in a form the table holds
    /// ([`dead_letter::dead_payload`]) and a key that a redelivery finds again.
    async fn store_dead(
        &self,
        spec: &IngestSource,
        row: Unkept,
        correlation: &str,
        reason: String,
    ) -> IngestOutcome {
        let Unkept {
            body,
            idempotency_key,
            headers,
        } = row;
        let (payload, kept_as) = dead_letter::dead_payload(&body);
        let reason = match kept_as {
            Some(how) => format!("{reason} (payload kept as {how})"),
            None => reason,
        };
        // A key the table cannot hold gives way to the digest of the body, which a redelivery of
        // the same message finds again.
        let idempotency_key =
            match limits::check_field(RowField::IdempotencyKey, &idempotency_key, MAX_KEY_CHARS) {
                Ok(()) => idempotency_key,
                Err(_) => dead_letter::body_digest(&body),
            };
        let message = NewInboxMessage {
            id: uuid::Uuid::new_v4(),
            source: spec.name.clone(),
            idempotency_key,
            aggregate_id: None,
            event_type: None,
            payload,
            headers,
            correlation_id: Some(correlation.to_owned()),
            consumption: spec.consumption,
            dead_reason: Some(reason),
        };
        match self.insert_row(spec, &message, correlation).await {
            Ok(outcome) => outcome,
            Err(reason) => {
                IngestEvents::extraction_failed();
                IngestOutcome::Rejected(Rejection::Unstorable { reason })
            }
        }
    }
}

/// What a refused message keeps when a broker source stores it dead.
struct Unkept {
    /// The received body, or what the transform made of it.
    body: Vec<u8>,
    /// The key the message was (or would have been) stored under.
    idempotency_key: String,
    /// The headers to store.
    headers: Vec<(String, String)>,
}

/// The extracted fields and headers against the columns that hold them.
fn check_row_fields(
    idempotency_key: &str,
    aggregate_id: &Option<String>,
    event_type: &Option<String>,
    headers: &[(String, String)],
) -> Result<(), Unstorable> {
    limits::check_field(RowField::IdempotencyKey, idempotency_key, MAX_KEY_CHARS)?;
    if let Some(aggregate_id) = aggregate_id {
        limits::check_field(RowField::AggregateId, aggregate_id, MAX_KEY_CHARS)?;
    }
    if let Some(event_type) = event_type {
        limits::check_field(RowField::EventType, event_type, MAX_KEY_CHARS)?;
    }
    limits::check_headers(headers)
}

#[async_trait]
impl Ingest for IngestPipeline {
    async fn ingest(&self, source: &str, received: Received) -> Ingested {
        match self.sources.get(source) {
            Some(prepared) => {
                // The receive span (export off: disabled, nothing below costs anything; a trace
                // the head sampler leaves out: no span, only the context the row stores).
                let trace = Traced::continuing(&received.headers, || {
                    tracing::info_span!(
                        target: crate::trace::TARGET,
                        "receive",
                        otel.name = %format_args!("receive {source}"),
                        otel.kind = "consumer",
                        messaging.operation.type = "receive",
                        messaging.destination.name = source,
                    )
                });
                let span = trace.span().clone();
                self.run(prepared, received, &trace).instrument(span).await
            }
            None => {
                tracing::error!(source, "ingest called for a source that is not configured");
                Ingested::early(IngestOutcome::UnknownSource)
            }
        }
    }

    /// A broker source's key in the order docs/reference/headers.md gives: the same choice as the store's, over a body
    /// parsed once more (a body that does not parse gives the key it would be kept dead under).
    fn idempotency_key(&self, source: &str, received: &Received) -> Option<String> {
        let spec = &self.sources.get(source)?.spec;
        let IngestKind::Broker(attribute_headers) = &spec.kind else {
            return None;
        };
        let from_path = body::parse(&received.body)
            .ok()
            .and_then(|document| spec.idempotency_key_path.text(&document));
        Some(attributes::broker_key(
            attribute_headers,
            received,
            from_path,
        ))
    }
}

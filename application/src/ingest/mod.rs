//! The ingest pipeline every source kind shares: from the received headers and raw body of one
//! message to a stored inbox row (or the reason there is none).
//!
//! The steps run in the documented order, and each step that refuses the message ends it:
//! rate limit, credentials, header filter, correlation id, JSON parse, extraction, source
//! transform, store. The order matters to the sender: a refused credential must not reveal
//! whether the filter would pass, and the correlation id is echoed only once the message got past
//! the checks that decide whether it is processed at all.

mod coalesce;
mod rate;
mod source_stage;
#[cfg(test)]
mod tests;

pub use coalesce::{CoalesceOptions, CoalescingInbox};
pub use rate::RateLimiter;

use crate::telemetry::IngestEvents;
use crate::transform::StageTransform;
use async_trait::async_trait;
use queuebox_domain::inbox::auth::CredentialCheck;
use queuebox_domain::inbox::correlation::{CORRELATION_ID_HEADER, correlation_id};
use queuebox_domain::inbox::filter::HeaderFilter;
use queuebox_domain::inbox::header_value;
use queuebox_domain::inbox::headers::stored_headers;
use queuebox_domain::jsonpath::JsonPath;
use queuebox_ports::inbox::{Consumption, InboxStore, NewInboxMessage, Stored};
use queuebox_ports::ingest::{Ingest, IngestOutcome, Ingested, Received, Rejection};
use queuebox_ports::transform::{SourceContext, TransformContext};
use source_stage::SourceStage;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

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

/// How a source hands over its messages, which decides what a rejected transform does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IngestKind {
    /// An HTTP source: the sender still holds a message it gets an error for, so a rejection
    /// stores nothing and answers 422.
    Http,
    /// A RabbitMQ, Kafka or NATS source: the message is acknowledged whatever happens, so a
    /// rejection stores the original payload as a dead row instead of losing it.
    Broker,
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

    async fn run(&self, source: &Prepared, received: Received) -> Ingested {
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

        let correlation = correlation_id(
            header_value(&received.headers, CORRELATION_ID_HEADER),
            || uuid::Uuid::new_v4().to_string(),
        );
        let outcome = self.store_message(spec, received, &correlation).await;
        Ingested {
            correlation_id: Some(correlation),
            outcome,
        }
    }

    /// Parse, extract, transform, store.
    async fn store_message(
        &self,
        spec: &IngestSource,
        received: Received,
        correlation: &str,
    ) -> IngestOutcome {
        let Ok(document) = serde_json::from_slice::<serde_json::Value>(&received.body) else {
            IngestEvents::extraction_failed();
            return IngestOutcome::Rejected(Rejection::InvalidJson);
        };
        let Some(idempotency_key) = spec.idempotency_key_path.text(&document) else {
            IngestEvents::extraction_failed();
            return IngestOutcome::Rejected(Rejection::KeyNotFound {
                path: spec.idempotency_key_path.to_string(),
            });
        };
        let event_type = spec
            .event_type_path
            .as_ref()
            .and_then(|path| path.text(&document));
        let aggregate_id = spec
            .aggregate_id_path
            .as_ref()
            .and_then(|path| path.text(&document));

        let headers = stored_headers(
            &received.headers,
            spec.auth.as_ref().map(CredentialCheck::credential_header),
        );
        let id = uuid::Uuid::new_v4();
        // The body parsed as JSON, so it is UTF-8; the bytes are stored as sent (the database
        // normalises JSONB anyway) rather than re-serialised.
        let original = String::from_utf8(received.body).unwrap_or_else(|_| document.to_string());

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
        match self.store.insert(&message).await {
            Ok(Stored::New(id)) => {
                IngestEvents::stored();
                match message.dead_reason {
                    Some(reason) => IngestOutcome::StoredDead { id, reason },
                    None => IngestOutcome::Stored { id },
                }
            }
            Ok(Stored::Duplicate) => {
                IngestEvents::duplicate();
                IngestOutcome::Duplicate
            }
            Err(error) => {
                IngestEvents::storage_failed();
                tracing::error!(
                    source = %spec.name,
                    correlation_id = %correlation,
                    %error,
                    "inbox message not stored"
                );
                IngestOutcome::Rejected(Rejection::StorageFailed)
            }
        }
    }
}

#[async_trait]
impl Ingest for IngestPipeline {
    async fn ingest(&self, source: &str, received: Received) -> Ingested {
        match self.sources.get(source) {
            Some(prepared) => self.run(prepared, received).await,
            None => {
                tracing::error!(source, "ingest called for a source that is not configured");
                Ingested::early(IngestOutcome::UnknownSource)
            }
        }
    }
}

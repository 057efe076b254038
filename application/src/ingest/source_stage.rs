//! The source transform and what its `onError` strategy makes of a failure, per source kind:
//! `Skip` stores the original body; `Fail` and `Dead` refuse the message at an HTTP source (the
//! sender still holds it) and store the original payload as a dead row at a broker source (the
//! broker acknowledges it, so it must not be lost).

use super::{IngestKind, IngestSource};
use crate::telemetry::IngestEvents;
use crate::transform::StageTransform;
use queuebox_ports::ingest::Rejection;
use queuebox_ports::transform::{ErrorStrategy, TransformContext};

/// What the source stage leaves for the store.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum SourceStage {
    /// Store `payload`; `dead_reason` stores the row dead at once.
    Store {
        payload: String,
        dead_reason: Option<String>,
    },
    /// Store nothing and refuse the message.
    Reject(Rejection),
}

/// Runs `transform` of `spec` over `original` (the received body).
pub(super) async fn run(
    spec: &IngestSource,
    transform: &StageTransform,
    original: String,
    context: &TransformContext,
    correlation: &str,
) -> SourceStage {
    let error = match transform.apply(&original, context).await {
        Ok(payload) => {
            return SourceStage::Store {
                payload,
                dead_reason: None,
            };
        }
        Err(error) => error,
    };
    tracing::warn!(
        source = %spec.name,
        correlation_id = %correlation,
        transform = transform.key_path(),
        strategy = %transform.strategy(),
        kind = %error.kind,
        %error,
        "source transform failed"
    );
    match (transform.strategy(), &spec.kind) {
        (ErrorStrategy::Skip, _) => SourceStage::Store {
            payload: original,
            dead_reason: None,
        },
        (ErrorStrategy::Fail | ErrorStrategy::Dead, IngestKind::Http) => {
            IngestEvents::transform_failed();
            SourceStage::Reject(Rejection::TransformFailed {
                reason: error.message,
            })
        }
        (ErrorStrategy::Fail | ErrorStrategy::Dead, IngestKind::Broker(_)) => {
            IngestEvents::transform_failed();
            SourceStage::Store {
                payload: original,
                dead_reason: Some(format!("Transform failed: {error}")),
            }
        }
    }
}

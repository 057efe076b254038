//! The route and destination transforms of one delivery attempt. The route transform reads the
//! row's stored payload, the destination transform reads what the route stage passed on, and the
//! result is only sent: the row keeps its payload, so the next attempt transforms it again.
//!
//! On a failure the block's `onError` decides: `Skip` passes the stage's input on unchanged (the
//! destination stage still runs after a skipped route stage), `Fail` fails the attempt (the row
//! retries with backoff and spends an attempt), `Dead` sends the row to `dead` at once.

use crate::telemetry;
use crate::transform::StageTransform;
use queuebox_domain::outbox::DeliveryOutcome;
use queuebox_ports::outbox::ClaimedRow;
use queuebox_ports::transform::{DeliveryContext, ErrorStrategy, TransformContext};

/// The payload to send for `row`: `Ok(None)` when there is no transform (send the stored payload
/// as it is, without a copy), `Ok(Some(text))` otherwise, or the outcome of a failed stage.
pub(super) async fn payload_for(
    row: &ClaimedRow,
    route: Option<&StageTransform>,
    destination: Option<&StageTransform>,
) -> Result<Option<String>, DeliveryOutcome> {
    if route.is_none() && destination.is_none() {
        return Ok(None);
    }
    let context = TransformContext::Delivery(DeliveryContext {
        message_id: row.id,
        topic: row.topic.clone(),
        attempt: row.attempt,
        created_at: row.created_at,
    });
    let mut current: Option<String> = None;
    for stage in [route, destination].into_iter().flatten() {
        let input = current.as_deref().unwrap_or(&row.payload);
        match stage.apply(input, &context).await {
            Ok(output) => current = Some(output),
            Err(error) => {
                telemetry::transform_failed(stage.strategy());
                tracing::warn!(
                    id = %row.id,
                    topic = %row.topic,
                    attempt = row.attempt,
                    transform = stage.key_path(),
                    strategy = %stage.strategy(),
                    kind = %error.kind,
                    %error,
                    "transform failed"
                );
                let reason = format!("{} failed: {error}", stage.key_path());
                match stage.strategy() {
                    ErrorStrategy::Skip => {}
                    ErrorStrategy::Fail => return Err(DeliveryOutcome::Failed { reason }),
                    ErrorStrategy::Dead => return Err(DeliveryOutcome::Rejected { reason }),
                }
            }
        }
    }
    Ok(current)
}

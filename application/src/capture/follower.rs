//! A replica that does not own capture follows the owner's wake-ups: each notice on the identity's
//! channel wakes its dispatcher, so every replica delivers with capture latency, not only the owner.

use super::wake::DeliveryWake;
use crate::lifecycle::StopSignal;
use crate::telemetry::CaptureMetrics;
use queuebox_domain::capture::wake_channel;
use queuebox_ports::backoff::Backoff;
use queuebox_ports::capture::WakeChannel;
use std::sync::Arc;
use std::time::Duration;

/// The waits before the subscription is renewed: one second, doubling up to thirty.
const BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));

/// Wakes `wake` on every notice of `identity`'s owner until `stop` fires. A broken subscription
/// is renewed with a backoff from one second to thirty; each renewal wakes delivery once, since a
/// notice may have passed while it was down.
pub async fn follow_wakes(
    wakes: Arc<dyn WakeChannel>,
    identity: String,
    wake: DeliveryWake,
    mut stop: StopSignal,
) {
    let channel = wake_channel(&identity);
    let metrics = CaptureMetrics::new();
    let mut failures: u32 = 0;
    loop {
        let subscribed = tokio::select! {
            subscribed = wakes.subscribe(&channel) => subscribed,
            _ = stop.stopped() => return,
        };
        let error = match subscribed {
            Ok(mut feed) => {
                failures = 0;
                wake.wake();
                loop {
                    let next = tokio::select! {
                        next = feed.next() => next,
                        _ = stop.stopped() => return,
                    };
                    match next {
                        Ok(()) => {
                            wake.wake();
                            metrics.peer_wakes.increment(1);
                        }
                        Err(error) => break error,
                    }
                }
            }
            Err(error) => error,
        };
        failures = failures.saturating_add(1);
        let backoff = BACKOFF.delay(failures);
        tracing::warn!(%error, %channel, retry_in_ms = backoff.as_millis() as u64, "following the capture owner's wake-ups failed; polling goes on");
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.stopped() => return,
        }
    }
}

//! Writes the end of each row in batches: one fenced statement for many rows, each still matched on
//! its own claim token.
//!
//! Publish tasks send their finish here and move on. The finisher drains whatever has arrived (up to
//! a bound), writes it in one round trip, and repeats, so batches grow exactly when writes arrive
//! faster than one round trip and no timer adds latency when they do not.

use crate::telemetry::OutboxMetrics;
use queuebox_ports::outbox::{FencedFinish, Finish, OutboxStore};
use queuebox_ports::publish::PublishErrorKind;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc};

/// The most finishes written by one statement.
const MAX_BATCH: usize = 500;
/// The wait before a failed batch is written again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// A failed batch is tried this many times; after that its rows stay `processing` and the reclaim
/// step returns them once their lease expires (the message is then delivered again).
const MAX_TRIES: u32 = 5;

/// A finish together with its release: the token frees the row's place in the in-flight set once the
/// write is done, so a renewal never runs for a row that is already finished.
pub(crate) struct Pending {
    pub(crate) write: FencedFinish,
    /// The cause of the failed publish that led to a retry or dead write, for its log line;
    /// `None` when no publish failed (a transform, no route, a release).
    pub(crate) publish_error: Option<PublishErrorKind>,
    pub(crate) on_written: Box<dyn FnOnce() + Send>,
}

/// Runs until every sender is dropped and the queue is empty.
pub(crate) async fn run(
    store: Arc<dyn OutboxStore>,
    mut queue: mpsc::UnboundedReceiver<Pending>,
    metrics: Arc<OutboxMetrics>,
    written: Arc<Notify>,
) {
    let mut batch: Vec<Pending> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = queue.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        write_batch(store.as_ref(), &mut batch, &metrics).await;
        // A finished head releases its key: wake the claimer so the next row of that key goes now.
        written.notify_one();
    }
}

async fn write_batch(store: &dyn OutboxStore, batch: &mut Vec<Pending>, metrics: &OutboxMetrics) {
    let writes: Vec<FencedFinish> = batch.iter().map(|p| p.write.clone()).collect();
    let mut tries = 0;
    let applied = loop {
        tries += 1;
        match store.finish(&writes).await {
            Ok(applied) => break Some(applied),
            Err(error) if tries < MAX_TRIES => {
                tracing::warn!(%error, rows = writes.len(), tries, "finishing rows failed; trying again");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(error) => {
                tracing::error!(
                    %error,
                    rows = writes.len(),
                    "finishing rows failed; they stay processing and return after their lease"
                );
                metrics.process_errors.increment(writes.len() as u64);
                break None;
            }
        }
    };
    for (index, pending) in batch.drain(..).enumerate() {
        if let Some(applied) = &applied {
            let changed = applied.get(index).copied().unwrap_or(false);
            count(&pending.write, pending.publish_error, changed, metrics);
        }
        (pending.on_written)();
    }
}

fn count(
    write: &FencedFinish,
    publish_error: Option<PublishErrorKind>,
    changed: bool,
    metrics: &OutboxMetrics,
) {
    if write.finish == Finish::Release {
        // Not a delivery outcome: a row handed back unpublished. A refused release only means the
        // lease had already passed and the reclaim or another replica has the row.
        if !changed {
            tracing::debug!(id = %write.id, "release of an unpublished row found the claim gone");
        }
        return;
    }
    if !changed {
        metrics.claims_lost.increment(1);
        match write.finish {
            Finish::Sent => tracing::error!(
                id = %write.id,
                claim_token = %write.claim_token,
                "claim lost before the row was marked sent: the destination has it and the new owner will send it again"
            ),
            _ => {
                tracing::warn!(id = %write.id, claim_token = %write.claim_token, "claim lost before the row's retry or dead write; the new owner has it")
            }
        }
        return;
    }
    // The reasons are already redacted; `escape_debug` keeps a receiver's multi-line answer on one
    // log line, so an echoed body cannot forge lines of its own. `kind` is the cause of a failed
    // publish (absent when the failure came before one: a transform, no route).
    let kind = publish_error.map(tracing::field::display);
    match &write.finish {
        Finish::Sent => {
            metrics.sent.increment(1);
            tracing::debug!(id = %write.id, "row sent");
        }
        Finish::Retry {
            attempt,
            delay,
            error,
        } => {
            metrics.failed.increment(1);
            tracing::warn!(
                id = %write.id,
                attempt,
                retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                kind,
                reason = %error.escape_debug(),
                "delivery failed; the row will be tried again"
            );
        }
        Finish::Dead { error } => {
            metrics.dead.increment(1);
            tracing::warn!(
                id = %write.id,
                kind,
                reason = %error.escape_debug(),
                "row moved to dead"
            );
        }
        Finish::Release => {}
    }
}

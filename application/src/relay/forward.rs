//! One claimed batch: each row becomes its outbox row (or a dead letter when it has no topic), and
//! the batch is forwarded in one fenced store call.

use super::headers::relay_headers;
use super::topics::{NoTopic, SourceTopics};
use crate::telemetry::RelayMetrics;
use queuebox_ports::inbox::{ForwardedRow, RelayRow, RelayStore};
use std::time::Duration;

/// A failed forward is tried this often in all. Trying again is safe: the statement is atomic, and a
/// forward that did commit before its answer was lost finds its fences gone and writes nothing twice.
const FORWARD_TRIES: u32 = 3;
/// The wait between two tries.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// The width of the outbox `topic` column (`VARCHAR(255)`), in characters.
const MAX_TOPIC_CHARS: usize = 255;

/// A topic the outbox column cannot hold would fail the forward at every claim; it goes dead instead.
fn fits_the_topic_column(topic: String) -> Result<String, NoTopic> {
    if topic.chars().count() > MAX_TOPIC_CHARS {
        return Err(NoTopic::TooLong);
    }
    Ok(topic)
}

/// What happened to the rows of one batch.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Rows now in the outbox.
    pub(crate) forwarded: u64,
    /// Rows moved to dead (no topic).
    pub(crate) dead: u64,
    /// Rows whose fence failed: another replica owns them now.
    pub(crate) lost: u64,
    /// Rows left processing after a store error; the reclaim returns them after their lease.
    pub(crate) failed: u64,
}

/// Forwards `rows`, counting and logging each end.
pub(crate) async fn forward_batch(
    store: &dyn RelayStore,
    topics: &SourceTopics,
    max_attempts: i32,
    rows: Vec<RelayRow>,
    metrics: &RelayMetrics,
) -> Outcome {
    let mut outcome = Outcome::default();
    let mut forwards = Vec::with_capacity(rows.len());
    // One relay span per forwarded row, ended when the batch's forward is over (export off: the
    // spans are disabled and this stays empty; a row whose trace the head sampler leaves out has
    // none).
    let mut spans = Vec::new();
    for row in rows {
        match topics
            .render(&row.source, row.event_type.as_deref())
            .and_then(fits_the_topic_column)
        {
            Ok(topic) => {
                let mut headers = relay_headers(&row);
                let traced = crate::trace::Traced::continuing(&row.headers, || {
                    tracing::info_span!(
                        target: crate::trace::TARGET,
                        "relay",
                        otel.name = %format_args!("relay {}", row.source),
                        otel.kind = "internal",
                        messaging.operation.type = "process",
                        messaging.destination.name = %row.source,
                        messaging.message.id = %row.id,
                    )
                });
                traced.inject(&mut headers);
                if !traced.span().is_disabled() {
                    spans.push(traced);
                }
                forwards.push(ForwardedRow {
                    inbox_id: row.id,
                    claim_token: row.claim_token,
                    topic,
                    key: row.aggregate_id,
                    payload: row.payload,
                    headers,
                    max_attempts,
                });
            }
            Err(why) => dead_letter(store, &row, why, metrics, &mut outcome).await,
        }
    }
    if forwards.is_empty() {
        return outcome;
    }
    match forward_with_retries(store, &forwards, metrics).await {
        Some(applied) => count(&forwards, &applied, metrics, &mut outcome),
        // One row the outbox refuses (for example a value too wide for a custom column) must not hold
        // back the rest of its batch at every claim: forward each row alone, so only that row waits.
        None if forwards.len() > 1 => {
            tracing::warn!(rows = forwards.len(), "forwarding the rows one by one");
            for row in &forwards {
                match store.forward(std::slice::from_ref(row)).await {
                    Ok(applied) => {
                        count(std::slice::from_ref(row), &applied, metrics, &mut outcome)
                    }
                    Err(error) => {
                        tracing::error!(
                            %error,
                            inbox_id = %row.inbox_id,
                            "forwarding an inbox row failed; it stays processing and returns after its lease"
                        );
                        metrics.errors.increment(1);
                        outcome.failed += 1;
                    }
                }
            }
        }
        None => outcome.failed += forwards.len() as u64,
    }
    drop(spans);
    outcome
}

/// The batch forward, tried up to [`FORWARD_TRIES`] times; `None` when every try failed.
async fn forward_with_retries(
    store: &dyn RelayStore,
    forwards: &[ForwardedRow],
    metrics: &RelayMetrics,
) -> Option<Vec<bool>> {
    let mut tries = 0;
    loop {
        tries += 1;
        match store.forward(forwards).await {
            Ok(applied) => return Some(applied),
            Err(error) => {
                metrics.errors.increment(1);
                if tries >= FORWARD_TRIES {
                    tracing::error!(%error, rows = forwards.len(), "forwarding inbox rows failed");
                    return None;
                }
                tracing::warn!(%error, rows = forwards.len(), tries, "forwarding inbox rows failed; trying again");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

/// Counts each forwarded row, and each row whose fence failed as a lost claim.
fn count(
    forwards: &[ForwardedRow],
    applied: &[bool],
    metrics: &RelayMetrics,
    outcome: &mut Outcome,
) {
    for (index, row) in forwards.iter().enumerate() {
        if applied.get(index).copied().unwrap_or(false) {
            outcome.forwarded += 1;
            metrics.forwarded.increment(1);
        } else {
            // The outbox insert of this row was rolled back with its fence: nothing reached the outbox.
            outcome.lost += 1;
            metrics.claims_lost.increment(1);
            tracing::warn!(
                inbox_id = %row.inbox_id,
                "the relay lost its claim before the forward; no outbox row was written, the new owner forwards it"
            );
        }
    }
}

async fn dead_letter(
    store: &dyn RelayStore,
    row: &RelayRow,
    why: NoTopic,
    metrics: &RelayMetrics,
    outcome: &mut Outcome,
) {
    let reason = match why {
        NoTopic::Empty => format!(
            "the topic template of source {} rendered empty{}",
            row.source,
            if row.event_type.is_none() {
                " (the message has no event type)"
            } else {
                ""
            }
        ),
        NoTopic::UnknownSource => format!("no source named {} is configured", row.source),
        NoTopic::TooLong => format!(
            "the topic template of source {} rendered more than {MAX_TOPIC_CHARS} characters",
            row.source
        ),
    };
    match store.mark_dead(row.id, row.claim_token, &reason).await {
        Ok(true) => {
            outcome.dead += 1;
            tracing::warn!(inbox_id = %row.id, source = %row.source, %reason, "inbox row moved to dead");
        }
        Ok(false) => {
            outcome.lost += 1;
            metrics.claims_lost.increment(1);
            tracing::warn!(inbox_id = %row.id, "the relay lost its claim before the dead letter; the new owner has the row");
        }
        Err(error) => {
            outcome.failed += 1;
            metrics.errors.increment(1);
            tracing::warn!(%error, inbox_id = %row.id, "moving an inbox row to dead failed; it returns after its lease");
        }
    }
}

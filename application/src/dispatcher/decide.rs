//! Turns the outcome of one delivery into the fenced write that ends the claim. The rule itself
//! (retry while attempts remain, dead otherwise, backoff with jitter) lives in the domain; this file
//! only feeds it the row's counters and a random jitter and maps the answer onto the store's terms.

use super::options::DispatcherOptions;
use queuebox_domain::backoff::Backoff;
use queuebox_domain::outbox::{Attempts, DeliveryOutcome, Transition, decide};
use queuebox_ports::outbox::{ClaimedRow, Finish};

/// The finish of `row` after `outcome`.
pub(crate) fn finish_for(
    row: &ClaimedRow,
    outcome: DeliveryOutcome,
    options: &DispatcherOptions,
) -> Finish {
    let attempts = Attempts {
        attempt: row.attempt,
        max_attempts: row.max_attempts,
    };
    let backoff = Backoff::new(options.retry_base_delay);
    let jitter: f64 = rand::random::<f64>();
    match decide(attempts, outcome, &backoff, jitter) {
        Transition::MarkSent => Finish::Sent,
        Transition::ScheduleRetry {
            next_attempt,
            delay,
            last_error,
        } => Finish::Retry {
            attempt: next_attempt,
            delay,
            error: cut(last_error, options.max_error_bytes),
        },
        Transition::MarkDead { reason } => Finish::Dead {
            error: cut(reason, options.max_error_bytes),
        },
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary.
fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while end > 0 && !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use uuid::Uuid;

    fn options() -> DispatcherOptions {
        DispatcherOptions {
            batch_size: 10,
            concurrency: 2,
            poll_interval: Duration::from_millis(100),
            lease: Duration::from_secs(300),
            retry_base_delay: Duration::from_millis(1000),
            pending_gauge_interval: Duration::from_secs(5),
            shutdown_timeout: Duration::from_secs(30),
            max_error_bytes: 8,
        }
    }

    fn row(attempt: i32, max_attempts: i32) -> ClaimedRow {
        ClaimedRow {
            id: Uuid::new_v4(),
            claim_token: Uuid::new_v4(),
            topic: "order.created".into(),
            key: None,
            aggregate_type: None,
            payload: "{}".into(),
            headers: vec![],
            attempt,
            max_attempts,
            sequence: 1,
            created_at: std::time::SystemTime::UNIX_EPOCH,
        }
    }

    fn failed() -> DeliveryOutcome {
        DeliveryOutcome::Failed {
            reason: "HTTP 503: unavailable".into(),
        }
    }

    #[test]
    fn a_failure_with_attempts_left_retries_with_backoff_and_a_cut_error() {
        match finish_for(&row(2, 5), failed(), &options()) {
            Finish::Retry {
                attempt,
                delay,
                error,
            } => {
                assert_eq!(attempt, 3);
                assert!(
                    delay >= Duration::from_millis(4000) && delay <= Duration::from_millis(5000)
                );
                assert_eq!(error, "HTTP 503");
            }
            other => panic!("expected a retry, got {other:?}"),
        }
    }

    #[test]
    fn a_failure_at_the_ceiling_is_dead() {
        assert!(matches!(
            finish_for(&row(5, 5), failed(), &options()),
            Finish::Dead { .. }
        ));
    }

    #[test]
    fn no_route_is_dead_at_once() {
        let outcome = DeliveryOutcome::NoRoute { topic: "x".into() };
        assert!(matches!(
            finish_for(&row(0, 5), outcome, &options()),
            Finish::Dead { .. }
        ));
    }
}

//! What the driver makes of one ingest outcome: acknowledge, or hand back after which wait.

use queuebox_ports::ingest::{IngestOutcome, Rejection};
use std::time::Duration;

/// The driver's decision for one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The row committed, or there is nothing to store.
    Ack,
    /// The pipeline refused the message without storing it. A broker source's pipeline stores
    /// refused messages as `dead` rows, so this should not happen; acknowledging it (with an
    /// error log) keeps one poison message from coming back for ever.
    AckUnstored {
        /// Why the pipeline refused it, for the log.
        reason: String,
    },
    /// The message must come again, after `wait`.
    Retry {
        /// Why, for the log.
        reason: String,
        /// How long to wait before handing it back.
        wait: Wait,
    },
}

/// The wait before a message is handed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// The store failed: the retry backoff, growing while stores keep failing.
    Growing,
    /// The pipeline asked for this wait (a rate limit).
    For(Duration),
    /// The shortest retry wait (an answer a broker source does not expect).
    First,
}

/// The verdict on `outcome`.
pub(crate) fn verdict(outcome: &IngestOutcome) -> Verdict {
    match outcome {
        IngestOutcome::Stored { .. }
        | IngestOutcome::StoredDead { .. }
        | IngestOutcome::Duplicate
        | IngestOutcome::Filtered => Verdict::Ack,
        IngestOutcome::Rejected(Rejection::StorageFailed) => Verdict::Retry {
            reason: "the inbox store failed".to_owned(),
            wait: Wait::Growing,
        },
        IngestOutcome::UnknownSource => Verdict::Retry {
            reason: "the ingest pipeline does not know this source (a wiring fault)".to_owned(),
            wait: Wait::Growing,
        },
        IngestOutcome::Unauthorized { reason } => Verdict::Retry {
            reason: format!(
                "the pipeline answered unauthorized, which a broker source does not expect: {reason}"
            ),
            wait: Wait::First,
        },
        IngestOutcome::RateLimited { retry_after } => Verdict::Retry {
            reason: "the source's rate limit is reached".to_owned(),
            wait: Wait::For(*retry_after),
        },
        IngestOutcome::Rejected(rejection) => Verdict::AckUnstored {
            reason: rejection.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn stored_or_nothing_to_store_is_acknowledged() {
        for outcome in [
            IngestOutcome::Stored { id: Uuid::nil() },
            IngestOutcome::StoredDead {
                id: Uuid::nil(),
                reason: "Invalid JSON".into(),
            },
            IngestOutcome::Duplicate,
            IngestOutcome::Filtered,
        ] {
            assert_eq!(verdict(&outcome), Verdict::Ack, "{outcome:?}");
        }
    }

    #[test]
    fn a_failed_store_waits_the_growing_delay_and_a_rate_limit_its_own() {
        for outcome in [
            IngestOutcome::Rejected(Rejection::StorageFailed),
            IngestOutcome::UnknownSource,
        ] {
            assert!(
                matches!(
                    verdict(&outcome),
                    Verdict::Retry {
                        wait: Wait::Growing,
                        ..
                    }
                ),
                "{outcome:?}"
            );
        }
        assert!(matches!(
            verdict(&IngestOutcome::RateLimited {
                retry_after: Duration::from_millis(1500)
            }),
            Verdict::Retry { wait: Wait::For(w), .. } if w == Duration::from_millis(1500)
        ));
        assert!(matches!(
            verdict(&IngestOutcome::Unauthorized { reason: "x".into() }),
            Verdict::Retry {
                wait: Wait::First,
                ..
            }
        ));
    }

    #[test]
    fn other_refusals_are_acknowledged_unstored() {
        assert_eq!(
            verdict(&IngestOutcome::Rejected(Rejection::InvalidJson)),
            Verdict::AckUnstored {
                reason: "Invalid JSON".into()
            }
        );
    }
}

//! What the source tells the broker about a delivery once the ingest pipeline answered.

use queuebox_ports::ingest::{IngestOutcome, Rejection};
use std::time::Duration;

/// The answer to the broker for one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Settlement {
    /// `basic.ack`: the row committed, or there is nothing to store.
    Ack,
    /// `basic.ack` of a message the pipeline refused without storing it. A broker source's
    /// pipeline stores refused messages as `dead` rows, so this should not happen; acking (with
    /// an error log) keeps a poison message from looping forever on the queue.
    AckUnstored {
        /// Why the pipeline refused it, for the log.
        reason: String,
    },
    /// `basic.nack` with requeue: the broker gives the message again later.
    Requeue {
        /// Why, for the log.
        reason: String,
        /// True when the store failed (the delay before the nack grows with consecutive
        /// failures, so a database that is down does not spin the queue).
        storage_failed: bool,
        /// A wait the pipeline asked for (a rate limit), before the nack.
        wait: Option<Duration>,
    },
}

/// The settlement of `outcome`.
pub(crate) fn settlement(outcome: &IngestOutcome) -> Settlement {
    match outcome {
        IngestOutcome::Stored { .. }
        | IngestOutcome::StoredDead { .. }
        | IngestOutcome::Duplicate
        | IngestOutcome::Filtered => Settlement::Ack,
        IngestOutcome::Rejected(Rejection::StorageFailed) => Settlement::Requeue {
            reason: "the inbox store failed".to_owned(),
            storage_failed: true,
            wait: None,
        },
        IngestOutcome::UnknownSource => Settlement::Requeue {
            reason: "the ingest pipeline does not know this source (a wiring fault)".to_owned(),
            storage_failed: true,
            wait: None,
        },
        IngestOutcome::Unauthorized { reason } => Settlement::Requeue {
            reason: format!(
                "the pipeline answered unauthorized, which a broker source does not expect: {reason}"
            ),
            storage_failed: false,
            wait: None,
        },
        IngestOutcome::RateLimited { retry_after } => Settlement::Requeue {
            reason: "the pipeline answered rate limited, which a broker source does not expect"
                .to_owned(),
            storage_failed: false,
            wait: Some(*retry_after),
        },
        IngestOutcome::Rejected(rejection) => Settlement::AckUnstored {
            reason: rejection.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn stored_or_nothing_to_store_is_acked() {
        for outcome in [
            IngestOutcome::Stored { id: Uuid::nil() },
            IngestOutcome::StoredDead {
                id: Uuid::nil(),
                reason: "Invalid JSON".into(),
            },
            IngestOutcome::Duplicate,
            IngestOutcome::Filtered,
        ] {
            assert_eq!(settlement(&outcome), Settlement::Ack, "{outcome:?}");
        }
    }

    #[test]
    fn a_failed_store_is_handed_back_with_the_growing_delay() {
        for outcome in [
            IngestOutcome::Rejected(Rejection::StorageFailed),
            IngestOutcome::UnknownSource,
        ] {
            assert!(
                matches!(
                    settlement(&outcome),
                    Settlement::Requeue {
                        storage_failed: true,
                        wait: None,
                        ..
                    }
                ),
                "{outcome:?}"
            );
        }
    }

    #[test]
    fn http_only_outcomes_are_handed_back_and_other_refusals_are_acked() {
        assert!(matches!(
            settlement(&IngestOutcome::Unauthorized { reason: "x".into() }),
            Settlement::Requeue {
                storage_failed: false,
                ..
            }
        ));
        assert!(matches!(
            settlement(&IngestOutcome::RateLimited {
                retry_after: Duration::from_secs(1)
            }),
            Settlement::Requeue { wait: Some(_), .. }
        ));
        assert_eq!(
            settlement(&IngestOutcome::Rejected(Rejection::InvalidJson)),
            Settlement::AckUnstored {
                reason: "Invalid JSON".into()
            }
        );
    }
}

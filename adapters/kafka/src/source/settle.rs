//! What a record's ingest outcome means for its offset.

use queuebox_ports::ingest::{IngestOutcome, Rejection};
use std::time::Duration;

/// The fate of one record once the ingest pipeline answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Settlement {
    /// The row committed, or there is nothing to store: the offset may move past the record.
    Done,
    /// The pipeline refused the record without storing it. A broker source's pipeline stores
    /// refused messages as `dead` rows, so this should not happen; moving past it (with an error
    /// log) keeps one poison record from stopping its partition for ever.
    DoneUnstored {
        /// Why the pipeline refused it, for the log.
        reason: String,
    },
    /// The record must be read again: the offset stays on it and the consumer seeks back to it.
    Retry {
        /// Why, for the log.
        reason: String,
        /// A wait the pipeline asked for (a rate limit) before the record is read again.
        wait: Option<Duration>,
    },
}

impl Settlement {
    /// True when the offset may move past the record.
    pub(crate) fn is_done(&self) -> bool {
        !matches!(self, Settlement::Retry { .. })
    }
}

/// The settlement of `outcome`.
pub(crate) fn settlement(outcome: &IngestOutcome) -> Settlement {
    match outcome {
        IngestOutcome::Stored { .. }
        | IngestOutcome::StoredDead { .. }
        | IngestOutcome::Duplicate
        | IngestOutcome::Filtered => Settlement::Done,
        IngestOutcome::Rejected(Rejection::StorageFailed) => Settlement::Retry {
            reason: "the inbox store failed".to_owned(),
            wait: None,
        },
        IngestOutcome::UnknownSource => Settlement::Retry {
            reason: "the ingest pipeline does not know this source (a wiring fault)".to_owned(),
            wait: None,
        },
        IngestOutcome::Unauthorized { reason } => Settlement::Retry {
            reason: format!(
                "the pipeline answered unauthorized, which a broker source does not expect: {reason}"
            ),
            wait: None,
        },
        IngestOutcome::RateLimited { retry_after } => Settlement::Retry {
            reason: "the pipeline answered rate limited, which a broker source does not expect"
                .to_owned(),
            wait: Some(*retry_after),
        },
        IngestOutcome::Rejected(rejection) => Settlement::DoneUnstored {
            reason: rejection.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn stored_or_nothing_to_store_moves_on() {
        for outcome in [
            IngestOutcome::Stored { id: Uuid::nil() },
            IngestOutcome::StoredDead {
                id: Uuid::nil(),
                reason: "Invalid JSON".into(),
            },
            IngestOutcome::Duplicate,
            IngestOutcome::Filtered,
        ] {
            assert_eq!(settlement(&outcome), Settlement::Done, "{outcome:?}");
        }
    }

    #[test]
    fn a_failed_store_is_read_again_and_a_refusal_is_not() {
        let retry = settlement(&IngestOutcome::Rejected(Rejection::StorageFailed));
        assert!(!retry.is_done());
        assert!(!settlement(&IngestOutcome::UnknownSource).is_done());
        let refused = settlement(&IngestOutcome::Rejected(Rejection::InvalidJson));
        assert_eq!(
            refused,
            Settlement::DoneUnstored {
                reason: "Invalid JSON".to_owned()
            }
        );
        assert!(refused.is_done());
        let limited = settlement(&IngestOutcome::RateLimited {
            retry_after: Duration::from_secs(2),
        });
        assert!(
            matches!(limited, Settlement::Retry { wait: Some(w), .. } if w == Duration::from_secs(2))
        );
    }
}

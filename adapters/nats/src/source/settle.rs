//! What the source tells JetStream about a message once the ingest pipeline answered.

use queuebox_ports::ingest::{IngestOutcome, Rejection};

/// The answer to JetStream for one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Settlement {
    /// `+ACK`: the row committed, or there is nothing to store.
    Ack,
    /// `+ACK` of a message the pipeline refused without storing it. A broker source's pipeline
    /// stores refused messages as `dead` rows, so this should not happen; acknowledging (with an
    /// error log) keeps a poison message from being redelivered for ever.
    AckUnstored {
        /// Why the pipeline refused it, for the log.
        reason: String,
    },
    /// `-NAK`: JetStream delivers the message again (at once, or after the delay the source
    /// asks for while stores keep failing).
    Nak {
        /// Why, for the log.
        reason: String,
        /// True when the store failed (consecutive failures lengthen the redelivery delay).
        storage_failed: bool,
    },
}

/// The settlement of `outcome`.
pub(crate) fn settlement(outcome: &IngestOutcome) -> Settlement {
    match outcome {
        IngestOutcome::Stored { .. }
        | IngestOutcome::StoredDead { .. }
        | IngestOutcome::Duplicate
        | IngestOutcome::Filtered => Settlement::Ack,
        IngestOutcome::Rejected(Rejection::StorageFailed) => Settlement::Nak {
            reason: "the inbox store failed".to_owned(),
            storage_failed: true,
        },
        IngestOutcome::UnknownSource => Settlement::Nak {
            reason: "the ingest pipeline does not know this source (a wiring fault)".to_owned(),
            storage_failed: true,
        },
        IngestOutcome::Unauthorized { reason } => Settlement::Nak {
            reason: format!(
                "the pipeline answered unauthorized, which a broker source does not expect: {reason}"
            ),
            storage_failed: false,
        },
        IngestOutcome::RateLimited { .. } => Settlement::Nak {
            reason: "the pipeline answered rate limited, which a broker source does not expect"
                .to_owned(),
            storage_failed: true,
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
    fn stored_or_nothing_to_store_is_acked_and_a_failed_store_is_handed_back() {
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
        assert!(matches!(
            settlement(&IngestOutcome::Rejected(Rejection::StorageFailed)),
            Settlement::Nak {
                storage_failed: true,
                ..
            }
        ));
        assert_eq!(
            settlement(&IngestOutcome::Rejected(Rejection::InvalidJson)),
            Settlement::AckUnstored {
                reason: "Invalid JSON".into()
            }
        );
    }
}

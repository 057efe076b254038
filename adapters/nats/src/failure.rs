//! Turning an async-nats publish failure into a [`PublishError`] whose kind an operator can act on
//! and whose reason is safe to store.

use async_nats::jetstream::context::{PublishError as JsPublishError, PublishErrorKind as JsKind};
use queuebox_domain::redact::Redactor;
use queuebox_ports::publish::{PublishError, PublishErrorKind};
use std::error::Error as _;

/// The kind of a JetStream publish failure.
///
/// - No stream holds the subject (the server answered "no responders"): `Rejected`, so the row
///   follows the retry path and an operator who creates the stream sees it delivered.
/// - The server answered with a JetStream error (a stream limit with `discard: new`, a wrong
///   expected sequence): `Rejected`.
/// - No acknowledgement in time: `Timeout`. The message may still have been stored; the retry
///   carries the same `Nats-Msg-Id`, so the duplicate window drops the second copy.
/// - The connection dropped under the publish: `Unreachable`.
/// - A message larger than the server's `max_payload`: `InvalidMessage`.
pub(crate) fn kind_of(error: &JsPublishError) -> PublishErrorKind {
    match error.kind() {
        JsKind::StreamNotFound | JsKind::WrongLastMessageId | JsKind::WrongLastSequence => {
            PublishErrorKind::Rejected
        }
        JsKind::TimedOut => PublishErrorKind::Timeout,
        JsKind::BrokenPipe => PublishErrorKind::Unreachable,
        JsKind::MaxPayloadExceeded => PublishErrorKind::InvalidMessage,
        JsKind::MaxAckPending => PublishErrorKind::Other,
        JsKind::Other => {
            // A JetStream API error answer is the server refusing this message.
            if error
                .source()
                .is_some_and(|s| s.downcast_ref::<async_nats::jetstream::Error>().is_some())
            {
                PublishErrorKind::Rejected
            } else {
                PublishErrorKind::Other
            }
        }
    }
}

/// The reason of a JetStream publish failure on `subject`.
pub(crate) fn from_jetstream(
    subject: &str,
    error: &JsPublishError,
    redactor: &Redactor,
) -> PublishError {
    let kind = kind_of(error);
    let reason = if error.kind() == JsKind::StreamNotFound {
        format!("publishing to subject `{subject}`: no JetStream stream holds this subject")
    } else {
        format!("publishing to subject `{subject}`: {error}")
    };
    PublishError::new(kind, redactor.redact(&reason))
}

/// A failure of `kind` with a reason that is masked and cut.
pub(crate) fn failure(kind: PublishErrorKind, reason: &str, redactor: &Redactor) -> PublishError {
    PublishError::new(kind, redactor.redact(reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_cause() {
        let cases = [
            (JsKind::StreamNotFound, PublishErrorKind::Rejected),
            (JsKind::TimedOut, PublishErrorKind::Timeout),
            (JsKind::BrokenPipe, PublishErrorKind::Unreachable),
            (JsKind::MaxPayloadExceeded, PublishErrorKind::InvalidMessage),
            (JsKind::Other, PublishErrorKind::Other),
        ];
        for (kind, expected) in cases {
            assert_eq!(kind_of(&JsPublishError::new(kind)), expected, "{kind:?}");
        }
        let missing = from_jetstream(
            "orders.created",
            &JsPublishError::new(JsKind::StreamNotFound),
            &Redactor::new(200),
        );
        assert!(
            missing.reason.contains("no JetStream stream holds"),
            "{}",
            missing.reason
        );
    }
}

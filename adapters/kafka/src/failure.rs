//! Turning a failed produce into a [`PublishError`] whose kind an operator can act on and whose
//! reason is safe to store.

use crate::context::{LinkError, LinkProblem};
use queuebox_domain::redact::Redactor;
use queuebox_ports::publish::{PublishError, PublishErrorKind};
use rdkafka::types::RDKafkaErrorCode;

/// The kind and a short label of a produce error code.
///
/// - too large for the broker or the client: [`PublishErrorKind::InvalidMessage`] ("message too
///   large"), as is a topic name the broker refuses;
/// - a topic that does not exist (and is not created on demand): [`PublishErrorKind::Rejected`]
///   ("unknown topic"), like any other refusal of the broker (a record it calls invalid, too few
///   in-sync replicas, a policy);
/// - a refused login or a missing ACL: [`PublishErrorKind::Auth`] ("authorization");
/// - no broker reachable: [`PublishErrorKind::Unreachable`];
/// - no acknowledgement within the budget: [`PublishErrorKind::Timeout`] (the caller refines it
///   with the client's last link error, see [`produce_failure`]).
pub(crate) fn classify(code: RDKafkaErrorCode) -> (PublishErrorKind, &'static str) {
    use RDKafkaErrorCode as C;
    match code {
        C::MessageSizeTooLarge | C::MessageBatchTooLarge => {
            (PublishErrorKind::InvalidMessage, "message too large")
        }
        C::InvalidTopic => (PublishErrorKind::InvalidMessage, "invalid topic"),
        C::UnknownTopicOrPartition | C::UnknownTopic | C::UnknownPartition => {
            (PublishErrorKind::Rejected, "unknown topic")
        }
        C::TopicAuthorizationFailed
        | C::ClusterAuthorizationFailed
        | C::GroupAuthorizationFailed
        | C::TransactionalIdAuthorizationFailed
        | C::SaslAuthenticationFailed
        | C::Authentication => (PublishErrorKind::Auth, "authorization"),
        C::AllBrokersDown
        | C::BrokerTransportFailure
        | C::Resolve
        | C::NetworkException
        | C::SSL => (PublishErrorKind::Unreachable, "no broker reachable"),
        C::MessageTimedOut | C::RequestTimedOut | C::OperationTimedOut => {
            (PublishErrorKind::Timeout, "no acknowledgement in time")
        }
        C::InvalidRecord
        | C::InvalidMessage
        | C::NotEnoughReplicas
        | C::NotEnoughReplicasAfterAppend
        | C::PolicyViolation
        | C::InvalidRequiredAcks
        | C::InvalidTimestamp => (PublishErrorKind::Rejected, "refused by the broker"),
        _ => (PublishErrorKind::Other, "failed"),
    }
}

/// The failure of a produce to `topic` that librdkafka ended with `code`. A timeout is refined by
/// `link`, the client-wide error seen during the publish: when no broker was reachable, or the
/// login was refused, that is the cause an operator needs, not the timeout.
pub(crate) fn produce_failure(
    topic: &str,
    code: RDKafkaErrorCode,
    link: Option<LinkError>,
    redactor: &Redactor,
) -> PublishError {
    let (kind, label) = classify(code);
    let refined = match (kind, link) {
        (PublishErrorKind::Timeout | PublishErrorKind::Other, Some(link)) => Some(link),
        _ => None,
    };
    match refined {
        Some(link) => {
            let (kind, label) = match link.problem {
                LinkProblem::Unreachable => (PublishErrorKind::Unreachable, "no broker reachable"),
                LinkProblem::Auth => (PublishErrorKind::Auth, "authorization"),
            };
            PublishError::new(
                kind,
                redactor.redact(&format!(
                    "publishing to topic `{topic}` failed ({label}): {code}; {}",
                    link.reason
                )),
            )
        }
        None => PublishError::new(
            kind,
            redactor.redact(&format!(
                "publishing to topic `{topic}` failed ({label}): {code}"
            )),
        ),
    }
}

/// The failure of a publish that outlived its whole budget without an answer from librdkafka.
pub(crate) fn budget_exceeded(
    topic: &str,
    link: Option<LinkError>,
    redactor: &Redactor,
) -> PublishError {
    produce_failure(topic, RDKafkaErrorCode::MessageTimedOut, link, redactor)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn the_four_families_the_issue_names_are_told_apart() {
        use RDKafkaErrorCode as C;
        assert_eq!(
            classify(C::MessageSizeTooLarge).0,
            PublishErrorKind::InvalidMessage
        );
        assert_eq!(
            classify(C::UnknownTopicOrPartition).0,
            PublishErrorKind::Rejected
        );
        assert_eq!(classify(C::UnknownTopic).1, "unknown topic");
        assert_eq!(
            classify(C::TopicAuthorizationFailed).0,
            PublishErrorKind::Auth
        );
        assert_eq!(classify(C::AllBrokersDown).0, PublishErrorKind::Unreachable);
        assert_eq!(classify(C::MessageTimedOut).0, PublishErrorKind::Timeout);
        assert_eq!(classify(C::NotEnoughReplicas).0, PublishErrorKind::Rejected);
    }

    #[test]
    fn a_timeout_while_no_broker_answered_is_unreachable_and_redacted() {
        let redactor = Redactor::new(200).with_secret("hunter2");
        let link = LinkError {
            problem: LinkProblem::Unreachable,
            reason: "127.0.0.1:1/bootstrap: Connect failed (user:hunter2)".to_owned(),
            at: Instant::now(),
        };
        let error = produce_failure(
            "orders",
            RDKafkaErrorCode::MessageTimedOut,
            Some(link),
            &redactor,
        );
        assert_eq!(error.kind, PublishErrorKind::Unreachable);
        assert!(
            error
                .reason
                .starts_with("publishing to topic `orders` failed (no broker reachable)"),
            "{}",
            error.reason
        );
        assert!(!error.reason.contains("hunter2"), "{}", error.reason);
        let error = produce_failure("orders", RDKafkaErrorCode::MessageTimedOut, None, &redactor);
        assert_eq!(error.kind, PublishErrorKind::Timeout);
    }

    #[test]
    fn a_refusal_is_not_rewritten_by_a_link_error() {
        let link = LinkError {
            problem: LinkProblem::Unreachable,
            reason: "down".to_owned(),
            at: Instant::now(),
        };
        let error = produce_failure(
            "t",
            RDKafkaErrorCode::MessageSizeTooLarge,
            Some(link),
            &Redactor::new(200),
        );
        assert_eq!(error.kind, PublishErrorKind::InvalidMessage);
        assert!(
            error.reason.contains("message too large"),
            "{}",
            error.reason
        );
    }
}

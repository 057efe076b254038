//! The librdkafka client context of this crate: it turns librdkafka's log lines into tracing
//! events and remembers the last client-wide error (no broker reachable, a failed login), so a
//! publish that times out can say why and a source's health can go down at once.

use rdkafka::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::types::RDKafkaErrorCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// What a client-wide error says about the link to the brokers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkProblem {
    /// No broker could be reached (refused, reset, a name that does not resolve, a TLS failure).
    Unreachable,
    /// A broker refused the credentials.
    Auth,
}

/// One remembered client-wide error.
#[derive(Debug, Clone)]
pub(crate) struct LinkError {
    pub(crate) problem: LinkProblem,
    /// librdkafka's words (not yet redacted).
    pub(crate) reason: String,
    pub(crate) at: Instant,
}

/// The context of every client this crate creates. Clones share the remembered errors, so the
/// owner of a client keeps a clone to read them.
#[derive(Debug, Default, Clone)]
pub(crate) struct LinkContext {
    last_errors: Arc<Mutex<LastErrors>>,
}

/// The last error of each problem: a refused login is followed by "all brokers are down" (the
/// broker closes the connection), which must not hide it.
#[derive(Debug, Default)]
struct LastErrors {
    unreachable: Option<LinkError>,
    auth: Option<LinkError>,
}

impl LinkContext {
    /// The client-wide error seen since `since`: a refused login when there was one, else the
    /// last unreachable broker.
    pub(crate) fn error_since(&self, since: Instant) -> Option<LinkError> {
        let last = self
            .last_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let recent = |error: &Option<LinkError>| error.clone().filter(|e| e.at >= since);
        recent(&last.auth).or_else(|| recent(&last.unreachable))
    }

    /// Forgets the errors: something reached a broker since.
    pub(crate) fn clear(&self) {
        *self
            .last_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = LastErrors::default();
    }

    fn remember(&self, problem: LinkProblem, reason: &str) {
        let error = Some(LinkError {
            problem,
            reason: reason.to_owned(),
            at: Instant::now(),
        });
        let mut last = self
            .last_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match problem {
            LinkProblem::Unreachable => last.unreachable = error,
            LinkProblem::Auth => last.auth = error,
        }
    }
}

/// The link problem an error code of librdkafka's error callback reports, if any.
pub(crate) fn link_problem(code: RDKafkaErrorCode) -> Option<LinkProblem> {
    match code {
        RDKafkaErrorCode::AllBrokersDown
        | RDKafkaErrorCode::BrokerTransportFailure
        | RDKafkaErrorCode::Resolve
        | RDKafkaErrorCode::NetworkException
        | RDKafkaErrorCode::SSL => Some(LinkProblem::Unreachable),
        RDKafkaErrorCode::Authentication
        | RDKafkaErrorCode::SaslAuthenticationFailed
        | RDKafkaErrorCode::TopicAuthorizationFailed
        | RDKafkaErrorCode::GroupAuthorizationFailed
        | RDKafkaErrorCode::ClusterAuthorizationFailed => Some(LinkProblem::Auth),
        _ => None,
    }
}

impl ClientContext for LinkContext {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => tracing::error!(facility, "librdkafka: {message}"),
            RDKafkaLogLevel::Warning => tracing::warn!(facility, "librdkafka: {message}"),
            _ => tracing::debug!(facility, "librdkafka: {message}"),
        }
    }

    fn error(&self, error: RdKafkaError, reason: &str) {
        let Some(code) = error.rdkafka_error_code() else {
            tracing::warn!("librdkafka error: {reason}");
            return;
        };
        match link_problem(code) {
            Some(problem) => {
                tracing::debug!(?code, "librdkafka link error: {reason}");
                self.remember(problem, reason);
            }
            None => tracing::warn!(?code, "librdkafka error: {reason}"),
        }
    }
}

impl ConsumerContext for LinkContext {}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn link_errors_are_remembered_until_cleared() {
        let context = LinkContext::default();
        let before = Instant::now();
        context.error(
            RdKafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
            "1/1 brokers are down",
        );
        let error = context.error_since(before).unwrap();
        assert_eq!(error.problem, LinkProblem::Unreachable);
        assert_eq!(error.reason, "1/1 brokers are down");
        assert!(
            context.error_since(Instant::now()).is_none(),
            "older than asked"
        );
        context.error(
            RdKafkaError::Global(RDKafkaErrorCode::Authentication),
            "SASL authentication error",
        );
        assert_eq!(
            context.error_since(before).unwrap().problem,
            LinkProblem::Auth
        );
        context.clear();
        assert!(context.error_since(before).is_none());
    }

    #[test]
    fn other_errors_are_not_link_problems() {
        let context = LinkContext::default();
        let before = Instant::now();
        context.error(
            RdKafkaError::Global(RDKafkaErrorCode::UnknownTopicOrPartition),
            "unknown topic",
        );
        assert!(context.error_since(before).is_none());
    }
}

//! The publisher port: how the dispatcher hands one routed message to a destination.
//!
//! One [`Publisher`] instance serves one configured destination (one HTTP endpoint, one exchange,
//! one Kafka topic template). The dispatcher holds them as `Arc<dyn Publisher>` keyed by
//! destination name, so destinations of every compiled-in kind sit side by side.

use async_trait::async_trait;
use queuebox_domain::template::address::EmptyAddress;
use std::fmt;
use thiserror::Error;

/// One message as the destination receives it: the claimed row after routing and transforms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboundMessage {
    /// The row `id` as uuid text; the receiver's deduplication identifier.
    pub id: String,
    /// The row `topic`.
    pub topic: String,
    /// The row `key`; `None` or empty means the row has none.
    pub key: Option<String>,
    /// The row `aggregate_type`, for address templates.
    pub aggregate_type: Option<String>,
    /// The payload as JSON text: exactly as stored, or as the transforms left it.
    pub payload: String,
    /// The row's `headers` column, in stored order.
    pub headers: Vec<(String, String)>,
    /// Failed deliveries before this one (0 on the first delivery).
    pub attempt: i32,
    /// The key rendered from the matched route's `routingKeyTemplate`, when the route sets one. A
    /// keyed destination (the RabbitMQ routing key, the Kafka record key) uses it as it is, even
    /// empty, instead of its own template; the others ignore it (docs/reference/transforms-and-templates.md).
    pub route_key: Option<String>,
    /// The matched route's `routingKeyMissingFieldDefault` (empty when it sets none): what a
    /// RabbitMQ destination's own `routingKeyTemplate` puts for a missing field.
    pub missing_field_default: String,
}

/// The broad cause of a failed publish, for logs and metrics. Every kind is retried the same way
/// (the row's attempt counter decides); the kind never changes the state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PublishErrorKind {
    /// The destination answered, but not with success (an HTTP status outside 2xx, a broker nack).
    Rejected,
    /// No answer within the destination's timeout.
    Timeout,
    /// No connection could be made (refused, reset, DNS failure, TLS failure).
    Unreachable,
    /// The credentials could not be obtained or were refused (an OAuth2 token endpoint failure).
    Auth,
    /// The message itself cannot be sent as it is (a header name or value the protocol forbids).
    InvalidMessage,
    /// Anything else.
    Other,
}

impl PublishErrorKind {
    /// A short, stable label.
    pub fn as_str(self) -> &'static str {
        match self {
            PublishErrorKind::Rejected => "rejected",
            PublishErrorKind::Timeout => "timeout",
            PublishErrorKind::Unreachable => "unreachable",
            PublishErrorKind::Auth => "auth",
            PublishErrorKind::InvalidMessage => "invalid_message",
            PublishErrorKind::Other => "other",
        }
    }
}

impl fmt::Display for PublishErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed publish. `reason` is safe to log and to store in `last_error` as it is.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{reason}")]
pub struct PublishError {
    /// The broad cause.
    pub kind: PublishErrorKind,
    /// Already redacted, with what the destination echoed (an answer body, a broker's reply text)
    /// cut to `http.maxErrorBodyBytes`; never holds a credential.
    pub reason: String,
}

impl PublishError {
    /// A failure of `kind` with a reason the adapter has already redacted.
    pub fn new(kind: PublishErrorKind, reason: impl Into<String>) -> Self {
        Self {
            kind,
            reason: reason.into(),
        }
    }
}

impl From<EmptyAddress> for PublishError {
    /// A broker publisher whose address renders empty for a row fails that row's publish; the
    /// reason names the destination, the address key and the template or column, never a value.
    fn from(error: EmptyAddress) -> Self {
        Self::new(PublishErrorKind::InvalidMessage, error.to_string())
    }
}

/// A destination the dispatcher can publish to.
#[async_trait]
pub trait Publisher: Send + Sync {
    /// The destination kind, as the `destination_type` metric label and the configuration `type`
    /// spell it: `http`, `rabbitmq`, `kafka` or `nats`.
    fn destination_type(&self) -> &'static str;

    /// Delivers one message and returns only when the destination has taken responsibility for it
    /// (an HTTP 2xx, a broker confirm) or the attempt has failed.
    ///
    /// The call is safe to run concurrently for different messages (up to `outbox.concurrency`);
    /// an adapter shares its connections across calls. The dispatcher may drop the future when the
    /// claim is lost or the process shuts down; an adapter MUST tolerate that.
    ///
    /// # Errors
    /// An adapter MUST return `Err` for every outcome that is not a confirmed delivery: a
    /// non-success answer, a timeout, a connection failure, a credential failure. It MUST NOT
    /// report success it cannot prove, because the row is then marked `sent` and never retried.
    /// The [`PublishError::reason`] MUST be safe to store: redacted (no password, token, secret or
    /// signature, neither configured nor echoed by the destination), with the destination's echoed
    /// text cut to the configured limit (the adapter's own words around it, such as the status
    /// line, come on top), and naming the status or cause so an operator can act on `last_error`
    /// alone.
    async fn publish(&self, message: &OutboundMessage) -> Result<(), PublishError>;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use queuebox_domain::template::address::{Address, AddressField};
    use queuebox_domain::template::row::RowFields;

    #[test]
    fn an_empty_address_is_an_invalid_message() {
        let address = Address::new("events", AddressField::Exchange, "{{ key }}", None).unwrap();
        let row = RowFields::new("t", None, None, "{}");
        let error = PublishError::from(address.render(&row).unwrap_err());
        assert_eq!(error.kind, PublishErrorKind::InvalidMessage);
        assert_eq!(
            error.reason,
            "the exchange of destination events is empty for this row (template `{{ key }}`)"
        );
    }
}

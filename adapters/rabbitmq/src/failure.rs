//! Turning a lapin failure into a [`PublishError`] whose kind an operator can act on and whose
//! reason is safe to store.

use lapin::ErrorKind;
use lapin::protocol::{AMQPErrorKind, AMQPHardError, AMQPSoftError};
use queuebox_domain::redact::Redactor;
use queuebox_ports::publish::{PublishError, PublishErrorKind};

/// The kind of a lapin failure.
///
/// - The broker refusing the login, the vhost or a permission (`ACCESS_REFUSED`, `NOT_ALLOWED`)
///   is [`PublishErrorKind::Auth`].
/// - Any other channel-level (soft) AMQP error is the broker's answer to this message or its
///   exchange (`NOT_FOUND`, `PRECONDITION_FAILED`, ...): [`PublishErrorKind::Rejected`].
/// - A connection-level (hard) AMQP error, an I/O failure, a missed heartbeat and a connection
///   or channel that is no longer open all mean the link to the broker is gone:
///   [`PublishErrorKind::Unreachable`]. The next publish opens a new one.
/// - A frame the client cannot parse or write is [`PublishErrorKind::Other`].
pub(crate) fn kind_of(error: &lapin::Error) -> PublishErrorKind {
    match error.kind() {
        ErrorKind::ProtocolError(amqp) => match amqp.kind() {
            AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED)
            | AMQPErrorKind::Hard(AMQPHardError::NOTALLOWED) => PublishErrorKind::Auth,
            AMQPErrorKind::Soft(_) => PublishErrorKind::Rejected,
            AMQPErrorKind::Hard(_) => PublishErrorKind::Unreachable,
        },
        ErrorKind::AuthProviderError(_) => PublishErrorKind::Auth,
        ErrorKind::IOError(_)
        | ErrorKind::RuntimeShutdownError(_)
        | ErrorKind::MissingHeartbeatError
        | ErrorKind::InvalidConnectionState(_)
        | ErrorKind::InvalidChannelState(..)
        | ErrorKind::InvalidChannel(_) => PublishErrorKind::Unreachable,
        _ => PublishErrorKind::Other,
    }
}

/// True when the failure leaves the channel unusable, so the next publish must open a new one.
pub(crate) fn breaks_channel(error: &lapin::Error) -> bool {
    !matches!(
        error.kind(),
        ErrorKind::ParsingError(_) | ErrorKind::SerialisationError(_) | ErrorKind::FutureCompleted
    )
}

/// A failure of `what` (for example "publishing to exchange `orders`") caused by `error`.
pub(crate) fn from_lapin(what: &str, error: &lapin::Error, redactor: &Redactor) -> PublishError {
    PublishError::new(kind_of(error), redactor.redact(&format!("{what}: {error}")))
}

/// A failure of `kind` with a reason that is masked and cut.
pub(crate) fn failure(kind: PublishErrorKind, reason: &str, redactor: &Redactor) -> PublishError {
    PublishError::new(kind, redactor.redact(reason))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::protocol::AMQPError;
    use std::io;

    fn protocol(kind: AMQPErrorKind, text: &str) -> lapin::Error {
        ErrorKind::ProtocolError(AMQPError::new(kind, text.into())).into()
    }

    #[test]
    fn kinds_follow_the_cause() {
        let cases = [
            (
                protocol(
                    AMQPSoftError::ACCESSREFUSED.into(),
                    "ACCESS_REFUSED - Login was refused",
                ),
                PublishErrorKind::Auth,
            ),
            (
                protocol(AMQPHardError::NOTALLOWED.into(), "NOT_ALLOWED - vhost"),
                PublishErrorKind::Auth,
            ),
            (
                protocol(AMQPSoftError::NOTFOUND.into(), "NOT_FOUND - no exchange"),
                PublishErrorKind::Rejected,
            ),
            (
                protocol(
                    AMQPHardError::CONNECTIONFORCED.into(),
                    "CONNECTION_FORCED - closed via management plugin",
                ),
                PublishErrorKind::Unreachable,
            ),
            (
                lapin::Error::from(io::Error::from(io::ErrorKind::ConnectionRefused)),
                PublishErrorKind::Unreachable,
            ),
            (
                ErrorKind::MissingHeartbeatError.into(),
                PublishErrorKind::Unreachable,
            ),
            (ErrorKind::FutureCompleted.into(), PublishErrorKind::Other),
        ];
        for (error, expected) in cases {
            assert_eq!(kind_of(&error), expected, "{error}");
        }
    }

    #[test]
    fn reasons_are_masked() {
        let redactor = Redactor::new(200).with_secret("s3cr3t-pw");
        let error = lapin::Error::from(io::Error::other("peer said s3cr3t-pw"));
        let failure = from_lapin("connecting", &error, &redactor);
        assert!(!failure.reason.contains("s3cr3t-pw"), "{}", failure.reason);
        assert!(
            failure.reason.starts_with("connecting: "),
            "{}",
            failure.reason
        );
    }
}

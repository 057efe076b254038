//! The errors of building a NATS publisher or source. They stop the start, so they name the
//! destination or source and the key at fault; they never print `servers`, which may carry a
//! password, nor a password or token.

use queuebox_domain::template::address::AddressTemplateError;
use thiserror::Error;

/// Why a NATS publisher or source cannot be built.
#[derive(Debug, Error)]
pub enum NatsError {
    /// `servers` holds no usable server URL.
    #[error("{owner}: servers is not a usable list of NATS server URLs: {reason}")]
    InvalidServers {
        /// `destinations.<name>` or `sources.<name>`.
        owner: String,
        /// What is wrong, with every secret masked.
        reason: String,
    },
    /// `subject` is a malformed template or reads a name that is not a row field.
    #[error(transparent)]
    InvalidSubject(#[from] AddressTemplateError),
    /// Another setting is unusable (a static header, a timeout, an empty stream name).
    #[error("{owner}: {what}")]
    InvalidSetting {
        /// `destinations.<name>` or `sources.<name>`.
        owner: String,
        /// What is wrong (never a secret value).
        what: String,
    },
}

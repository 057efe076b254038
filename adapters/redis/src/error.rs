//! The errors of building a Redis publisher or source. They stop the start, so they name the
//! destination or source and the key at fault; they never print `url`, which may carry a password.

use queuebox_domain::template::address::AddressTemplateError;
use thiserror::Error;

/// Why a Redis publisher or source cannot be built.
#[derive(Debug, Error)]
pub enum RedisError {
    /// `url` is not a usable Redis URL.
    #[error("{owner}: url is not a usable Redis URL: {reason}")]
    InvalidUrl {
        /// `destinations.<name>` or `sources.<name>`.
        owner: String,
        /// What is wrong, with every secret masked.
        reason: String,
    },
    /// `stream` is a malformed template or reads a name that is not a row field.
    #[error(transparent)]
    InvalidStream(#[from] AddressTemplateError),
    /// Another setting is unusable (a timeout, a zero batch size, an empty group name).
    #[error("{owner}: {what}")]
    InvalidSetting {
        /// `destinations.<name>` or `sources.<name>`.
        owner: String,
        /// What is wrong (never a secret value).
        what: String,
    },
}

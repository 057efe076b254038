//! The errors of building a RabbitMQ publisher or source. They stop the start, so they name the
//! destination or source and the key at fault; they never print the URL, which carries the
//! password.

use queuebox_domain::template::TemplateError;
use queuebox_domain::template::address::AddressTemplateError;
use thiserror::Error;

/// Why a RabbitMQ publisher or source cannot be built.
#[derive(Debug, Error)]
pub enum RabbitmqError {
    /// `url` is not an AMQP URI.
    #[error("destination `{destination}`: url is not a usable AMQP URI: {reason}")]
    InvalidUrl {
        /// The destination name.
        destination: String,
        /// What is wrong, with the URL and its password masked.
        reason: String,
    },
    /// `exchange` is a malformed template or reads a name that is not a row field.
    #[error(transparent)]
    InvalidExchange(#[from] AddressTemplateError),
    /// `routingKeyTemplate` is malformed.
    #[error("destination `{destination}`: routingKeyTemplate is malformed: {source}")]
    InvalidRoutingKeyTemplate {
        /// The destination name.
        destination: String,
        /// The parse failure.
        source: TemplateError,
    },
    /// Another setting is unusable (a static header, the timeout).
    #[error("destination `{destination}`: {what}")]
    InvalidSetting {
        /// The destination name.
        destination: String,
        /// What is wrong (never a secret value).
        what: String,
    },
    /// A source's `connectionUrl` is not an AMQP URI.
    #[error("source `{name}`: connectionUrl is not a usable AMQP URI: {reason}")]
    InvalidSourceUrl {
        /// The source name.
        name: String,
        /// What is wrong, with the URL and its password masked.
        reason: String,
    },
    /// Another setting of a source is unusable (an empty queue name, a prefetch of 0).
    #[error("source `{name}`: {what}")]
    InvalidSourceSetting {
        /// The source name.
        name: String,
        /// What is wrong (never a secret value).
        what: String,
    },
}

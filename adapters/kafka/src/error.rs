//! The errors of building a Kafka publisher or source. They stop the start, so they name the
//! destination or source and the key at fault; they never print the SASL password.

use queuebox_domain::template::TemplateError;
use queuebox_domain::template::address::AddressTemplateError;
use thiserror::Error;

/// Why a Kafka publisher or source cannot be built.
#[derive(Debug, Error)]
pub enum KafkaError {
    /// `topic` is a malformed template or reads a name that is not a row field.
    #[error(transparent)]
    InvalidTopic(#[from] AddressTemplateError),
    /// `keyTemplate` is malformed.
    #[error("destination `{destination}`: keyTemplate is malformed: {source}")]
    InvalidKeyTemplate {
        /// The destination name.
        destination: String,
        /// The parse failure.
        source: TemplateError,
    },
    /// Another setting is unusable; `owner` is `destination \`x\`` or `source \`x\``.
    #[error("{owner}: {what}")]
    InvalidSetting {
        /// Which entry: "destination `x`" or "source `x`".
        owner: String,
        /// What is wrong (never a secret value).
        what: String,
    },
    /// librdkafka refused the client settings built from the configuration.
    #[error("{owner}: the Kafka client cannot be created: {reason}")]
    Client {
        /// Which entry: "destination `x`" or "source `x`".
        owner: String,
        /// librdkafka's words, with the password masked.
        reason: String,
    },
}

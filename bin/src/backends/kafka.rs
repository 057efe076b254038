//! Kafka (`queuebox-kafka`, behind the `kafka` feature): the publisher of `kafka` destinations and
//! the consumer of `kafka` sources.

use anyhow::Context as _;
use queuebox_config::{
    AutoOffsetReset as ConfiguredOffsetReset, Destination, KafkaDestination, KafkaSecurity,
    KafkaSource as KafkaSourceConfig, SecurityProtocol as ConfiguredProtocol, Settings,
};
use queuebox_kafka::{
    AutoOffsetReset, KafkaConnection, KafkaPublisher, KafkaPublisherOptions, KafkaSource,
    KafkaSourceOptions, SecurityProtocol,
};
use queuebox_ports::publish::Publisher;
use std::sync::Arc;

/// The adapter's connection settings from the configuration's.
fn connection(bootstrap_servers: &str, security: &KafkaSecurity) -> KafkaConnection {
    KafkaConnection {
        bootstrap_servers: bootstrap_servers.to_owned(),
        security_protocol: match security.security_protocol {
            ConfiguredProtocol::Plaintext => SecurityProtocol::Plaintext,
            ConfiguredProtocol::Ssl => SecurityProtocol::Ssl,
            ConfiguredProtocol::SaslPlaintext => SecurityProtocol::SaslPlaintext,
            ConfiguredProtocol::SaslSsl => SecurityProtocol::SaslSsl,
        },
        sasl_mechanism: security.sasl_mechanism.clone(),
        sasl_username: security.sasl_username.clone(),
        sasl_password: security.sasl_password.clone(),
        client_id: None,
    }
}

/// The publisher of destination `name`: an idempotent producer that connects in the background
/// (a broker that is down at start only delays delivery; the rows wait under the retry rules).
///
/// # Errors
/// A broker list, an address template, the key template, the timeout or a security key is
/// refused.
pub async fn publisher(
    settings: &Settings,
    name: &str,
    destination: &Destination,
    kafka: &KafkaDestination,
) -> anyhow::Result<Arc<dyn Publisher>> {
    let mut options = KafkaPublisherOptions::new(name, "", kafka.topic.clone());
    options.connection = connection(&kafka.bootstrap_servers, &kafka.security);
    options.topic_from = kafka.topic_from;
    options.key_template = kafka.key_template.clone();
    options.timeout = kafka.timeout;
    options.linger = kafka.linger;
    options.headers = destination
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    options.max_reason_bytes = settings.http.max_error_body_bytes;
    let publisher = KafkaPublisher::new(options).with_context(|| format!("destinations.{name}"))?;
    Ok(Arc::new(publisher))
}

/// The client of source `name`, run by the source driver: a consumer of its topics in its group
/// that hands each record to the ingest pipeline and stores the offsets once the rows committed. It
/// connects when the workers start; brokers that are down or a topic that is missing show in its
/// health component `kafka.<name>`.
///
/// # Errors
/// A broker list, a topic name, the group id or a security key is refused.
pub fn client(name: &str, kafka: &KafkaSourceConfig) -> anyhow::Result<KafkaSource> {
    let mut options =
        KafkaSourceOptions::new(name, "", kafka.topics.clone(), kafka.group_id.clone());
    options.connection = connection(&kafka.bootstrap_servers, &kafka.security);
    options.auto_offset_reset = match kafka.auto_offset_reset {
        ConfiguredOffsetReset::Earliest => AutoOffsetReset::Earliest,
        ConfiguredOffsetReset::Latest => AutoOffsetReset::Latest,
    };
    options.max_poll_records = kafka.max_poll_records;
    KafkaSource::new(options).with_context(|| format!("sources.{name}"))
}

//! RabbitMQ (`queuebox-rabbitmq`, behind the `rabbitmq` feature): the publisher of `rabbitmq`
//! destinations and the consumer of `rabbitmq` sources.

use anyhow::Context as _;
use queuebox_config::{
    DeliveryMode as ConfiguredDeliveryMode, Destination, ExchangeType as ConfiguredExchangeType,
    RabbitmqDestination, RabbitmqSource as RabbitmqSourceConfig, Settings,
};
use queuebox_domain::secret::Secret;
use queuebox_ports::publish::Publisher;
use queuebox_rabbitmq::{
    DeliveryMode, ExchangeType, RabbitmqPublisher, RabbitmqPublisherOptions, RabbitmqSource,
    RabbitmqSourceOptions,
};
use std::sync::Arc;

/// The publisher of destination `name`. It connects on its first publish (a broker that is down
/// at start only delays delivery; the rows wait under the retry rules).
///
/// # Errors
/// The URL, an address template or a static header is refused.
pub async fn publisher(
    settings: &Settings,
    name: &str,
    destination: &Destination,
    rabbitmq: &RabbitmqDestination,
) -> anyhow::Result<Arc<dyn Publisher>> {
    let mut options = RabbitmqPublisherOptions::new(
        name,
        Secret::new(rabbitmq.url.expose().to_owned()),
        rabbitmq.exchange.clone(),
    );
    options.exchange_from = rabbitmq.exchange_from;
    options.exchange_type = match rabbitmq.exchange_type {
        ConfiguredExchangeType::Topic => ExchangeType::Topic,
        ConfiguredExchangeType::Direct => ExchangeType::Direct,
        ConfiguredExchangeType::Fanout => ExchangeType::Fanout,
    };
    options.routing_key_template = rabbitmq.routing_key_template.clone();
    options.delivery_mode = match rabbitmq.delivery_mode {
        ConfiguredDeliveryMode::Persistent => DeliveryMode::Persistent,
        ConfiguredDeliveryMode::Transient => DeliveryMode::Transient,
    };
    options.headers = destination
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    options.max_reason_bytes = settings.http.max_error_body_bytes;
    options.connection_name = Some(format!("queuebox destination {name}"));
    let publisher =
        RabbitmqPublisher::new(options).with_context(|| format!("destinations.{name}"))?;
    Ok(Arc::new(publisher))
}

/// The client of source `name`, run by the source driver: a consumer of its queue that hands each
/// message to the ingest pipeline and acknowledges it once the pipeline answered (the row
/// committed). It connects when the workers start; a broker that is down, or a queue that is
/// missing, shows in its health component `rabbitmq.<name>` until it is fixed.
///
/// # Errors
/// The URL or a setting is refused.
pub fn client(name: &str, rabbitmq: &RabbitmqSourceConfig) -> anyhow::Result<RabbitmqSource> {
    let mut options = RabbitmqSourceOptions::new(
        name,
        Secret::new(rabbitmq.connection_url.expose().to_owned()),
        rabbitmq.queue_name.clone(),
    );
    options.prefetch_count = rabbitmq.prefetch_count;
    options.declare_queue = rabbitmq.declare_queue;
    options.connection_name = Some(format!("queuebox source {name}"));
    RabbitmqSource::new(options).with_context(|| format!("sources.{name}"))
}

//! NATS JetStream (`queuebox-nats`, behind the `nats` feature): the publisher of `nats`
//! destinations and the consumer of `nats` sources.

use anyhow::Context as _;
use queuebox_config::{
    Destination, NatsCredentials as ConfiguredCredentials, NatsDestination,
    NatsSource as NatsSourceConfig, Settings,
};
use queuebox_domain::secret::Secret;
use queuebox_nats::{
    NatsCredentials, NatsPublisher, NatsPublisherOptions, NatsSource, NatsSourceOptions,
};
use queuebox_ports::publish::Publisher;
use std::sync::Arc;

fn credentials(configured: &ConfiguredCredentials) -> NatsCredentials {
    NatsCredentials {
        username: configured.username.clone(),
        password: configured.password.clone(),
        token: configured.token.clone(),
    }
}

/// The publisher of destination `name`. It connects on its first publish (a server that is down
/// at start only delays delivery; the rows wait under the retry rules).
///
/// # Errors
/// `servers`, the subject template or a static header is refused.
pub async fn publisher(
    settings: &Settings,
    name: &str,
    destination: &Destination,
    nats: &NatsDestination,
) -> anyhow::Result<Arc<dyn Publisher>> {
    let mut options = NatsPublisherOptions::new(
        name,
        Secret::new(nats.servers.expose().to_owned()),
        nats.subject.clone(),
    );
    options.credentials = credentials(&nats.credentials);
    options.subject_from = nats.subject_from;
    options.jet_stream = nats.jet_stream;
    options.timeout = nats.timeout;
    options.headers = destination
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    options.max_reason_bytes = settings.http.max_error_body_bytes;
    if !nats.jet_stream {
        tracing::warn!(
            destination = %name,
            "jetStream: false publishes on core NATS: a row is marked sent without proof that anything received it"
        );
    }
    let publisher = NatsPublisher::new(options).with_context(|| format!("destinations.{name}"))?;
    Ok(Arc::new(publisher))
}

/// The client of source `name`, run by the source driver: a durable pull consumer of its stream
/// that hands each message to the ingest pipeline and acknowledges it once the pipeline answered
/// (the row committed). It connects when the workers start; a server that is down or a stream that
/// is missing shows in its health component `nats.<name>` until it is fixed.
///
/// # Errors
/// `servers` or a setting is refused.
pub fn client(name: &str, nats: &NatsSourceConfig) -> anyhow::Result<NatsSource> {
    let mut options = NatsSourceOptions::new(
        name,
        Secret::new(nats.servers.expose().to_owned()),
        nats.stream.clone(),
        nats.durable.clone(),
    );
    options.credentials = credentials(&nats.credentials);
    options.filter_subject = nats.filter_subject.clone();
    options.ack_wait = nats.ack_wait;
    options.batch_size = nats.batch_size;
    NatsSource::new(options).with_context(|| format!("sources.{name}"))
}

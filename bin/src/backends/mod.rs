//! The backends of this build: one wiring module per kind of database, destination and source, and
//! the registry below that hands each configured entry to the module of its kind. Every match on a
//! kind is exhaustive, so a kind the configuration learns cannot slip past one of them.
//!
//! # Adding a backend
//!
//! A backend's wiring lives in one file, `<kind>.rs` beside this one, declared below behind its
//! cargo feature (`#[cfg(feature = "rabbitmq")] mod rabbitmq;`). It turns the typed
//! configuration of its kind into the adapter's objects:
//!
//! - a destination kind: `pub async fn publisher(settings: &Settings, name: &str, destination:
//!   &Destination, config: &<Kind>Destination) -> anyhow::Result<Arc<dyn Publisher>>`;
//! - a source kind: `pub async fn source(context: &SourceContext<'_>, name: &str, config:
//!   &<Kind>Source) -> anyhow::Result<StartedSource>`, a broker source returning
//!   [`StartedSource::Consumer`] (its consume loop and its health component); the ingest pipeline
//!   in the context applies everything the `sources.<name>` block says beyond the kind's keys;
//! - a database kind: `pub async fn connect(options: &DatabaseOptions) -> anyhow::Result<Arc<dyn
//!   DatabaseBackend>>`, called from the match in `crate::database::connect`.
//!
//! Registering it is one arm per match below ([`publisher`], [`start_source`]), beside the arm a
//! build without the feature takes, for example
//!
//! ```text
//! #[cfg(feature = "rabbitmq")]
//! DestinationKind::Rabbitmq(config) => {
//!     rabbitmq::publisher(settings, name, destination, config).await
//! }
//! #[cfg(not(feature = "rabbitmq"))]
//! DestinationKind::Rabbitmq(_) => anyhow::bail!(Feature::Rabbitmq.missing(&format!(
//!     "destinations.{name} is a rabbitmq destination"
//! ))),
//! ```
//!
//! The start check ([`check`]) already refuses a kind whose feature is missing, so the second arm
//! is a last guard.

mod features;
pub mod http;
#[cfg(feature = "kafka")]
pub mod kafka;
#[cfg(feature = "nats")]
pub mod nats;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "rabbitmq")]
pub mod rabbitmq;
#[cfg(feature = "redis")]
pub mod redis;
mod source;
pub(crate) mod unwired;

pub use features::{Feature, check};
pub use source::{SourceConsumer, SourceContext, StartedSource, StartedSources};

use queuebox_config::{Destination, DestinationKind, Settings, Source, SourceKind};
use queuebox_ports::ingest::Ingest;
use queuebox_ports::publish::Publisher;
use std::sync::Arc;

/// The publisher of destination `name`, built by the wiring module of its kind.
///
/// # Errors
/// The wiring module refuses the destination (a bad URL, a client that cannot be built).
pub async fn publisher(
    settings: &Settings,
    name: &str,
    destination: &Destination,
) -> anyhow::Result<Arc<dyn Publisher>> {
    match &destination.kind {
        DestinationKind::Http(config) => http::publisher(settings, name, destination, config).await,
        #[cfg(feature = "rabbitmq")]
        DestinationKind::Rabbitmq(config) => {
            rabbitmq::publisher(settings, name, destination, config).await
        }
        #[cfg(not(feature = "rabbitmq"))]
        DestinationKind::Rabbitmq(_) => anyhow::bail!(
            Feature::Rabbitmq.missing(&format!("destinations.{name} is a rabbitmq destination"))
        ),
        #[cfg(feature = "nats")]
        DestinationKind::Nats(config) => nats::publisher(settings, name, destination, config).await,
        #[cfg(not(feature = "nats"))]
        DestinationKind::Nats(_) => anyhow::bail!(
            Feature::Nats.missing(&format!("destinations.{name} is a nats destination"))
        ),
        #[cfg(feature = "kafka")]
        DestinationKind::Kafka(config) => {
            kafka::publisher(settings, name, destination, config).await
        }
        #[cfg(not(feature = "kafka"))]
        DestinationKind::Kafka(_) => anyhow::bail!(
            Feature::Kafka.missing(&format!("destinations.{name} is a kafka destination"))
        ),
        #[cfg(feature = "redis")]
        DestinationKind::Redis(config) => {
            redis::publisher(settings, name, destination, config).await
        }
        #[cfg(not(feature = "redis"))]
        DestinationKind::Redis(_) => anyhow::bail!(
            Feature::Redis.missing(&format!("destinations.{name} is a redis destination"))
        ),
    }
}

/// Starts source `name` with the wiring module of its kind.
///
/// # Errors
/// The wiring module cannot start the source.
pub async fn start_source(
    context: &SourceContext<'_>,
    name: &str,
    source: &Source,
) -> anyhow::Result<StartedSource> {
    match &source.kind {
        SourceKind::Http(config) => Ok(http::source(context.settings, name, config)),
        #[cfg(feature = "rabbitmq")]
        SourceKind::Rabbitmq(config) => rabbitmq::source(context, name, config),
        #[cfg(not(feature = "rabbitmq"))]
        SourceKind::Rabbitmq(_) => anyhow::bail!(
            Feature::Rabbitmq.missing(&format!("sources.{name} is a rabbitmq source"))
        ),
        #[cfg(feature = "nats")]
        SourceKind::Nats(config) => nats::source(context, name, config),
        #[cfg(not(feature = "nats"))]
        SourceKind::Nats(_) => {
            anyhow::bail!(Feature::Nats.missing(&format!("sources.{name} is a nats source")))
        }
        #[cfg(feature = "kafka")]
        SourceKind::Kafka(config) => kafka::source(context, name, config),
        #[cfg(not(feature = "kafka"))]
        SourceKind::Kafka(_) => {
            anyhow::bail!(Feature::Kafka.missing(&format!("sources.{name} is a kafka source")))
        }
        #[cfg(feature = "redis")]
        SourceKind::Redis(config) => redis::source(context, name, config),
        #[cfg(not(feature = "redis"))]
        SourceKind::Redis(_) => {
            anyhow::bail!(Feature::Redis.missing(&format!("sources.{name} is a redis source")))
        }
    }
}

/// Starts every configured source, in configuration order.
///
/// # Errors
/// A source cannot be started, or two HTTP sources answer at the same path.
pub async fn start_sources(
    settings: &Settings,
    ingest: &Arc<dyn Ingest>,
) -> anyhow::Result<StartedSources> {
    let context = SourceContext { settings, ingest };
    let mut started = StartedSources::default();
    for (name, source) in &settings.sources {
        started.add(name, start_source(&context, name, source).await?);
    }
    http::check_paths(&started.routes)?;
    for route in &started.routes {
        tracing::info!(source = %route.source, path = %route.path, "inbox source served");
    }
    Ok(started)
}

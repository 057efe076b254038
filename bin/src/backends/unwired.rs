//! What this build does with a kind that loads and validates but has no wiring module yet (today
//! the RabbitMQ, Kafka and NATS destinations and sources, and SQL Server), in one place. A build
//! with the kind's feature but without its adapter behaves like this until the adapter lands.

use super::source::StartedSource;
use queuebox_ports::database::DatabaseKind;
use queuebox_ports::publish::Publisher;
use std::sync::Arc;

/// No publisher for destination `name`. The destination is still kept in the route table, so the
/// routes to it resolve and its rows go dead at once with a reason instead of waiting forever.
pub(super) fn publisher(name: &str, kind: &'static str) -> Option<Arc<dyn Publisher>> {
    tracing::warn!(
        destination = %name,
        kind,
        "no publisher for this destination kind yet: rows routed to it go dead"
    );
    None
}

/// Source `name` is not started; nothing consumes it.
pub(super) fn source(name: &str, kind: &'static str) -> StartedSource {
    tracing::warn!(
        source = %name,
        kind,
        "broker inbox sources are not served by this version yet: the source is validated but not started"
    );
    StartedSource::NotServed
}

/// The start stops: there is no store to run on.
pub(crate) fn database(kind: DatabaseKind) -> anyhow::Error {
    anyhow::anyhow!(
        "database.type is {}, and {} support is not implemented yet in this version",
        kind.as_str(),
        kind.product()
    )
}

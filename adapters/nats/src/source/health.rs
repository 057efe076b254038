//! The health component of a NATS source: `nats.<source name>` (a shared component of the ports).

use queuebox_ports::health::SharedComponent;

/// The health component `nats.<source name>` of one NATS source.
///
/// Up while the source consumes its stream; down, with a reason, before the first consumer is
/// set up, while the source is disconnected or reconnecting, while its stream is missing (the
/// reason names the stream), and after it stopped. The reason never holds a server URL or a
/// password. A check reads the last known state and answers at once.
///
/// Clones share the state; get one from [`NatsSource::health`](crate::NatsSource::health).
pub type NatsSourceHealth = SharedComponent;

/// The component of source `source`, down until the source marks it up.
pub(crate) fn component(source: &str) -> NatsSourceHealth {
    SharedComponent::down_until_up(format!("nats.{source}"), "not consuming yet")
}

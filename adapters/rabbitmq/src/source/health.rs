//! The health component of a RabbitMQ source: `rabbitmq.<source name>` (a shared component of the ports).

use queuebox_ports::health::SharedComponent;

/// The health component `rabbitmq.<source name>` of one RabbitMQ source.
///
/// Up while the source consumes its queue; down, with a reason, before the first consumer is
/// set up, while the source is disconnected or reconnecting, while its queue is missing (the
/// reason names the queue), and after it stopped. The reason never holds the URL or a
/// password. A check reads the last known state and answers at once.
///
/// Clones share the state; get one from [`RabbitmqSource::health`](crate::RabbitmqSource::health).
pub type RabbitmqSourceHealth = SharedComponent;

/// The component of source `source`, down until the source marks it up.
pub(crate) fn component(source: &str) -> RabbitmqSourceHealth {
    SharedComponent::down_until_up(format!("rabbitmq.{source}"), "not consuming yet")
}

//! The health component of a Kafka source: `kafka.<source name>` (a shared component of the ports).

use queuebox_ports::health::SharedComponent;

/// The health component `kafka.<source name>` of one Kafka source.
///
/// Up while the brokers answer and every topic of the source exists (a replica that the group
/// gave no partition is up too); down, with a reason, before the first check, while no broker
/// answers or the login is refused, while a topic is missing (the reason names it), and after the
/// source stopped. The reason never holds a password. A check reads the last known state and
/// answers at once.
///
/// Clones share the state; get one from [`KafkaSource::health`](crate::KafkaSource::health).
pub type KafkaSourceHealth = SharedComponent;

/// The component of source `source`, down until the source marks it up.
pub(crate) fn component(source: &str) -> KafkaSourceHealth {
    SharedComponent::down_until_up(format!("kafka.{source}"), "not checked yet")
}

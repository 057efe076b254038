//! Which template sets the key of a message: the matched route's `routingKeyTemplate` when it has
//! one, otherwise the destination's own template; HTTP and NATS messages carry no key at all.
//!
//! The missing-field default always comes from the matched route (empty when the route sets
//! none), also when the RabbitMQ destination's template renders the key. The Kafka destination
//! `keyTemplate` takes no default: a key it cannot fill stays empty, and an empty key means a
//! record without a key. A key from a route template is used as it renders, even empty.

use super::routing_key::{KafkaKeyTemplate, RoutingKeyTemplate};
use super::row::RowFields;

/// The kinds of destination, as the configuration `type` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DestinationType {
    Http,
    Rabbitmq,
    Kafka,
    Nats,
}

/// The template that sets the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// The matched route's `routingKeyTemplate`.
    RouteTemplate,
    /// The RabbitMQ destination's `routingKeyTemplate`.
    DestinationRoutingKeyTemplate,
    /// The Kafka destination's `keyTemplate`.
    DestinationKeyTemplate,
    /// The destination has no key (HTTP, NATS).
    NotUsed,
}

/// Which template sets the key for a destination of type `destination`, given whether the matched
/// route sets a `routingKeyTemplate`.
pub fn key_source(destination: DestinationType, route_sets_template: bool) -> KeySource {
    match (destination, route_sets_template) {
        (DestinationType::Http | DestinationType::Nats, _) => KeySource::NotUsed,
        (DestinationType::Rabbitmq | DestinationType::Kafka, true) => KeySource::RouteTemplate,
        (DestinationType::Rabbitmq, false) => KeySource::DestinationRoutingKeyTemplate,
        (DestinationType::Kafka, false) => KeySource::DestinationKeyTemplate,
    }
}

/// A destination with the key template it owns.
#[derive(Debug, Clone, Copy)]
pub enum KeyedDestination<'a> {
    Http,
    Nats,
    Rabbitmq(&'a RoutingKeyTemplate),
    Kafka(&'a KafkaKeyTemplate),
}

impl KeyedDestination<'_> {
    /// The destination type.
    pub fn destination_type(&self) -> DestinationType {
        match self {
            KeyedDestination::Http => DestinationType::Http,
            KeyedDestination::Nats => DestinationType::Nats,
            KeyedDestination::Rabbitmq(_) => DestinationType::Rabbitmq,
            KeyedDestination::Kafka(_) => DestinationType::Kafka,
        }
    }
}

/// The key settings of the matched route.
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteKey<'a> {
    /// `routingKeyTemplate`, when the route sets one.
    pub template: Option<&'a RoutingKeyTemplate>,
    /// `routingKeyMissingFieldDefault` (empty when unset).
    pub missing_default: &'a str,
}

/// The RabbitMQ routing key or Kafka record key of `row`; `None` for a destination without keys
/// and for a Kafka record without a key.
pub fn message_key(
    destination: KeyedDestination<'_>,
    route: RouteKey<'_>,
    row: &RowFields<'_>,
) -> Option<String> {
    match key_source(destination.destination_type(), route.template.is_some()) {
        KeySource::NotUsed => None,
        KeySource::RouteTemplate => route
            .template
            .map(|template| template.render(row, route.missing_default)),
        KeySource::DestinationRoutingKeyTemplate => match destination {
            KeyedDestination::Rabbitmq(template) => {
                Some(template.render(row, route.missing_default))
            }
            _ => None,
        },
        KeySource::DestinationKeyTemplate => match destination {
            KeyedDestination::Kafka(template) => template.render(row),
            _ => None,
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_key_source_table() {
        use DestinationType::*;
        use KeySource::*;
        let table = [
            (Rabbitmq, true, RouteTemplate),
            (Rabbitmq, false, DestinationRoutingKeyTemplate),
            (Kafka, true, RouteTemplate),
            (Kafka, false, DestinationKeyTemplate),
            (Http, true, NotUsed),
            (Http, false, NotUsed),
            (Nats, true, NotUsed),
            (Nats, false, NotUsed),
        ];
        for (destination, route_sets, expected) in table {
            assert_eq!(
                key_source(destination, route_sets),
                expected,
                "{destination:?}, route sets a template: {route_sets}"
            );
        }
    }

    #[test]
    fn message_keys_follow_the_table() {
        let route_template = RoutingKeyTemplate::parse("{{ payload.region }}.{{ topic }}").unwrap();
        let rabbit_template = RoutingKeyTemplate::parse("rk.{{ aggregateType }}").unwrap();
        let kafka_template = KafkaKeyTemplate::parse("{{ key }}").unwrap();
        let with_route = RouteKey {
            template: Some(&route_template),
            missing_default: "none",
        };
        let without_route = RouteKey {
            template: None,
            missing_default: "none",
        };
        let row = RowFields::new("orders", None, None, r#"{"region":"eu"}"#);
        let rabbit = KeyedDestination::Rabbitmq(&rabbit_template);
        let kafka = KeyedDestination::Kafka(&kafka_template);
        let cases = [
            (rabbit, with_route, Some("eu.orders")),
            // The route's default fills the destination template's missing aggregate type.
            (rabbit, without_route, Some("rk.none")),
            (kafka, with_route, Some("eu.orders")),
            // No key on the row: the record goes without a key, the route default unused.
            (kafka, without_route, None),
            (KeyedDestination::Http, with_route, None),
            (KeyedDestination::Nats, with_route, None),
        ];
        for (destination, route, expected) in cases {
            assert_eq!(
                message_key(destination, route, &row).as_deref(),
                expected,
                "{destination:?} {route:?}"
            );
        }
        // A route template that renders empty still sets the (empty) Kafka key.
        let empty_template = RoutingKeyTemplate::parse("{{ payload.none }}").unwrap();
        let empty_route = RouteKey {
            template: Some(&empty_template),
            missing_default: "",
        };
        assert_eq!(message_key(kafka, empty_route, &row).as_deref(), Some(""));
        let keyed = RowFields::new("orders", Some("o-1"), None, "{}");
        assert_eq!(
            message_key(kafka, RouteKey::default(), &keyed).as_deref(),
            Some("o-1")
        );
    }
}

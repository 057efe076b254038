//! The template renderer: `template NUL topic NUL key NUL aggregate type NUL payload`.
//!
//! Holds: parsing and rendering never panic, as an address (exchange, topic, subject), a routing
//! key, a Kafka key and a source topic template; an address that renders is never empty; a Kafka
//! key is never `Some("")`.

use crate::split::{parts, text};
use queuebox_domain::template::Template;
use queuebox_domain::template::address::{Address, AddressField};
use queuebox_domain::template::routing_key::{KafkaKeyTemplate, RoutingKeyTemplate};
use queuebox_domain::template::row::RowFields;

/// The target body.
pub fn template(data: &[u8]) {
    let [template, topic, key, aggregate, payload] = parts::<5>(data);
    let (template, topic, key, aggregate, payload) = (
        text(template),
        text(topic),
        text(key),
        text(aggregate),
        text(payload),
    );
    let row = RowFields::new(
        &topic,
        (!key.is_empty()).then_some(key.as_str()),
        (!aggregate.is_empty()).then_some(aggregate.as_str()),
        &payload,
    );
    for field in [
        AddressField::Exchange,
        AddressField::Topic,
        AddressField::Subject,
    ] {
        if let Ok(address) = Address::new("fuzz", field, &template, None)
            && let Ok(rendered) = address.render(&row)
        {
            assert!(!rendered.is_empty(), "an address rendered empty");
        }
    }
    if let Ok(routing) = RoutingKeyTemplate::parse(&template) {
        let _ = routing.render(&row, "missing");
    }
    if let Ok(kafka) = KafkaKeyTemplate::parse(&template) {
        assert_ne!(
            kafka.render(&row).as_deref(),
            Some(""),
            "an empty Kafka key"
        );
    }
    if let Ok(parsed) = Template::parse(&template) {
        let _ = parsed.placeholders().count();
        let _ = parsed.render(|name| (name == "source").then(|| "fuzz".to_owned()));
    }
}

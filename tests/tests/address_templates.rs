//! Broker address and routing key templates as the real binary checks them at start.

use queuebox_tests::process::Launch;
use std::time::Duration;

const DATABASE: &str = "database:\n  url: jdbc:postgresql://127.0.0.1:5432/queuebox\n  username: queuebox\n  password: x\n";

const DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn an_unknown_address_placeholder_stops_the_start_naming_the_field_and_the_destination() {
    let yaml = format!(
        "{DATABASE}destinations:\n\
         \x20 events:\n    type: rabbitmq\n    url: amqp://127.0.0.1:5672\n    exchange: \"events.{{{{ source }}}}\"\n\
         \x20 log:\n    type: kafka\n    bootstrapServers: 127.0.0.1:9092\n    topic: \"{{{{region}}}}\"\n\
         \x20 stream:\n    type: nats\n    servers: nats://127.0.0.1:4222\n    subject: \"orders.{{{{ payload }}}}\"\n"
    );
    for args in [&["check-config"][..], &[][..]] {
        let (status, stdout, stderr) = Launch::with_config(&yaml).run(args, DEADLINE).await;
        assert_eq!(status.code(), Some(1), "{args:?}: {stderr}");
        for (path, message) in [
            (
                "destinations.events.exchange",
                "placeholder {{ source }} is not allowed in the exchange of destination events",
            ),
            (
                "destinations.log.topic",
                "placeholder {{ region }} is not allowed in the topic of destination log",
            ),
            (
                "destinations.stream.subject",
                "placeholder {{ payload }} is not allowed in the subject of destination stream",
            ),
        ] {
            let line = stderr
                .lines()
                .find(|line| line.contains(path))
                .unwrap_or_else(|| panic!("{args:?}: no line names {path}:\n{stderr}"));
            assert!(line.contains(message), "{args:?}: {line}");
        }
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
    }
}

#[tokio::test]
async fn row_placeholders_and_unknown_routing_key_names_pass_the_check() {
    let yaml = format!(
        "{DATABASE}destinations:\n\
         \x20 events:\n    type: rabbitmq\n    url: amqp://127.0.0.1:5672\n    exchange: \"events.{{{{aggregateType}}}}.{{{{ data.customer.region }}}}\"\n    routingKeyTemplate: \"{{{{ nope }}}}\"\n\
         \x20 log:\n    type: kafka\n    bootstrapServers: 127.0.0.1:9092\n    topic: \"{{{{ topic }}}}.{{{{ key }}}}\"\n    topicFrom: aggregate_type\n    keyTemplate: \"{{{{ payload.id }}}}\"\n\
         \x20 stream:\n    type: nats\n    servers: nats://127.0.0.1:4222\n    subject: \"orders.{{{{ payload.region }}}}\"\n\
         routes:\n  - topicPattern: \"order.*\"\n    destination: events\n    routingKeyTemplate: \"{{{{ region }}}}.{{{{ topic }}}}\"\n    routingKeyMissingFieldDefault: unknown\n\
         \x20 - topicPattern: \"**\"\n    destination: log\n"
    );
    let (status, stdout, stderr) = Launch::with_config(&yaml)
        .run(&["check-config"], DEADLINE)
        .await;
    assert!(status.success(), "{stderr}");
    assert!(
        stdout.contains("events.{{aggregateType}}.{{ data.customer.region }}"),
        "{stdout}"
    );
    assert!(stdout.contains("{{ region }}.{{ topic }}"), "{stdout}");
    assert!(stdout.contains("aggregate_type"), "{stdout}");
}

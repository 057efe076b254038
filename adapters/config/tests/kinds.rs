//! The kind of a destination, a source or an auth block comes from its required keys; a `type`
//! that contradicts them is refused naming both.
#![allow(clippy::unwrap_used)]

mod common;
use common::{assert_refused, ok};
use queuebox_config::{DestinationKind, InboundAuth, OutboundAuth, SourceKind};

#[test]
fn destination_kinds_come_from_their_keys() {
    let s = ok("destinations:\n  h:\n    baseUrl: https://h.example.com\n  r:\n    url: amqp://r\n    exchange: e\n  k:\n    bootstrapServers: b\n    topic: t\n  n:\n    servers: nats://n\n    subject: s\n").settings;
    let kinds: Vec<&str> = s.destinations.values().map(|d| d.kind.name()).collect();
    assert_eq!(
        kinds,
        vec!["http", "rabbitmq", "kafka", "nats"],
        "file order is kept"
    );
}

#[test]
fn source_kinds_come_from_their_keys() {
    let s = ok("sources:\n  h:\n    path: /h\n    idempotencyKeyPath: $.id\n    consumption: pull\n  r:\n    queueName: q\n    connectionUrl: amqp://r\n  k:\n    bootstrapServers: b\n    topics: [t]\n    groupId: g\n  n:\n    servers: nats://n\n    stream: S\n    durable: d\n").settings;
    let kinds: Vec<&str> = s.sources.values().map(|d| d.kind.name()).collect();
    assert_eq!(kinds, vec!["http", "rabbitmq", "kafka", "nats"]);
    assert!(
        matches!(s.sources["r"].kind, SourceKind::Rabbitmq(ref r) if r.prefetch_count == 10 && !r.declare_queue)
    );
}

#[test]
fn a_contradicting_type_is_refused_naming_both() {
    assert_refused(
        "destinations:\n  d:\n    type: rabbitmq\n    baseUrl: https://h.example.com\n",
        "destinations.d.type",
        "QUEUEBOX_DESTINATIONS_D_TYPE",
        "says rabbitmq, but the keys baseUrl select a destination of type http",
    );
    assert_refused(
        "sources:\n  s:\n    type: kafka\n    queueName: q\n    connectionUrl: amqp://r\n",
        "sources.s.type",
        "QUEUEBOX_SOURCES_S_TYPE",
        "says kafka, but the keys queueName, connectionUrl select a source of type rabbitmq",
    );
}

#[test]
fn a_matching_type_in_any_case_is_fine() {
    let s =
        ok("destinations:\n  d:\n    type: HTTP\n    baseUrl: https://h.example.com\n").settings;
    assert!(matches!(s.destinations["d"].kind, DestinationKind::Http(_)));
}

#[test]
fn an_unknown_type_is_refused() {
    assert_refused(
        "destinations:\n  d:\n    type: sqs\n    baseUrl: https://h.example.com\n",
        "destinations.d.type",
        "QUEUEBOX_DESTINATIONS_D_TYPE",
        "must be one of http, rabbitmq, kafka, nats, redis, got `sqs`",
    );
}

#[test]
fn a_declared_type_names_its_missing_keys() {
    assert_refused(
        "destinations:\n  d:\n    type: kafka\n    bootstrapServers: b\n",
        "destinations.d.topic",
        "QUEUEBOX_DESTINATIONS_D_TOPIC",
        "is required by a destination of type kafka",
    );
}

#[test]
fn without_type_the_closest_kind_names_its_missing_keys() {
    assert_refused(
        "destinations:\n  d:\n    url: amqp://r\n",
        "destinations.d.exchange",
        "QUEUEBOX_DESTINATIONS_D_EXCHANGE",
        "is required by a destination of type rabbitmq",
    );
}

#[test]
fn an_entry_with_no_kind_keys_is_refused() {
    assert_refused(
        "destinations:\n  d:\n    timeoutMs: 100\n",
        "destinations.d",
        "QUEUEBOX_DESTINATIONS_D",
        "cannot tell the kind of this destination",
    );
}

#[test]
fn keys_of_two_kinds_are_refused() {
    assert_refused(
        "destinations:\n  d:\n    baseUrl: https://h.example.com\n    servers: nats://n\n    subject: s\n",
        "destinations.d",
        "QUEUEBOX_DESTINATIONS_D",
        "sets the required keys of several kinds",
    );
}

#[test]
fn auth_kinds_come_from_their_keys() {
    let s = ok("destinations:\n  o:\n    baseUrl: https://o.example.com\n    auth:\n      clientId: c\n      clientSecret: s\n      tokenUrl: https://auth.example.com/t\n      extraParams:\n        audience: x\n  b:\n    baseUrl: https://b.example.com\n    auth:\n      username: u\n      password: p\n").settings;
    let DestinationKind::Http(o) = &s.destinations["o"].kind else {
        panic!("http")
    };
    assert!(
        matches!(&o.auth, Some(OutboundAuth::Oauth2 { extra_params, .. }) if extra_params["audience"] == "x")
    );
    let DestinationKind::Http(b) = &s.destinations["b"].kind else {
        panic!("http")
    };
    assert!(matches!(&b.auth, Some(OutboundAuth::Basic { username, .. }) if username == "u"));
    let s = ok("admin:\n  enabled: true\n  auth:\n    secret: k\n").settings;
    assert!(matches!(s.admin.auth, Some(InboundAuth::Hmac(_))));
}

#[test]
fn a_contradicting_auth_type_is_refused() {
    assert_refused(
        "admin:\n  enabled: true\n  auth:\n    type: bearer\n    key: k\n",
        "admin.auth.type",
        "QUEUEBOX_ADMIN_AUTH_TYPE",
        "says bearer, but the keys key select an auth block of type api-key",
    );
}

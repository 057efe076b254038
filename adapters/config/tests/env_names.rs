//! The variable naming table of the environment variables reference, row by row: each example
//! variable sets its key, and `env_var_for` maps the key back.
#![allow(clippy::unwrap_used)]

mod common;
use common::{BASE, env, fixture, load_yaml};
use queuebox_config::{
    DestinationKind, FilterCondition, LoadRequest, SourceKind, env_var_for, load,
};

const DB_VARS: [(&str, &str); 3] = [
    (
        "QUEUEBOX_DATABASE_URL",
        "jdbc:postgresql://db:5432/queuebox",
    ),
    ("QUEUEBOX_DATABASE_USERNAME", "queuebox"),
    ("QUEUEBOX_DATABASE_PASSWORD", "secret"),
];

fn load_env(extra: &[(&str, &str)]) -> queuebox_config::Loaded {
    let mut pairs: Vec<(&str, &str)> = DB_VARS.to_vec();
    pairs.extend_from_slice(extra);
    // No file: QUEUEBOX_CONFIG_FILE points into an empty temp dir.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent.yml");
    let missing = missing.to_str().unwrap().to_owned();
    let mut vars = env(&pairs);
    vars.push(("QUEUEBOX_CONFIG_FILE".into(), missing));
    match load(&LoadRequest {
        env: vars,
        config_file: None,
    }) {
        Ok(loaded) => loaded,
        Err(error) => panic!("{error}"),
    }
}

#[test]
fn a_level() {
    assert_eq!(env_var_for("database.url"), "QUEUEBOX_DATABASE_URL");
    let s = load_env(&[]).settings;
    assert_eq!(s.database.target.database, "queuebox");
    assert_eq!(s.database.target.hosts[0].host, "db");
}

#[test]
fn a_camel_case_name() {
    assert_eq!(env_var_for("server.httpPort"), "QUEUEBOX_SERVER_HTTPPORT");
    let s = load_env(&[("QUEUEBOX_SERVER_HTTPPORT", "8081")]).settings;
    assert_eq!(s.server.http_port, 8081);
}

#[test]
fn a_map_key() {
    assert_eq!(
        env_var_for("sources.stripe.path"),
        "QUEUEBOX_SOURCES_STRIPE_PATH"
    );
    let s = load_env(&[
        ("QUEUEBOX_SOURCES_STRIPE_PATH", "/stripe"),
        ("QUEUEBOX_SOURCES_STRIPE_IDEMPOTENCYKEYPATH", "$.id"),
        ("QUEUEBOX_SOURCES_STRIPE_CONSUMPTION", "pull"),
    ])
    .settings;
    let SourceKind::Http(http) = &s.sources["stripe"].kind else {
        panic!("http")
    };
    assert_eq!(http.path, "/stripe");
}

#[test]
fn an_underscore_inside_a_map_key() {
    assert_eq!(
        env_var_for("destinations.my_api.baseUrl"),
        "QUEUEBOX_DESTINATIONS_MY__API_BASEURL"
    );
    let s = load_env(&[(
        "QUEUEBOX_DESTINATIONS_MY__API_BASEURL",
        "https://api.example.com",
    )])
    .settings;
    assert!(matches!(
        s.destinations["my_api"].kind,
        DestinationKind::Http(_)
    ));
}

#[test]
fn a_list_index() {
    assert_eq!(
        env_var_for("routes[0].topicPattern"),
        "QUEUEBOX_ROUTES_0_TOPICPATTERN"
    );
    let s = load_env(&[
        (
            "QUEUEBOX_DESTINATIONS_WEBHOOK_BASEURL",
            "https://api.example.com",
        ),
        ("QUEUEBOX_ROUTES_0_TOPICPATTERN", "order.*"),
        ("QUEUEBOX_ROUTES_0_DESTINATION", "webhook"),
    ])
    .settings;
    assert_eq!(s.routes[0].topic_pattern, "order.*");
    assert_eq!(s.routes[0].destination, "webhook");
}

#[test]
fn a_list_of_values() {
    assert_eq!(
        env_var_for("sources.orders.topics[0]"),
        "QUEUEBOX_SOURCES_ORDERS_TOPICS_0"
    );
    let s = load_env(&[
        ("QUEUEBOX_SOURCES_ORDERS_BOOTSTRAPSERVERS", "b:9092"),
        ("QUEUEBOX_SOURCES_ORDERS_TOPICS_0", "orders"),
        ("QUEUEBOX_SOURCES_ORDERS_TOPICS_1", "orders-retry"),
        ("QUEUEBOX_SOURCES_ORDERS_GROUPID", "g"),
    ])
    .settings;
    let SourceKind::Kafka(kafka) = &s.sources["orders"].kind else {
        panic!("kafka")
    };
    assert_eq!(kafka.topics, vec!["orders", "orders-retry"]);
}

#[test]
fn the_example_variable_set_of_the_reference_loads() {
    let loaded = load_env(&[
        ("QUEUEBOX_DESTINATIONS_WEBHOOK_TYPE", "http"),
        (
            "QUEUEBOX_DESTINATIONS_WEBHOOK_BASEURL",
            "https://api.example.com",
        ),
        ("QUEUEBOX_ROUTES_0_TOPICPATTERN", "order.*"),
        ("QUEUEBOX_ROUTES_0_DESTINATION", "webhook"),
        ("QUEUEBOX_SOURCES_STRIPE_TYPE", "http"),
        ("QUEUEBOX_SOURCES_STRIPE_PATH", "/stripe"),
        ("QUEUEBOX_SOURCES_STRIPE_IDEMPOTENCYKEYPATH", "$.id"),
        ("QUEUEBOX_SOURCES_STRIPE_EVENTTYPEPATH", "$.type"),
    ]);
    assert_eq!(loaded.origin, queuebox_config::ConfigOrigin::EnvOnly);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.settings.sources["stripe"].topic, "{{ eventType }}");
}

#[test]
fn the_header_filter_example_uses_two_index_levels() {
    let s = load_env(&[
        ("QUEUEBOX_SOURCES_ORDERS_PATH", "/orders"),
        ("QUEUEBOX_SOURCES_ORDERS_IDEMPOTENCYKEYPATH", "$.id"),
        ("QUEUEBOX_SOURCES_ORDERS_CONSUMPTION", "pull"),
        (
            "QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_HEADER",
            "x-region",
        ),
        ("QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_IN_0", "eu"),
        ("QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_IN_1", "uk"),
        ("QUEUEBOX_SOURCES_ORDERS_FILTER_EXCLUDE_0_HEADER", "x-test"),
        ("QUEUEBOX_SOURCES_ORDERS_FILTER_EXCLUDE_0_EXISTS", "true"),
    ])
    .settings;
    let filter = s.sources["orders"].filter.as_ref().unwrap();
    assert_eq!(filter.require[0].header, "x-region");
    assert_eq!(
        filter.require[0].condition,
        FilterCondition::In(vec!["eu".into(), "uk".into()])
    );
    assert_eq!(filter.exclude[0].condition, FilterCondition::Exists(true));
    assert_eq!(
        env_var_for("sources.orders.filter.require[0].in[1]"),
        "QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_IN_1"
    );
}

/// Every row of the reference's variable tables: key -> variable.
#[test]
fn every_documented_key_maps_to_its_variable() {
    let rows = [
        ("server.managementPort", "QUEUEBOX_SERVER_MANAGEMENTPORT"),
        (
            "database.connectionTimeoutMs",
            "QUEUEBOX_DATABASE_CONNECTIONTIMEOUTMS",
        ),
        (
            "database.columnMapping.outbox.leaseExpiresAt",
            "QUEUEBOX_DATABASE_COLUMNMAPPING_OUTBOX_LEASEEXPIRESAT",
        ),
        (
            "outbox.capture.connection.trustServerCertificate",
            "QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_TRUSTSERVERCERTIFICATE",
        ),
        (
            "inbox.relay.pendingGaugeIntervalMs",
            "QUEUEBOX_INBOX_RELAY_PENDINGGAUGEINTERVALMS",
        ),
        (
            "http.blockPrivateAddresses",
            "QUEUEBOX_HTTP_BLOCKPRIVATEADDRESSES",
        ),
        (
            "admin.auth.signaturePayloadFormat",
            "QUEUEBOX_ADMIN_AUTH_SIGNATUREPAYLOADFORMAT",
        ),
        (
            "destinations.orders.headers.xteam",
            "QUEUEBOX_DESTINATIONS_ORDERS_HEADERS_XTEAM",
        ),
        (
            "destinations.orders.auth.extraParams.audience",
            "QUEUEBOX_DESTINATIONS_ORDERS_AUTH_EXTRAPARAMS_AUDIENCE",
        ),
        (
            "routes[0].routingKeyMissingFieldDefault",
            "QUEUEBOX_ROUTES_0_ROUTINGKEYMISSINGFIELDDEFAULT",
        ),
        (
            "sources.orders.attributeHeaders.idempotencyKey",
            "QUEUEBOX_SOURCES_ORDERS_ATTRIBUTEHEADERS_IDEMPOTENCYKEY",
        ),
        (
            "retention.inbox.cleanupInterval",
            "QUEUEBOX_RETENTION_INBOX_CLEANUPINTERVAL",
        ),
    ];
    for (key, var) in rows {
        assert_eq!(env_var_for(key), var, "{key}");
    }
}

#[test]
fn a_variable_merges_into_a_file_key_of_any_case() {
    let fixture = fixture(&format!(
        "{BASE}destinations:\n  orders:\n    baseUrl: https://a.example.com\n    timeoutMs: 1000\n    path: /keep\n"
    ));
    let loaded = load(&LoadRequest {
        env: env(&[("QUEUEBOX_DESTINATIONS_ORDERS_TIMEOUTMS", "5000")]),
        config_file: Some(fixture.file.clone()),
    })
    .unwrap();
    let DestinationKind::Http(http) = &loaded.settings.destinations["orders"].kind else {
        panic!("http")
    };
    assert_eq!(http.timeout.as_millis(), 5000);
    assert_eq!(http.path, "/keep", "the other keys of the destination stay");
}

#[test]
fn file_keys_match_in_any_letter_case() {
    let loaded = load_yaml(&format!("{BASE}SERVER:\n  HTTPPORT: 9000\n"), &[]).unwrap();
    assert_eq!(loaded.settings.server.http_port, 9000);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

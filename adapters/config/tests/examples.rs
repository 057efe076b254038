//! The shipped configurations load: the complete example of the reference, `examples/queuebox.yml`
//! and the packaged default.
#![allow(clippy::unwrap_used)]

mod common;
use queuebox_config::{
    ConfigOrigin, DestinationKind, LoadRequest, OnError, PACKAGED, RetentionKind, SourceKind, load,
};
use std::path::PathBuf;

fn load_file(
    path: PathBuf,
    env: &[(&str, &str)],
) -> Result<queuebox_config::Loaded, queuebox_config::ConfigError> {
    load(&LoadRequest {
        env: common::env(env),
        config_file: Some(path),
    })
}

#[test]
fn the_complete_reference_example_loads_when_its_placeholders_have_values() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/complete.yml");
    let env = [
        ("DB_PASSWORD", "db"),
        ("ADMIN_TOKEN", "admin"),
        ("ORDERS_CLIENT_SECRET", "client"),
        ("STRIPE_WEBHOOK_SECRET", "whsec"),
    ];
    let loaded = match load_file(path.clone(), &env) {
        Ok(loaded) => loaded,
        Err(error) => panic!("{error}"),
    };
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let s = loaded.settings;
    assert_eq!(s.server.management_port, Some(9090));
    assert_eq!(s.inbox.relay.max_attempts, 10);
    assert_eq!(s.destinations.len(), 4);
    assert_eq!(s.routes.len(), 2);
    assert_eq!(s.sources.len(), 5);
    assert!(matches!(
        s.destinations["events-exchange"].kind,
        DestinationKind::Rabbitmq(_)
    ));
    assert_eq!(
        s.destinations["orders-api"]
            .transform
            .as_ref()
            .unwrap()
            .on_error,
        OnError::Fail
    );
    assert!(matches!(
        s.sources["orders-stream"].kind,
        SourceKind::Nats(_)
    ));
    assert_eq!(s.retention.outbox.policy, RetentionKind::Age);

    // Without values for its placeholders, each one is reported against its key.
    let error = load_file(path, &[]).unwrap_err();
    assert_eq!(error.problems().len(), 4, "{error}");
}

#[test]
fn the_example_file_of_the_quick_start_loads() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/queuebox.yml");
    let loaded = load_file(path.clone(), &[]).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.origin, ConfigOrigin::File(path.clone()));
    let s = &loaded.settings;
    assert_eq!(s.database.target.hosts[0].host, "127.0.0.1");
    assert_eq!(s.database.password.expose(), "queuebox");
    // The example keeps the management port commented out, so the quick start has one port.
    assert_eq!(s.server.management_port, None);
    assert!(!s.admin.enabled);
    let DestinationKind::Http(webhook) = &s.destinations["webhook"].kind else {
        panic!("http")
    };
    assert_eq!(webhook.base_url, "http://127.0.0.1:9999");
    assert_eq!(webhook.path, "/events");
    assert_eq!(s.routes[0].topic_pattern, "order.*");
    assert_eq!(s.sources["orders"].topic, "order.{{ eventType }}");

    let loaded = load_file(path, &[("QUEUEBOX_DB_PASSWORD", "other")]).unwrap();
    assert_eq!(loaded.settings.database.password.expose(), "other");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn the_packaged_default_loads() {
    let fixture = common::fixture(PACKAGED);
    let loaded = load_file(fixture.file.clone(), &[]).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let target = loaded.settings.database_options().target;
    assert_eq!(target.hosts[0].host, "localhost");
    assert_eq!(target.hosts[0].port, Some(5432));
    assert_eq!(target.database, "queuebox");
    assert_eq!(target.username, "queuebox");
    assert_eq!(target.password.expose(), "queuebox");
}

//! The cargo features that gate backends, and the start check of the configuration against them:
//! a kind the configuration names and this binary was built without stops the start with a
//! sentence naming the feature, instead of a parse error or a silent no-op.

use super::Feature;
use queuebox_config::{DestinationKind, Settings, SourceKind};
use queuebox_ports::database::DatabaseKind;

impl Feature {
    /// The sentence that refuses `what` (for example `database.type is postgresql`) in a binary
    /// built without this feature.
    pub fn missing(self, what: &str) -> String {
        format!(
            "{what}, but this binary was built without the `{}` feature",
            self.name()
        )
    }
}

/// The refusal of `database.type` when `feature` is compiled out.
pub(super) fn database_missing(feature: Feature, kind: DatabaseKind) -> String {
    feature.missing(&format!("database.type is {}", kind.as_str()))
}

/// The refusal of destination `name` of `kind` when `feature` is compiled out.
pub(super) fn destination_missing(feature: Feature, name: &str, kind: &DestinationKind) -> String {
    feature.missing(&format!(
        "destinations.{name} is a {} destination",
        kind.name()
    ))
}

/// The refusal of source `name` of `kind` when `feature` is compiled out.
pub(super) fn source_missing(feature: Feature, name: &str, kind: &SourceKind) -> String {
    feature.missing(&format!("sources.{name} is a {} source", kind.name()))
}

/// Every line of what the configuration needs and the binary lacks; `Ok` means all is there.
/// `check-config`, `migrate` and `serve` run it before anything connects or binds a port.
///
/// # Errors
/// One sentence per database, destination or source whose feature is not compiled in, and one
/// for a database product this version does not support (SQL Server).
pub fn check(settings: &Settings) -> Result<(), Vec<String>> {
    check_with(settings, Feature::compiled)
}

/// [`check`] against a given set of compiled features, so a test can play a slim build.
fn check_with(settings: &Settings, compiled: impl Fn(Feature) -> bool) -> Result<(), Vec<String>> {
    let mut missing = Vec::new();
    let database = settings.database.kind;
    match Feature::of_database(database) {
        None => missing.push(super::unwired::unsupported_database(database)),
        Some(feature) if !compiled(feature) => missing.push(database_missing(feature, database)),
        Some(_) => {}
    }
    for (name, destination) in &settings.destinations {
        if let Some(feature) = Feature::of_destination(&destination.kind)
            && !compiled(feature)
        {
            missing.push(destination_missing(feature, name, &destination.kind));
        }
    }
    for (name, source) in &settings.sources {
        if let Some(feature) = Feature::of_source(&source.kind)
            && !compiled(feature)
        {
            missing.push(source_missing(feature, name, &source.kind));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(super) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A configuration with one entry of every kind, loaded through the real loader.
    pub(in crate::backends) fn every_kind(database_type: &str) -> Settings {
        static FILES: AtomicUsize = AtomicUsize::new(0);
        let url = match database_type {
            "sqlserver" => "jdbc:sqlserver://127.0.0.1:1433;databaseName=queuebox",
            _ => "jdbc:postgresql://127.0.0.1:5432/queuebox",
        };
        let yaml = format!(
            "database:\n  type: {database_type}\n  url: \"{url}\"\n  username: qb\n  password: x\n\
             destinations:\n\
             \x20 api:\n    type: http\n    baseUrl: http://127.0.0.1:9\n\
             \x20 events:\n    type: rabbitmq\n    url: amqp://127.0.0.1:5672\n    exchange: events\n\
             \x20 log:\n    type: kafka\n    bootstrapServers: 127.0.0.1:9092\n    topic: orders\n\
             \x20 stream:\n    type: nats\n    servers: nats://127.0.0.1:4222\n    subject: orders\n\
             \x20 xadd:\n    type: redis\n    url: redis://127.0.0.1:6379\n    stream: orders\n\
             routes:\n  - topicPattern: \"**\"\n    destination: api\n\
             sources:\n\
             \x20 hooks:\n    type: http\n    path: /hooks\n    idempotencyKeyPath: $.id\n    topic: hooks\n\
             \x20 queue:\n    type: rabbitmq\n    queueName: q\n    connectionUrl: amqp://127.0.0.1:5672\n\
             \x20 topics:\n    type: kafka\n    bootstrapServers: 127.0.0.1:9092\n    topics: [t]\n    groupId: g\n\
             \x20 jets:\n    type: nats\n    servers: nats://127.0.0.1:4222\n    stream: s\n    durable: d\n\
             \x20 group:\n    type: redis\n    url: redis://127.0.0.1:6379\n    stream: s\n    group: g\n\
             \x20   attributeHeaders:\n      eventType: x-kind\n"
        );
        let path = std::env::temp_dir().join(format!(
            "queuebox-features-{}-{}.yml",
            std::process::id(),
            FILES.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::write(&path, yaml).unwrap();
        let loaded = queuebox_config::load(&queuebox_config::LoadRequest {
            env: Vec::new(),
            config_file: Some(path.clone()),
        });
        let _ = std::fs::remove_file(&path);
        loaded.unwrap().settings
    }

    #[test]
    fn a_build_with_every_feature_accepts_every_kind() {
        let settings = every_kind("postgresql");
        assert_eq!(check_with(&settings, |_| true), Ok(()));
    }

    #[test]
    fn each_kind_without_its_feature_is_one_sentence_naming_the_feature() {
        let settings = every_kind("postgresql");
        let missing = check_with(&settings, |_| false).unwrap_err();
        assert_eq!(
            missing,
            [
                "database.type is postgresql, but this binary was built without the `postgres` feature",
                "destinations.events is a rabbitmq destination, but this binary was built without the `rabbitmq` feature",
                "destinations.log is a kafka destination, but this binary was built without the `kafka` feature",
                "destinations.stream is a nats destination, but this binary was built without the `nats` feature",
                "destinations.xadd is a redis destination, but this binary was built without the `redis` feature",
                "sources.queue is a rabbitmq source, but this binary was built without the `rabbitmq` feature",
                "sources.topics is a kafka source, but this binary was built without the `kafka` feature",
                "sources.jets is a nats source, but this binary was built without the `nats` feature",
                "sources.group is a redis source, but this binary was built without the `redis` feature",
            ]
        );
    }

    #[test]
    fn sql_server_is_refused_in_one_sentence_whatever_the_build() {
        let settings = every_kind("sqlserver");
        let missing = check_with(&settings, |_| true).unwrap_err();
        assert_eq!(
            missing,
            ["database.type is sqlserver: SQL Server is not supported in this version"]
        );
    }

    #[test]
    fn a_slim_build_refuses_only_what_it_lacks() {
        let settings = every_kind("sqlserver");
        let slim = |feature: Feature| matches!(feature, Feature::Postgres | Feature::Kafka);
        let missing = check_with(&settings, slim).unwrap_err();
        assert_eq!(missing.len(), 7, "{missing:?}");
        assert_eq!(
            missing[0],
            "database.type is sqlserver: SQL Server is not supported in this version"
        );
        assert!(
            missing.iter().all(|line| !line.contains("kafka")),
            "{missing:?}"
        );
    }
}

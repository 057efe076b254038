//! The cargo features that gate backends, and the start check of the configuration against them:
//! a kind the configuration names and this binary was built without stops the start with a
//! sentence naming the feature, instead of a parse error or a silent no-op.

use queuebox_config::{DestinationKind, Settings, SourceKind};
use queuebox_ports::database::DatabaseKind;

/// A cargo feature of the binary that builds one backend in. HTTP in and out is always built, so
/// it has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// `postgres`
    Postgres,
    /// `rabbitmq`
    Rabbitmq,
    /// `kafka`
    Kafka,
    /// `nats`
    Nats,
    /// `redis`
    Redis,
}

impl Feature {
    /// The feature's name in `Cargo.toml`.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Postgres => "postgres",
            Feature::Rabbitmq => "rabbitmq",
            Feature::Kafka => "kafka",
            Feature::Nats => "nats",
            Feature::Redis => "redis",
        }
    }

    /// Whether this binary was built with the feature.
    pub fn compiled(self) -> bool {
        match self {
            Feature::Postgres => cfg!(feature = "postgres"),
            Feature::Rabbitmq => cfg!(feature = "rabbitmq"),
            Feature::Kafka => cfg!(feature = "kafka"),
            Feature::Nats => cfg!(feature = "nats"),
            Feature::Redis => cfg!(feature = "redis"),
        }
    }

    /// The feature a `database.type` needs; `None` for a product no build supports yet
    /// (SQL Server), which [`check`] refuses on its own.
    pub fn of_database(kind: DatabaseKind) -> Option<Feature> {
        match kind {
            DatabaseKind::Postgresql => Some(Feature::Postgres),
            DatabaseKind::Sqlserver => None,
        }
    }

    /// The feature a destination kind needs; `None` for HTTP, which is always built.
    pub fn of_destination(kind: &DestinationKind) -> Option<Feature> {
        match kind {
            DestinationKind::Http(_) => None,
            DestinationKind::Rabbitmq(_) => Some(Feature::Rabbitmq),
            DestinationKind::Kafka(_) => Some(Feature::Kafka),
            DestinationKind::Nats(_) => Some(Feature::Nats),
            DestinationKind::Redis(_) => Some(Feature::Redis),
        }
    }

    /// The feature a source kind needs; `None` for HTTP, which is always built.
    pub fn of_source(kind: &SourceKind) -> Option<Feature> {
        match kind {
            SourceKind::Http(_) => None,
            SourceKind::Rabbitmq(_) => Some(Feature::Rabbitmq),
            SourceKind::Kafka(_) => Some(Feature::Kafka),
            SourceKind::Nats(_) => Some(Feature::Nats),
            SourceKind::Redis(_) => Some(Feature::Redis),
        }
    }

    /// The sentence that refuses `what` (for example `database.type is postgresql`) in a binary
    /// built without this feature.
    pub fn missing(self, what: &str) -> String {
        format!(
            "{what}, but this binary was built without the `{}` feature",
            self.name()
        )
    }
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
        Some(feature) if !compiled(feature) => {
            missing.push(feature.missing(&format!("database.type is {}", database.as_str())));
        }
        Some(_) => {}
    }
    for (name, destination) in &settings.destinations {
        if let Some(feature) = Feature::of_destination(&destination.kind)
            && !compiled(feature)
        {
            missing.push(feature.missing(&format!(
                "destinations.{name} is a {} destination",
                destination.kind.name()
            )));
        }
    }
    for (name, source) in &settings.sources {
        if let Some(feature) = Feature::of_source(&source.kind)
            && !compiled(feature)
        {
            missing.push(feature.missing(&format!(
                "sources.{name} is a {} source",
                source.kind.name()
            )));
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
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A configuration with one entry of every kind, loaded through the real loader.
    fn every_kind(database_type: &str) -> Settings {
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
             routes:\n  - topicPattern: \"**\"\n    destination: api\n\
             sources:\n\
             \x20 hooks:\n    type: http\n    path: /hooks\n    idempotencyKeyPath: $.id\n    topic: hooks\n\
             \x20 queue:\n    type: rabbitmq\n    queueName: q\n    connectionUrl: amqp://127.0.0.1:5672\n\
             \x20 topics:\n    type: kafka\n    bootstrapServers: 127.0.0.1:9092\n    topics: [t]\n    groupId: g\n\
             \x20 jets:\n    type: nats\n    servers: nats://127.0.0.1:4222\n    stream: s\n    durable: d\n"
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
                "sources.queue is a rabbitmq source, but this binary was built without the `rabbitmq` feature",
                "sources.topics is a kafka source, but this binary was built without the `kafka` feature",
                "sources.jets is a nats source, but this binary was built without the `nats` feature",
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
        assert_eq!(missing.len(), 5, "{missing:?}");
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

//! Which backends this binary was built with, checked against what the configuration asks for, so a
//! missing feature fails the start with a sentence instead of a parse error or a silent no-op.

use queuebox_config::Settings;
use queuebox_ports::database::DatabaseKind;

/// Whether the cargo feature of a backend was compiled in.
fn compiled(backend: &str) -> bool {
    match backend {
        "postgres" => cfg!(feature = "postgres"),
        "sqlserver" => cfg!(feature = "sqlserver"),
        "rabbitmq" => cfg!(feature = "rabbitmq"),
        "kafka" => cfg!(feature = "kafka"),
        "nats" => cfg!(feature = "nats"),
        // HTTP in and out is always built.
        _ => true,
    }
}

/// The feature that serves a destination or source kind.
fn feature_of(kind: &str) -> &str {
    match kind {
        "http" => "http",
        other => other,
    }
}

/// Every line of what the configuration needs and the binary lacks; empty means all is there.
pub fn check(settings: &Settings) -> Result<(), Vec<String>> {
    let mut missing = Vec::new();
    let database_feature = match settings.database.kind {
        DatabaseKind::Postgresql => "postgres",
        DatabaseKind::Sqlserver => "sqlserver",
    };
    if !compiled(database_feature) {
        missing.push(format!(
            "database.type is {}, but this binary was built without the `{database_feature}` feature",
            settings.database.kind.as_str()
        ));
    }
    for (name, destination) in &settings.destinations {
        let feature = feature_of(destination.kind.name());
        if !compiled(feature) {
            missing.push(format!(
                "destinations.{name} is a {} destination, but this binary was built without the `{feature}` feature",
                destination.kind.name()
            ));
        }
    }
    for (name, source) in &settings.sources {
        let feature = feature_of(source.kind.name());
        if !compiled(feature) {
            missing.push(format!(
                "sources.{name} is a {} source, but this binary was built without the `{feature}` feature",
                source.kind.name()
            ));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing)
    }
}

//! Rules that span sections: checked once every section is read.

use crate::model::{CaptureMode, Settings, SourceKind};
use crate::reader::Reader;
use queuebox_ports::database::DatabaseKind;
use std::collections::HashMap;

pub(crate) fn check(r: &mut Reader, settings: &Settings) {
    check_routes(r, settings);
    check_migrate(r, settings);
    check_capture(r, settings);
    check_source_paths(r, settings);
}

fn check_routes(r: &mut Reader, settings: &Settings) {
    for (i, route) in settings.routes.iter().enumerate() {
        if !route.destination.is_empty() && !settings.destinations.contains_key(&route.destination)
        {
            let known: Vec<&str> = settings.destinations.keys().map(String::as_str).collect();
            let known = if known.is_empty() {
                "no destination is configured".to_owned()
            } else {
                format!("known: {}", known.join(", "))
            };
            r.problem(
                format!("routes[{i}].destination"),
                format!(
                    "names unknown destination `{}` ({known})",
                    route.destination
                ),
            );
        }
    }
}

/// The bundled migrations create the default names only, so a rename with `migrate: true` would
/// create tables that QueueBox then does not use.
fn check_migrate(r: &mut Reader, settings: &Settings) {
    if !settings.database.migrate {
        return;
    }
    for setting in settings.database.schema.renamed_settings() {
        r.problem(
            setting,
            "renames a table or column while database.migrate is true; the bundled migrations create the default names only: set database.migrate: false and create the schema yourself",
        );
    }
}

fn check_capture(r: &mut Reader, settings: &Settings) {
    let capture = &settings.outbox.capture;
    let database = settings.database.kind;
    let needed = match capture.mode {
        CaptureMode::Polling => return,
        CaptureMode::PostgresLogical => DatabaseKind::Postgresql,
        CaptureMode::SqlserverCdc => DatabaseKind::Sqlserver,
    };
    if needed != database {
        r.problem(
            "outbox.capture.mode",
            format!(
                "this mode needs database.type {}, but it is {}",
                needed.as_str(),
                database.as_str()
            ),
        );
    }
    if settings.database.target.hosts.len() > 1 && capture.connection.hostname.is_none() {
        r.problem(
            "outbox.capture.connection.hostname",
            "is required because database.url names several hosts: capture reads from one",
        );
    }
}

/// Two HTTP sources on one path would make one of them unreachable.
fn check_source_paths(r: &mut Reader, settings: &Settings) {
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for (name, source) in &settings.sources {
        if let SourceKind::Http(http) = &source.kind {
            if http.path.is_empty() {
                continue;
            }
            if let Some(first) = seen.insert(http.path.as_str(), name.as_str()) {
                r.problem(
                    format!("sources.{name}.path"),
                    format!("`{}` is also the path of source {first}", http.path),
                );
            }
        }
    }
}

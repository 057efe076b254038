//! The backends of this build, registered in one table: `backends!` below has one entry
//! per kind of database and broker, and everything the binary does per kind is generated from it
//! (`expand.rs` says what an entry becomes): the wiring module behind its cargo feature, the
//! [`Feature`] it needs, the start check's sentence when the feature is compiled out, the arms of
//! [`connect_database`], [`publisher`] and [`start_source`], and where a broker source keeps its
//! `attributeHeaders` ([`attribute_headers`]). HTTP in and out is always built and wired by hand
//! (`http.rs`). Every generated match is exhaustive, so a kind the configuration learns and the
//! table lacks does not compile.
//!
//! # Adding a backend
//!
//! A broker kind (destination and source) touches, outside its adapter crate:
//!
//! 1. the configuration crate: its `DestinationKind`/`SourceKind` variants and their reading;
//! 2. `bin/Cargo.toml`: the optional dependency and the feature (in `default`);
//! 3. one wiring file, `<kind>.rs` beside this one, that turns the typed configuration into the
//!    adapter's objects:
//!    - `pub async fn publisher(settings: &Settings, name: &str, destination: &Destination,
//!      config: &<Kind>Destination) -> anyhow::Result<Arc<dyn Publisher>>`;
//!    - `pub fn client(name: &str, config: &<Kind>Source) -> anyhow::Result<impl SourceClient>`,
//!      which the application's source driver runs;
//! 4. one entry in the table below;
//! 5. the docs.
//!
//! A database kind is an entry under `databases` whose wiring file has `pub async fn
//! connect(options: &DatabaseOptions) -> anyhow::Result<Arc<dyn DatabaseBackend>>`.

#[macro_use]
mod expand;
mod features;
pub mod http;
mod source;
pub(crate) mod unwired;

pub use features::check;
pub use source::{SourceConsumer, SourceContext, StartedSource, StartedSources};

use queuebox_config::Settings;
use queuebox_ports::ingest::Ingest;
use std::sync::Arc;

backends! {
    databases {
        /// `postgres`: `database.type: postgresql` (`queuebox-postgres`).
        Postgresql => Postgres { feature: "postgres", wiring: postgres },
    }
    // Kinds the configuration reads and no build of this version supports: refused at the start
    // check and at connect with one sentence (`unwired.rs`).
    unsupported_databases { Sqlserver }
    brokers {
        /// `rabbitmq`: `rabbitmq` destinations and sources (`queuebox-rabbitmq`).
        Rabbitmq { feature: "rabbitmq", wiring: rabbitmq, headers: attribute_headers },
        /// `kafka`: `kafka` destinations and sources (`queuebox-kafka`).
        Kafka { feature: "kafka", wiring: kafka, headers: attribute_headers },
        /// `nats`: `nats` (JetStream) destinations and sources (`queuebox-nats`).
        Nats { feature: "nats", wiring: nats, headers: attribute_headers },
        /// `redis`: `redis` (Streams) destinations and sources (`queuebox-redis`).
        Redis { feature: "redis", wiring: redis, headers: attribute_headers },
    }
}

/// Starts every configured source, in configuration order.
///
/// # Errors
/// A source cannot be started, or two HTTP sources answer at the same path.
pub async fn start_sources(
    settings: &Settings,
    ingest: &Arc<dyn Ingest>,
) -> anyhow::Result<StartedSources> {
    let context = SourceContext { settings, ingest };
    let mut started = StartedSources::default();
    for (name, source) in &settings.sources {
        started.add(name, start_source(&context, name, source).await?);
    }
    http::check_paths(&started.routes)?;
    for route in &started.routes {
        tracing::info!(source = %route.source, path = %route.path, "inbox source served");
    }
    Ok(started)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::features::tests::every_kind;
    use super::*;

    /// The names in `bin/Cargo.toml`'s `[features]` table, and those of its `default` list.
    fn cargo_features() -> (Vec<String>, Vec<String>) {
        let manifest = include_str!("../../Cargo.toml");
        let table = manifest
            .split("\n[features]\n")
            .nth(1)
            .unwrap()
            .split("\n[")
            .next()
            .unwrap();
        let mut names = Vec::new();
        let mut default = Vec::new();
        for line in table.lines().filter(|line| line.contains('=')) {
            let (name, list) = line.split_once('=').unwrap();
            let name = name.trim().to_owned();
            if name == "default" {
                default = list
                    .trim()
                    .trim_matches(['[', ']'])
                    .split(',')
                    .map(|feature| feature.trim().trim_matches('"').to_owned())
                    .filter(|feature| !feature.is_empty())
                    .collect();
            } else {
                names.push(name);
            }
        }
        (names, default)
    }

    #[test]
    fn the_table_and_the_cargo_features_name_the_same_backends_all_built_by_default() {
        let (names, default) = cargo_features();
        let table: Vec<&str> = Feature::ALL.iter().map(|feature| feature.name()).collect();
        assert_eq!(names, table, "bin/Cargo.toml [features] against the table");
        assert_eq!(default, table, "bin/Cargo.toml default against the table");
    }

    #[tokio::test]
    async fn a_destination_is_built_or_refused_with_the_start_check_sentence() {
        let settings = every_kind("postgresql");
        let mut refused = Vec::new();
        for (name, destination) in &settings.destinations {
            let built = publisher(&settings, name, destination).await;
            match Feature::of_destination(&destination.kind) {
                Some(feature) if !feature.compiled() => {
                    let error = built.err().unwrap().to_string();
                    assert_eq!(
                        error,
                        features::destination_missing(feature, name, &destination.kind)
                    );
                    refused.push(error);
                }
                _ => assert!(built.is_ok(), "destinations.{name}: {:?}", built.err()),
            }
        }
        // The guard and the start check say the same thing, line for line.
        let checked = check(&settings).err().unwrap_or_default();
        let checked: Vec<&String> = checked
            .iter()
            .filter(|line| line.starts_with("destinations."))
            .collect();
        assert_eq!(checked, refused.iter().collect::<Vec<_>>());
    }

    #[test]
    fn a_broker_source_reads_its_attribute_headers_and_an_http_source_none() {
        let settings = every_kind("postgresql");
        for (name, source) in &settings.sources {
            let headers = attribute_headers(&source.kind);
            if name == "hooks" {
                assert!(headers.is_none(), "sources.hooks is HTTP");
            } else {
                let headers = headers.unwrap();
                // `sources.group` renames one header; the others keep the defaults.
                let event_type = if name == "group" {
                    "x-kind"
                } else {
                    "x-event-type"
                };
                assert_eq!(
                    (
                        headers.idempotency_key.as_str(),
                        headers.aggregate_id.as_str(),
                        headers.event_type.as_str()
                    ),
                    ("x-idempotency-key", "x-aggregate-id", event_type),
                    "sources.{name}"
                );
            }
        }
    }
}

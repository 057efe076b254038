//! What the backend table in `super` (`backends!`) expands to. Each entry becomes, in the
//! `backends` module:
//!
//! - its wiring module, declared behind its cargo feature (`#[cfg(feature = "nats")] pub mod
//!   nats;`);
//! - a [`Feature`](super::Feature) variant, with its name in `Cargo.toml`, whether it is compiled
//!   in, and the kind(s) that need it;
//! - an arm in each dispatch ([`connect_database`](super::connect_database),
//!   [`publisher`](super::publisher), [`start_source`](super::start_source)) that calls the wiring
//!   module when the feature is on, and, when it is off, refuses with the sentence the start check
//!   ([`check`](super::check)) gives, so the two cannot drift;
//! - for a broker, its arm in [`attribute_headers`](super::attribute_headers): the field of the
//!   source's configuration that holds its `attributeHeaders` block.
//!
//! Nothing here names a kind: a new backend is one entry in the table, not an arm here.

/// Expands the backend table; see the module documentation.
macro_rules! backends {
    (
        databases {
            $(
                $(#[doc = $db_doc:literal])*
                $db:ident => $db_feature:ident { feature: $db_name:literal, wiring: $db_wiring:ident $(,)? }
            ),* $(,)?
        }
        unsupported_databases { $( $unsupported:ident ),* $(,)? }
        brokers {
            $(
                $(#[doc = $doc:literal])*
                $kind:ident { feature: $name:literal, wiring: $wiring:ident, headers: $headers:ident $(,)? }
            ),* $(,)?
        }
    ) => {
        $(
            #[cfg(feature = $db_name)]
            pub mod $db_wiring;
        )*
        $(
            #[cfg(feature = $name)]
            pub mod $wiring;
        )*

        /// A cargo feature of the binary that builds one backend in. HTTP in and out is always
        /// built, so it has none.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Feature {
            $(
                $(#[doc = $db_doc])*
                $db_feature,
            )*
            $(
                $(#[doc = $doc])*
                $kind,
            )*
        }

        impl Feature {
            /// Every backend feature, in table order.
            pub const ALL: &'static [Feature] = &[$(Feature::$db_feature,)* $(Feature::$kind,)*];

            /// The feature's name in `Cargo.toml`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Feature::$db_feature => $db_name,)*
                    $(Feature::$kind => $name,)*
                }
            }

            /// Whether this binary was built with the feature.
            pub fn compiled(self) -> bool {
                match self {
                    $(Feature::$db_feature => cfg!(feature = $db_name),)*
                    $(Feature::$kind => cfg!(feature = $name),)*
                }
            }

            /// The feature a `database.type` needs; `None` for a product no build supports yet
            /// (SQL Server), which [`check`] refuses on its own.
            pub fn of_database(
                kind: ::queuebox_ports::database::DatabaseKind,
            ) -> Option<Feature> {
                use ::queuebox_ports::database::DatabaseKind;
                match kind {
                    $(DatabaseKind::$db => Some(Feature::$db_feature),)*
                    $(DatabaseKind::$unsupported => None,)*
                }
            }

            /// The feature a destination kind needs; `None` for HTTP, which is always built.
            pub fn of_destination(kind: &::queuebox_config::DestinationKind) -> Option<Feature> {
                use ::queuebox_config::DestinationKind;
                match kind {
                    DestinationKind::Http(_) => None,
                    $(DestinationKind::$kind(_) => Some(Feature::$kind),)*
                }
            }

            /// The feature a source kind needs; `None` for HTTP, which is always built.
            pub fn of_source(kind: &::queuebox_config::SourceKind) -> Option<Feature> {
                use ::queuebox_config::SourceKind;
                match kind {
                    SourceKind::Http(_) => None,
                    $(SourceKind::$kind(_) => Some(Feature::$kind),)*
                }
            }
        }

        /// Waits for the database (up to `database.startupTimeoutMs`) and opens the pool of the
        /// backend `database.type` names, with the wiring module of its kind.
        ///
        /// # Errors
        /// The database stays unreachable or refuses the login, or its kind has no backend in
        /// this build.
        pub async fn connect_database(
            options: &::queuebox_ports::database::DatabaseOptions,
        ) -> anyhow::Result<Arc<dyn ::queuebox_ports::database::DatabaseBackend>> {
            use ::queuebox_ports::database::DatabaseKind;
            match options.target.kind {
                $(
                    #[cfg(feature = $db_name)]
                    DatabaseKind::$db => $db_wiring::connect(options).await,
                    #[cfg(not(feature = $db_name))]
                    DatabaseKind::$db => anyhow::bail!(features::database_missing(
                        Feature::$db_feature,
                        DatabaseKind::$db,
                    )),
                )*
                $(
                    DatabaseKind::$unsupported => Err(unwired::database(DatabaseKind::$unsupported)),
                )*
            }
        }

        /// The publisher of destination `name`, built by the wiring module of its kind.
        ///
        /// # Errors
        /// The wiring module refuses the destination (a bad URL, a client that cannot be built),
        /// or its kind's feature is not compiled in.
        pub async fn publisher(
            settings: &::queuebox_config::Settings,
            name: &str,
            destination: &::queuebox_config::Destination,
        ) -> anyhow::Result<Arc<dyn ::queuebox_ports::publish::Publisher>> {
            use ::queuebox_config::DestinationKind;
            match &destination.kind {
                DestinationKind::Http(config) => {
                    http::publisher(settings, name, destination, config).await
                }
                $(
                    #[cfg(feature = $name)]
                    DestinationKind::$kind(config) => {
                        $wiring::publisher(settings, name, destination, config).await
                    }
                    #[cfg(not(feature = $name))]
                    DestinationKind::$kind(_) => anyhow::bail!(features::destination_missing(
                        Feature::$kind,
                        name,
                        &destination.kind,
                    )),
                )*
            }
        }

        /// Starts source `name`: an HTTP source becomes a route; a broker source's wiring module
        /// builds its client, which the application's source driver runs (store, settle,
        /// reconnect, health `<kind>.<name>`).
        ///
        /// # Errors
        /// The wiring module cannot build the source's client, or its kind's feature is not
        /// compiled in.
        pub async fn start_source(
            context: &SourceContext<'_>,
            name: &str,
            source: &::queuebox_config::Source,
        ) -> anyhow::Result<StartedSource> {
            use ::queuebox_config::SourceKind;
            match &source.kind {
                SourceKind::Http(config) => Ok(http::source(context.settings, name, config)),
                $(
                    #[cfg(feature = $name)]
                    SourceKind::$kind(config) => Ok(StartedSource::Consumer(SourceConsumer::driven(
                        $wiring::client(name, config)?,
                        Arc::clone(context.ingest),
                    ))),
                    #[cfg(not(feature = $name))]
                    SourceKind::$kind(_) => anyhow::bail!(features::source_missing(
                        Feature::$kind,
                        name,
                        &source.kind,
                    )),
                )*
            }
        }

        /// The header names a broker source reads its attributes from (its `attributeHeaders`
        /// block); `None` for an HTTP source, whose attributes come from the body (and a
        /// provider's signature headers) alone. Read whatever the build: the ingest pipeline
        /// is set up from the configuration, and the start check refuses a missing feature.
        pub fn attribute_headers(
            kind: &::queuebox_config::SourceKind,
        ) -> Option<&::queuebox_config::AttributeHeaders> {
            use ::queuebox_config::SourceKind;
            match kind {
                SourceKind::Http(_) => None,
                $(SourceKind::$kind(config) => Some(&config.$headers),)*
            }
        }
    };
}

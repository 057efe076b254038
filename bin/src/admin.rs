//! Wiring of the admin routes: the credential check of `admin.auth`, the replay use case over the
//! outbox table and the configured routes, and the JSONata transformer of the transform test.

use crate::delivery::route_specs;
use crate::ingest::credential_check;
use anyhow::Context as _;
use queuebox_application::replay::{DEFAULT_REPLAY_BATCH, ReplayService};
use queuebox_config::Settings;
use queuebox_domain::router::Router;
use queuebox_http::{AdminRoutes, ConsoleRoutes};
use queuebox_ports::database::DatabaseBackend;
use queuebox_transform::JsonataTransformer;
use std::sync::Arc;

/// The admin routes, or `None` when `admin.enabled` is false (their paths then answer 404).
///
/// # Errors
/// The routes do not compile (the configuration loader checks them first, so this is a last
/// guard).
pub fn routes(
    settings: &Settings,
    database: &dyn DatabaseBackend,
) -> anyhow::Result<Option<AdminRoutes>> {
    let admin = &settings.admin;
    if !admin.enabled {
        return Ok(None);
    }
    // The loader refuses `enabled` without `auth` unless `insecure` is set; say so loudly.
    if admin.auth.is_none() {
        tracing::warn!(
            "admin.insecure is true: the admin routes accept requests without credentials"
        );
    }
    let router = Router::new(
        &route_specs(settings),
        settings.destinations.keys().map(String::as_str),
    )
    .context("routes")?;
    let console = if admin.console.enabled {
        let store = database.console_store().with_context(|| {
            format!(
                "admin.console.enabled: the {} backend has no console",
                database.kind().product()
            )
        })?;
        Some(ConsoleRoutes {
            store,
            router: Arc::new(router.clone()),
            destinations: settings.destinations.keys().cloned().collect(),
        })
    } else {
        None
    };
    let replay = ReplayService::new(database.replay_store(), router, DEFAULT_REPLAY_BATCH);
    Ok(Some(AdminRoutes {
        auth: admin.auth.as_ref().map(credential_check),
        max_payload_bytes: admin.max_payload_bytes,
        replay: Arc::new(replay),
        // Its own transformer, so the slow evaluations a caller can start here share a lane of
        // their own and never take the lane of the delivery transforms.
        transformer: Arc::new(JsonataTransformer::new()),
        max_transform_timeout: admin.max_transform_timeout,
        console,
    }))
}

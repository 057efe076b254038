//! Wiring of change data capture (`outbox.capture`): the replica that owns the identity runs the
//! capture runner; every other replica in a capture mode follows the owner's wake-ups. Both hand the
//! dispatcher the wake-up it waits on.

use anyhow::Context as _;
use queuebox_application::capture::{
    CaptureOptions, CaptureRunner, DeliveryWake, IdleWaking, follow_wakes,
};
use queuebox_application::dispatcher::Dispatcher;
use queuebox_application::health::HealthRegistry;
use queuebox_application::lifecycle::Workers;
use queuebox_config::CaptureMode;
use queuebox_config::Settings;
use queuebox_domain::capture::CaptureScope;
use queuebox_ports::capture::CaptureRequest;
use queuebox_ports::database::{DatabaseBackend, DatabaseKind};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often the owner writes its handled position to `offsets.dat`.
const OFFSETS_EVERY: Duration = Duration::from_secs(1);
/// How often it records the position in `queuebox_capture_state` and reads the slot lag.
const RECORD_EVERY: Duration = Duration::from_secs(5);

/// What this replica does for capture.
pub enum Capture {
    /// `outbox.capture.mode: polling`.
    Off,
    /// Owns the identity.
    Owner(Box<CaptureRunner>, DeliveryWake, Duration),
    /// Follows the owner's wake-ups (`enabled: false` in a capture mode).
    Follower(
        Arc<dyn queuebox_ports::capture::WakeChannel>,
        String,
        DeliveryWake,
    ),
}

impl Capture {
    /// Builds what `settings` asks for over `database`.
    ///
    /// # Errors
    /// The database product cannot capture in the configured mode.
    pub fn wire(settings: &Settings, database: &dyn DatabaseBackend) -> anyhow::Result<Self> {
        let capture = &settings.outbox.capture;
        if capture.mode == CaptureMode::Polling {
            return Ok(Capture::Off);
        }
        let wake = DeliveryWake::new();
        if !capture.enabled {
            return Ok(Capture::Follower(
                database.wake_channel(),
                capture.identity.clone(),
                wake,
            ));
        }
        let request = request(settings, database.kind())?;
        let scope = request.scope.clone();
        let ports = database.capture_ports(request).context("outbox.capture")?;
        let runner = CaptureRunner::new(
            ports,
            CaptureOptions {
                identity: capture.identity.clone(),
                scope,
                state_directory: PathBuf::from(&capture.state_directory),
                owner_host: owner_host(),
                offsets_every: OFFSETS_EVERY,
                record_every: RECORD_EVERY,
            },
            wake.clone(),
        );
        Ok(Capture::Owner(
            Box::new(runner),
            wake,
            capture.reconciliation_interval,
        ))
    }

    /// Lets the capture wake-up drive `dispatcher`.
    pub fn drive(&self, dispatcher: Dispatcher) -> Dispatcher {
        match self {
            Capture::Off => dispatcher,
            Capture::Owner(_, wake, reconciliation) => {
                dispatcher.woken_by(wake.clone(), IdleWaking::Reconcile(*reconciliation))
            }
            Capture::Follower(_, _, wake) => dispatcher.woken_by(wake.clone(), IdleWaking::Poll),
        }
    }

    /// Starts the capture worker, if any, and registers the advisory `outbox-capture` component
    /// on the owner.
    pub fn spawn(self, workers: &mut Workers, health: &mut HealthRegistry) {
        match self {
            Capture::Off => {}
            Capture::Owner(runner, _, _) => {
                health.register(runner.health_check());
                workers.spawn("outbox-capture", move |stop| runner.run(stop));
            }
            Capture::Follower(wakes, identity, wake) => {
                workers.spawn("outbox-capture-follower", move |stop| {
                    follow_wakes(wakes, identity, wake, stop)
                });
            }
        }
    }
}

/// The capture connection: `database.*` with the `outbox.capture.connection.*` overrides.
fn request(settings: &Settings, kind: DatabaseKind) -> anyhow::Result<CaptureRequest> {
    let capture = &settings.outbox.capture;
    let connection = &capture.connection;
    let target = &settings.database.target;
    let first = target.hosts.first();
    let host = match (&connection.hostname, target.hosts.len()) {
        (Some(host), _) => host.clone(),
        (None, 1) => first.map(|h| h.host.clone()).unwrap_or_default(),
        (None, _) => anyhow::bail!(
            "outbox.capture.connection.hostname is required because database.url names several hosts: capture reads from one"
        ),
    };
    let default_port = match kind {
        DatabaseKind::Postgresql => 5432,
        DatabaseKind::Sqlserver => 1433,
    };
    // The URL's port belongs to the URL's host: an overridden host takes the default port unless
    // one is given.
    let port = connection
        .port
        .or_else(|| {
            connection
                .hostname
                .is_none()
                .then(|| first.and_then(|h| h.port))
                .flatten()
        })
        .unwrap_or(default_port);
    let default_schema = match kind {
        DatabaseKind::Postgresql => "public",
        DatabaseKind::Sqlserver => "dbo",
    };
    let mode = match capture.mode {
        CaptureMode::PostgresLogical => "postgres-logical",
        CaptureMode::SqlserverCdc => "sqlserver-cdc",
        CaptureMode::Polling => "polling",
    };
    Ok(CaptureRequest {
        identity: capture.identity.clone(),
        scope: CaptureScope {
            mode: mode.to_owned(),
            host,
            port,
            database: connection
                .database
                .clone()
                .unwrap_or_else(|| target.database.clone()),
            schema: capture
                .schema
                .clone()
                .unwrap_or_else(|| default_schema.to_owned()),
            table: settings.database.schema.outbox_table.clone(),
            slot: capture.slot.clone(),
            publication: capture.publication.clone(),
        },
        username: connection
            .username
            .clone()
            .unwrap_or_else(|| target.username.clone()),
        password: connection
            .password
            .clone()
            .unwrap_or_else(|| target.password.clone()),
        params: target.params.clone(),
    })
}

/// Who owns the identity, for `queuebox_capture_state.owner_host`: the host name and process id.
fn owner_host() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    // The column holds 255 characters.
    format!("{host} pid {}", std::process::id())
        .chars()
        .take(255)
        .collect()
}

//! `outbox.*` and `outbox.capture.*`.

use super::{Case, Floor, choice, flag, millis, port, positive, secret, text, text_or};
use crate::catalog::Doc;
use crate::model::{CaptureConnection, CaptureMode, CaptureSettings, OutboxSettings};
use crate::reader::{Block, Reader};
use queuebox_domain::mapping::is_sql_identifier;
use serde_json::Value;

pub(super) fn read(r: &mut Reader, value: Option<&Value>) -> OutboxSettings {
    let mut b = Block::open(r, value, "outbox");
    let settings = OutboxSettings {
        poll_interval: millis(r, &mut b, "pollIntervalMs", 100, Floor::AboveZero),
        batch_size: positive(r, &mut b, "batchSize", 100),
        concurrency: positive(r, &mut b, "concurrency", 8),
        retry_base_delay: millis(r, &mut b, "retryBaseDelayMs", 1000, Floor::Zero),
        max_attempts: positive(r, &mut b, "maxAttempts", 5),
        claim_timeout: millis(r, &mut b, "claimTimeoutMs", 300_000, Floor::AboveZero),
        pending_gauge_interval: millis(r, &mut b, "pendingGaugeIntervalMs", 5000, Floor::Zero),
        shutdown_timeout: millis(r, &mut b, "shutdownTimeoutMs", 30_000, Floor::Zero),
        capture: read_capture(r, &mut b),
    };
    b.finish(r);
    settings
}

/// The rule of `identity`, `slot` and `publication`: a lower-case letter, then lower-case letters,
/// digits and `_`, at most 63 characters (the PostgreSQL name limit, since the slot and publication
/// are server objects).
fn is_capture_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn capture_name(r: &mut Reader, b: &mut Block<'_>, key: &'static str, default: &str) -> String {
    r.describe(
        &b.path_of(key),
        Doc::default().allowed("a lower-case letter, then `a-z`, `0-9`, `_`; at most 63"),
    );
    let value = text_or(r, b, key, default);
    if !is_capture_name(&value) {
        r.problem(
            b.path_of(key),
            format!(
                "must be a lower-case letter, then lower-case letters, digits and `_`, at most 63 characters, got `{value}`"
            ),
        );
    }
    value
}

fn read_capture(r: &mut Reader, parent: &mut Block<'_>) -> CaptureSettings {
    let value = parent.get("capture");
    let mut b = Block::open(r, value, &parent.path_of("capture"));
    let mode = choice(
        r,
        &mut b,
        "mode",
        &[
            ("polling", CaptureMode::Polling),
            ("postgres-logical", CaptureMode::PostgresLogical),
            ("sqlserver-cdc", CaptureMode::SqlserverCdc),
        ],
        Case::Any,
        CaptureMode::Polling,
    );
    let enabled = flag(r, &mut b, "enabled", false);
    let identity = capture_name(r, &mut b, "identity", "queuebox");
    let state_directory = text_or(r, &mut b, "stateDirectory", "");
    // The capture wiring falls back to the database's default schema.
    r.describe(
        &b.path_of("schema"),
        Doc::default()
            .default_text("`public`")
            .allowed(super::database::IDENTIFIER),
    );
    let schema = text(r, &mut b, "schema");
    if let Some(schema) = &schema
        && !is_sql_identifier(schema)
    {
        r.problem(
            b.path_of("schema"),
            format!("`{schema}` is not a SQL identifier: use a letter or `_` first, then letters, digits and `_`"),
        );
    }
    let publication = capture_name(r, &mut b, "publication", "queuebox_outbox");
    let slot = capture_name(r, &mut b, "slot", "queuebox_outbox");
    let reconciliation_interval = millis(
        r,
        &mut b,
        "reconciliationIntervalMs",
        1000,
        Floor::AboveZero,
    );
    if enabled && mode == CaptureMode::Polling {
        r.problem(
            b.path_of("enabled"),
            "capture needs outbox.capture.mode postgres-logical or sqlserver-cdc, but the mode is polling",
        );
    }
    if enabled && state_directory.trim().is_empty() {
        r.problem(
            b.path_of("stateDirectory"),
            "is required when outbox.capture.enabled is true: capture keeps its log position there",
        );
    }
    let connection = read_connection(r, &mut b);
    b.finish(r);
    CaptureSettings {
        mode,
        enabled,
        identity,
        state_directory,
        schema,
        publication,
        slot,
        reconciliation_interval,
        connection,
    }
}

fn read_connection(r: &mut Reader, parent: &mut Block<'_>) -> CaptureConnection {
    let value = parent.get("connection");
    let mut b = Block::open(r, value, &parent.path_of("connection"));
    let connection = CaptureConnection {
        hostname: text(r, &mut b, "hostname").filter(|h| !h.trim().is_empty()),
        port: port(r, &mut b, "port"),
        database: text(r, &mut b, "database"),
        username: text(r, &mut b, "username"),
        password: secret(r, &mut b, "password"),
        encrypt: flag(r, &mut b, "encrypt", true),
        trust_server_certificate: flag(r, &mut b, "trustServerCertificate", false),
    };
    b.finish(r);
    connection
}

//! One test per rule of the server, database, outbox, capture, inbox, admin and retention sections:
//! each asserts that the message names the key and its variable.
#![allow(clippy::unwrap_used)]

mod common;
use common::{BASE, assert_refused, load_yaml, ok, problems, problems_of};
use queuebox_config::{CaptureMode, RetentionKind};
use std::time::Duration;

#[test]
fn defaults_of_a_minimal_file() {
    let s = ok("").settings;
    assert_eq!(s.server.http_port, 8080);
    assert_eq!(s.server.management_port, None);
    assert_eq!(s.database.pool_size, 10);
    assert_eq!(s.database.connection_timeout, Duration::from_millis(30_000));
    assert_eq!(s.database.startup_timeout, Duration::from_millis(60_000));
    assert!(s.database.migrate);
    assert_eq!(s.outbox.poll_interval, Duration::from_millis(100));
    assert_eq!(s.outbox.batch_size, 100);
    assert_eq!(s.outbox.concurrency, 8);
    assert_eq!(s.outbox.retry_base_delay, Duration::from_millis(1000));
    assert_eq!(s.outbox.max_attempts, 5);
    assert_eq!(s.outbox.claim_timeout, Duration::from_millis(300_000));
    assert_eq!(s.outbox.pending_gauge_interval, Duration::from_millis(5000));
    assert_eq!(s.outbox.shutdown_timeout, Duration::from_millis(30_000));
    assert_eq!(s.outbox.capture.mode, CaptureMode::Polling);
    assert_eq!(s.outbox.capture.identity, "queuebox");
    assert_eq!(s.outbox.capture.slot, "queuebox_outbox");
    assert_eq!(s.outbox.capture.publication, "queuebox_outbox");
    assert_eq!(s.inbox.base_path, "/inbox");
    assert_eq!(s.inbox.max_body_bytes, 1_048_576);
    assert!(s.inbox.relay.enabled);
    assert_eq!(
        s.inbox.relay.max_attempts, 5,
        "defaults to outbox.maxAttempts"
    );
    assert_eq!(s.http.max_error_body_bytes, 2048);
    assert!(!s.admin.enabled);
    assert_eq!(s.admin.max_payload_bytes, 65_536);
    assert!(!s.retention.enabled);
    assert_eq!(s.retention.outbox.policy, RetentionKind::Disabled);
    assert_eq!(
        s.retention.outbox.cleanup_interval,
        Duration::from_secs(3600)
    );
    assert_eq!(s.retention.inbox.batch_size, 1000);
}

#[test]
fn relay_max_attempts_follows_outbox_max_attempts() {
    let s = ok("outbox:\n  maxAttempts: 9\n").settings;
    assert_eq!(s.inbox.relay.max_attempts, 9);
}

// --- server ---------------------------------------------------------------------------------

#[test]
fn http_port_must_be_a_port() {
    assert_refused(
        "server:\n  httpPort: 0\n",
        "server.httpPort",
        "QUEUEBOX_SERVER_HTTPPORT",
        "must be from 1 to 65535, got 0",
    );
    assert_refused(
        "server:\n  httpPort: 70000\n",
        "server.httpPort",
        "QUEUEBOX_SERVER_HTTPPORT",
        "got 70000",
    );
}

#[test]
fn management_port_must_be_a_port() {
    assert_refused(
        "server:\n  managementPort: -1\n",
        "server.managementPort",
        "QUEUEBOX_SERVER_MANAGEMENTPORT",
        "must be from 1 to 65535",
    );
}

#[test]
fn management_port_must_differ_from_http_port() {
    assert_refused(
        "server:\n  httpPort: 8080\n  managementPort: 8080\n",
        "server.managementPort",
        "QUEUEBOX_SERVER_MANAGEMENTPORT",
        "must differ from server.httpPort",
    );
}

#[test]
fn a_port_must_be_a_number() {
    assert_refused(
        "server:\n  httpPort: eighty\n",
        "server.httpPort",
        "QUEUEBOX_SERVER_HTTPPORT",
        "must be a whole number",
    );
}

// --- database -------------------------------------------------------------------------------

#[test]
fn database_type_is_postgresql_or_sqlserver() {
    assert_refused(
        "  type: oracle\n",
        "database.type",
        "QUEUEBOX_DATABASE_TYPE",
        "must be one of postgresql, sqlserver",
    );
}

#[test]
fn database_url_is_required() {
    let lines = problems_of("database:\n  username: u\n  password: p\n", &[]);
    assert!(
        lines
            .iter()
            .any(|l| l == "database.url (QUEUEBOX_DATABASE_URL): is required"),
        "{lines:?}"
    );
}

#[test]
fn database_url_must_have_a_known_form() {
    let lines = problems_of(
        "database:\n  url: mysql://db/q\n  username: u\n  password: p\n",
        &[],
    );
    assert!(
        lines.iter().any(|l| l.starts_with(
            "database.url (QUEUEBOX_DATABASE_URL): must start with jdbc:postgresql://"
        )),
        "{lines:?}"
    );
}

#[test]
fn database_url_must_match_database_type() {
    let lines = problems_of(
        "database:\n  type: sqlserver\n  url: jdbc:postgresql://db/q\n  username: u\n  password: p\n",
        &[],
    );
    assert!(lines.iter().any(|l| l.starts_with("database.url (QUEUEBOX_DATABASE_URL): is a postgresql URL, but database.type is sqlserver")), "{lines:?}");
}

#[test]
fn database_username_is_required() {
    let lines = problems_of(
        "database:\n  url: jdbc:postgresql://db/q\n  password: p\n",
        &[],
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("database.username (QUEUEBOX_DATABASE_USERNAME): is required")),
        "{lines:?}"
    );
}

#[test]
fn database_password_is_required() {
    let lines = problems_of(
        "database:\n  url: jdbc:postgresql://db/q\n  username: u\n",
        &[],
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("database.password (QUEUEBOX_DATABASE_PASSWORD): is required")),
        "{lines:?}"
    );
}

#[test]
fn pool_size_must_be_above_zero() {
    assert_refused(
        "  poolSize: 0\n",
        "database.poolSize",
        "QUEUEBOX_DATABASE_POOLSIZE",
        "must be above 0, got 0",
    );
}

#[test]
fn table_names_must_be_identifiers() {
    assert_refused(
        "  migrate: false\n  outboxTableName: 1bad\n",
        "database.outboxTableName",
        "QUEUEBOX_DATABASE_OUTBOXTABLENAME",
        "is not a SQL identifier",
    );
    assert_refused(
        "  migrate: false\n  inboxTableName: in-box\n",
        "database.inboxTableName",
        "QUEUEBOX_DATABASE_INBOXTABLENAME",
        "is not a SQL identifier",
    );
}

#[test]
fn column_names_must_be_identifiers() {
    assert_refused(
        "  migrate: false\n  columnMapping:\n    outbox:\n      payload: \"x;drop\"\n",
        "database.columnMapping.outbox.payload",
        "QUEUEBOX_DATABASE_COLUMNMAPPING_OUTBOX_PAYLOAD",
        "is not a SQL identifier",
    );
}

#[test]
fn renamed_tables_and_columns_need_migrate_false() {
    let extra = "  outboxTableName: qb_outbox\n  columnMapping:\n    inbox:\n      idempotencyKey: dedup_key\n";
    let lines = problems(extra);
    for (path, var) in [
        (
            "database.outboxTableName",
            "QUEUEBOX_DATABASE_OUTBOXTABLENAME",
        ),
        (
            "database.columnMapping.inbox.idempotencyKey",
            "QUEUEBOX_DATABASE_COLUMNMAPPING_INBOX_IDEMPOTENCYKEY",
        ),
    ] {
        let prefix =
            format!("{path} ({var}): renames a table or column while database.migrate is true");
        assert!(
            lines.iter().any(|l| l.starts_with(&prefix)),
            "{prefix}\n{lines:?}"
        );
    }
    let s = ok(&format!("  migrate: false\n{extra}")).settings;
    assert_eq!(s.database.schema.outbox_table, "qb_outbox");
    assert_eq!(
        s.database.schema.inbox.get("idempotencyKey"),
        Some("dedup_key")
    );
    assert_eq!(s.database_options().schema.outbox_table, "qb_outbox");
}

// --- outbox ---------------------------------------------------------------------------------

#[test]
fn outbox_batch_size_message_is_exact() {
    let lines = problems("outbox:\n  batchSize: 0\n");
    assert!(
        lines.contains(
            &"outbox.batchSize (QUEUEBOX_OUTBOX_BATCHSIZE): must be above 0, got 0".to_owned()
        ),
        "{lines:?}"
    );
}

#[test]
fn outbox_positive_values() {
    assert_refused(
        "outbox:\n  pollIntervalMs: 0\n",
        "outbox.pollIntervalMs",
        "QUEUEBOX_OUTBOX_POLLINTERVALMS",
        "must be above 0",
    );
    assert_refused(
        "outbox:\n  concurrency: -2\n",
        "outbox.concurrency",
        "QUEUEBOX_OUTBOX_CONCURRENCY",
        "must be above 0, got -2",
    );
    assert_refused(
        "outbox:\n  maxAttempts: 0\n",
        "outbox.maxAttempts",
        "QUEUEBOX_OUTBOX_MAXATTEMPTS",
        "must be above 0",
    );
}

// --- capture --------------------------------------------------------------------------------

#[test]
fn capture_mode_is_an_enumeration() {
    assert_refused(
        "outbox:\n  capture:\n    mode: debezium\n",
        "outbox.capture.mode",
        "QUEUEBOX_OUTBOX_CAPTURE_MODE",
        "must be one of polling, postgres-logical, sqlserver-cdc",
    );
}

#[test]
fn capture_enabled_needs_a_mode_other_than_polling() {
    assert_refused(
        "outbox:\n  capture:\n    enabled: true\n    stateDirectory: /tmp/x\n",
        "outbox.capture.enabled",
        "QUEUEBOX_OUTBOX_CAPTURE_ENABLED",
        "the mode is polling",
    );
}

#[test]
fn capture_enabled_needs_a_state_directory() {
    assert_refused(
        "outbox:\n  capture:\n    enabled: true\n    mode: postgres-logical\n",
        "outbox.capture.stateDirectory",
        "QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY",
        "is required when outbox.capture.enabled is true",
    );
}

#[test]
fn capture_names_follow_the_pattern() {
    assert_refused(
        "outbox:\n  capture:\n    identity: Queue\n",
        "outbox.capture.identity",
        "QUEUEBOX_OUTBOX_CAPTURE_IDENTITY",
        "must be a lower-case letter",
    );
    assert_refused(
        "outbox:\n  capture:\n    slot: 1slot\n",
        "outbox.capture.slot",
        "QUEUEBOX_OUTBOX_CAPTURE_SLOT",
        "must be a lower-case letter",
    );
    let long = "p".repeat(64);
    assert_refused(
        &format!("outbox:\n  capture:\n    publication: {long}\n"),
        "outbox.capture.publication",
        "QUEUEBOX_OUTBOX_CAPTURE_PUBLICATION",
        "at most 63",
    );
    assert_eq!(
        ok(&format!(
            "outbox:\n  capture:\n    publication: {}\n",
            "p".repeat(63)
        ))
        .settings
        .outbox
        .capture
        .publication
        .len(),
        63
    );
}

#[test]
fn capture_reconciliation_interval_must_be_above_zero() {
    assert_refused(
        "outbox:\n  capture:\n    reconciliationIntervalMs: 0\n",
        "outbox.capture.reconciliationIntervalMs",
        "QUEUEBOX_OUTBOX_CAPTURE_RECONCILIATIONINTERVALMS",
        "must be above 0",
    );
}

#[test]
fn postgres_logical_needs_postgresql() {
    let yaml = "database:\n  type: sqlserver\n  url: jdbc:sqlserver://db:1433;databaseName=q\n  username: u\n  password: p\noutbox:\n  capture:\n    mode: postgres-logical\n";
    let lines = problems_of(yaml, &[]);
    assert!(lines.iter().any(|l| l.starts_with("outbox.capture.mode (QUEUEBOX_OUTBOX_CAPTURE_MODE): this mode needs database.type postgresql")), "{lines:?}");
}

#[test]
fn sqlserver_cdc_needs_sqlserver() {
    assert_refused(
        "outbox:\n  capture:\n    mode: sqlserver-cdc\n",
        "outbox.capture.mode",
        "QUEUEBOX_OUTBOX_CAPTURE_MODE",
        "this mode needs database.type sqlserver",
    );
}

#[test]
fn capture_hostname_is_required_with_several_hosts() {
    let yaml = "database:\n  url: jdbc:postgresql://db1:5432,db2:5432/q\n  username: u\n  password: p\noutbox:\n  capture:\n    mode: postgres-logical\n";
    let lines = problems_of(yaml, &[]);
    assert!(lines.iter().any(|l| l.starts_with("outbox.capture.connection.hostname (QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_HOSTNAME): is required because database.url names several hosts")), "{lines:?}");
    let fixed = format!("{yaml}    connection:\n      hostname: db1\n");
    assert!(load_yaml(&fixed, &[]).is_ok());
}

#[test]
fn capture_connection_port_must_be_a_port() {
    assert_refused(
        "outbox:\n  capture:\n    connection:\n      port: 0\n",
        "outbox.capture.connection.port",
        "QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_PORT",
        "must be from 1 to 65535",
    );
}

#[test]
fn capture_connection_defaults() {
    let c = ok("").settings.outbox.capture.connection;
    assert!(c.encrypt);
    assert!(!c.trust_server_certificate);
    assert!(c.hostname.is_none());
}

// --- inbox ----------------------------------------------------------------------------------

#[test]
fn inbox_max_body_bytes_must_be_above_zero() {
    assert_refused(
        "inbox:\n  maxBodyBytes: 0\n",
        "inbox.maxBodyBytes",
        "QUEUEBOX_INBOX_MAXBODYBYTES",
        "must be above 0",
    );
}

#[test]
fn relay_max_attempts_must_be_above_zero() {
    assert_refused(
        "inbox:\n  relay:\n    maxAttempts: 0\n",
        "inbox.relay.maxAttempts",
        "QUEUEBOX_INBOX_RELAY_MAXATTEMPTS",
        "must be above 0",
    );
}

#[test]
fn inbox_base_path_starts_with_a_slash() {
    assert_refused(
        "inbox:\n  basePath: inbox\n",
        "inbox.basePath",
        "QUEUEBOX_INBOX_BASEPATH",
        "must start with `/`",
    );
}

// --- admin ----------------------------------------------------------------------------------

#[test]
fn admin_enabled_needs_auth_unless_insecure() {
    assert_refused(
        "admin:\n  enabled: true\n",
        "admin.enabled",
        "QUEUEBOX_ADMIN_ENABLED",
        "need admin.auth",
    );
    let s = ok("admin:\n  enabled: true\n  insecure: true\n").settings;
    assert!(s.admin.enabled && s.admin.insecure && s.admin.auth.is_none());
    let s = ok("admin:\n  enabled: true\n  auth:\n    type: bearer\n    token: t0k\n").settings;
    assert!(s.admin.auth.is_some());
}

// --- retention ------------------------------------------------------------------------------

#[test]
fn retention_policies_are_upper_case_enumerations() {
    assert_refused(
        "retention:\n  outbox:\n    policy: age\n",
        "retention.outbox.policy",
        "QUEUEBOX_RETENTION_OUTBOX_POLICY",
        "must be one of AGE, COUNT, DISABLED (in this letter case), got `age`",
    );
}

#[test]
fn inbox_retention_has_no_count_policy() {
    assert_refused(
        "retention:\n  inbox:\n    policy: COUNT\n    maxCount: 5\n",
        "retention.inbox.policy",
        "QUEUEBOX_RETENTION_INBOX_POLICY",
        "must be one of AGE, DISABLED",
    );
}

#[test]
fn retention_durations_have_a_unit() {
    assert_refused(
        "retention:\n  outbox:\n    policy: AGE\n    maxAge: 7\n",
        "retention.outbox.maxAge",
        "QUEUEBOX_RETENTION_OUTBOX_MAXAGE",
        "one of s, m, h, d",
    );
    assert_refused(
        "retention:\n  inbox:\n    cleanupInterval: 1w\n",
        "retention.inbox.cleanupInterval",
        "QUEUEBOX_RETENTION_INBOX_CLEANUPINTERVAL",
        "one of s, m, h, d",
    );
}

#[test]
fn age_policy_needs_max_age() {
    assert_refused(
        "retention:\n  outbox:\n    policy: AGE\n",
        "retention.outbox.maxAge",
        "QUEUEBOX_RETENTION_OUTBOX_MAXAGE",
        "is required by policy AGE",
    );
}

#[test]
fn count_policy_needs_a_positive_max_count() {
    assert_refused(
        "retention:\n  outbox:\n    policy: COUNT\n",
        "retention.outbox.maxCount",
        "QUEUEBOX_RETENTION_OUTBOX_MAXCOUNT",
        "is required by policy COUNT",
    );
    assert_refused(
        "retention:\n  outbox:\n    policy: COUNT\n    maxCount: 0\n",
        "retention.outbox.maxCount",
        "QUEUEBOX_RETENTION_OUTBOX_MAXCOUNT",
        "must be above 0",
    );
}

#[test]
fn retention_batch_size_must_be_above_zero() {
    assert_refused(
        "retention:\n  inbox:\n    batchSize: 0\n",
        "retention.inbox.batchSize",
        "QUEUEBOX_RETENTION_INBOX_BATCHSIZE",
        "must be above 0",
    );
}

#[test]
fn retention_values_load() {
    let s = ok("retention:\n  enabled: true\n  outbox:\n    policy: COUNT\n    maxCount: 500\n    cleanupInterval: 15m\n  inbox:\n    policy: AGE\n    maxAge: 30d\n").settings;
    assert_eq!(s.retention.outbox.max_count, Some(500));
    assert_eq!(
        s.retention.outbox.cleanup_interval,
        Duration::from_secs(900)
    );
    assert_eq!(
        s.retention.inbox.max_age,
        Some(Duration::from_secs(30 * 86_400))
    );
}

// --- all at once ----------------------------------------------------------------------------

#[test]
fn every_problem_of_a_load_is_reported_at_once() {
    let yaml = format!(
        "{BASE}server:\n  httpPort: 0\noutbox:\n  batchSize: 0\n  concurrency: 0\nretention:\n  outbox:\n    policy: nope\n"
    );
    let error = load_yaml(&yaml, &[]).unwrap_err();
    assert_eq!(error.problems().len(), 4, "{error}");
    let text = error.to_string();
    assert!(
        text.starts_with("invalid configuration (4 problems):"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 5, "one line per problem:\n{text}");
}

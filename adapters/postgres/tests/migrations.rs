//! The migration runner against a real PostgreSQL, each test on a fresh database.

mod common;

use common::{TestDb, renamed_schema};
use queuebox_domain::mapping::SchemaNames;
use queuebox_postgres::{MigrationReport, PostgresError, checksum, connect, migration_files};
use sqlx::{AssertSqlSafe, Connection};

type Row = (i32, String, String, String);

/// (column, data type, max length, nullable, default).
type ColumnRow = (String, String, Option<i32>, String, Option<String>);

/// The history, without times: (version, script, checksum, how).
async fn history(db: &TestDb) -> Vec<Row> {
    let mut session = db.session().await;
    let rows = sqlx::query_as(
        "SELECT version, script, checksum, how FROM queuebox_schema_history ORDER BY version",
    )
    .fetch_all(&mut session)
    .await
    .expect("read the history");
    let _ = session.close().await;
    rows
}

fn all_versions() -> Vec<i32> {
    migration_files().iter().map(|m| m.version).collect()
}

/// The columns of `table` in the current schema, by name.
async fn columns(db: &TestDb, table: &str) -> Vec<ColumnRow> {
    let mut session = db.session().await;
    let rows = sqlx::query_as(
        "SELECT column_name::text, data_type::text, character_maximum_length::int,
                is_nullable::text, column_default::text
           FROM information_schema.columns
          WHERE table_schema = current_schema() AND table_name = $1
          ORDER BY column_name",
    )
    .bind(table)
    .fetch_all(&mut session)
    .await
    .expect("read columns");
    let _ = session.close().await;
    rows
}

async fn indexes(db: &TestDb, table: &str) -> Vec<(String, String)> {
    let mut session = db.session().await;
    let rows = sqlx::query_as(
        "SELECT indexname::text, indexdef FROM pg_indexes
          WHERE schemaname = current_schema() AND tablename = $1 ORDER BY indexname",
    )
    .bind(table)
    .fetch_all(&mut session)
    .await
    .expect("read indexes");
    let _ = session.close().await;
    rows
}

async fn constraints(db: &TestDb, table: &str) -> Vec<(String, String)> {
    let mut session = db.session().await;
    let rows = sqlx::query_as(
        "SELECT c.conname::text, pg_get_constraintdef(c.oid)
           FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
          WHERE t.relname = $1 AND t.relnamespace = current_schema()::regnamespace
          ORDER BY c.conname",
    )
    .bind(table)
    .fetch_all(&mut session)
    .await
    .expect("read constraints");
    let _ = session.close().await;
    rows
}

fn col(
    name: &str,
    data_type: &str,
    length: Option<i32>,
    nullable: bool,
    default: Option<&str>,
) -> ColumnRow {
    (
        name.to_owned(),
        data_type.to_owned(),
        length,
        if nullable { "YES" } else { "NO" }.to_owned(),
        default.map(str::to_owned),
    )
}

const TZ: &str = "timestamp with time zone";
const VC: &str = "character varying";

/// The outbox table page, column by column.
fn expected_outbox() -> Vec<ColumnRow> {
    let mut rows = vec![
        col("id", "uuid", None, false, Some("gen_random_uuid()")),
        col("topic", VC, Some(255), false, None),
        col("key", VC, Some(255), true, None),
        col("payload", "jsonb", None, false, None),
        col("headers", "jsonb", None, false, Some("'{}'::jsonb")),
        col("aggregate_type", VC, Some(255), true, None),
        col(
            "state",
            VC,
            Some(50),
            false,
            Some("'pending'::character varying"),
        ),
        col("attempt", "integer", None, false, Some("0")),
        col("max_attempts", "integer", None, false, Some("5")),
        col("scheduled_at", TZ, None, false, Some("CURRENT_TIMESTAMP")),
        col("created_at", TZ, None, false, Some("CURRENT_TIMESTAMP")),
        col("updated_at", TZ, None, false, Some("CURRENT_TIMESTAMP")),
        col("claimed_at", TZ, None, true, None),
        col("claim_token", "uuid", None, true, None),
        col("lease_expires_at", TZ, None, true, None),
        col("last_error", "text", None, true, None),
        col(
            "sequence",
            "bigint",
            None,
            false,
            Some("nextval('outbox_sequence_seq'::regclass)"),
        ),
    ];
    rows.sort();
    rows
}

/// The inbox table page, column by column.
fn expected_inbox() -> Vec<ColumnRow> {
    let mut rows = vec![
        col("id", "uuid", None, false, Some("gen_random_uuid()")),
        col("source", VC, Some(255), false, None),
        col("idempotency_key", VC, Some(255), false, None),
        col("aggregate_id", VC, Some(255), true, None),
        col("event_type", VC, Some(255), true, None),
        col("payload", "jsonb", None, false, None),
        col("headers", "jsonb", None, false, Some("'{}'::jsonb")),
        col("correlation_id", VC, Some(128), true, None),
        col(
            "consumption",
            VC,
            Some(4),
            false,
            Some("'push'::character varying"),
        ),
        col(
            "state",
            VC,
            Some(50),
            false,
            Some("'pending'::character varying"),
        ),
        col("created_at", TZ, None, false, Some("CURRENT_TIMESTAMP")),
        col("processed_at", TZ, None, true, None),
        col("scheduled_at", TZ, None, false, Some("CURRENT_TIMESTAMP")),
        col("attempt", "integer", None, false, Some("0")),
        col("last_error", "text", None, true, None),
        col("claimed_at", TZ, None, true, None),
        col("claim_token", "uuid", None, true, None),
        col("lease_expires_at", TZ, None, true, None),
    ];
    rows.sort();
    rows
}

fn pairs(rows: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = rows
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    rows.sort();
    rows
}

/// The index tables of both pages: names, columns and filters.
fn expected_outbox_indexes() -> Vec<(String, String)> {
    pairs(&[
        (
            "outbox_pkey",
            "CREATE UNIQUE INDEX outbox_pkey ON public.outbox USING btree (id)",
        ),
        (
            "idx_outbox_pending_scheduled",
            "CREATE INDEX idx_outbox_pending_scheduled ON public.outbox USING btree (state, scheduled_at) WHERE ((state)::text = 'pending'::text)",
        ),
        (
            "idx_outbox_processing_claimed",
            "CREATE INDEX idx_outbox_processing_claimed ON public.outbox USING btree (claimed_at) WHERE ((state)::text = 'processing'::text)",
        ),
        // V17 replaced the documented idx_outbox_key_sequence (the same without `key IS NOT NULL`)
        // and dropped idx_outbox_topic: a deviation, see features.md.
        (
            "idx_outbox_keyed_sequence",
            "CREATE INDEX idx_outbox_keyed_sequence ON public.outbox USING btree (key, sequence) WHERE (((state)::text = ANY ((ARRAY['pending'::character varying, 'processing'::character varying])::text[])) AND (key IS NOT NULL))",
        ),
        // V12, a QueueBox addition: the index of due rows without a key, for an O(batch) claim.
        (
            "idx_outbox_unkeyed_pending",
            "CREATE INDEX idx_outbox_unkeyed_pending ON public.outbox USING btree (scheduled_at) WHERE (((state)::text = 'pending'::text) AND ((key IS NULL) OR ((key)::text = ''::text)))",
        ),
        // V14, a QueueBox addition: the index the retention deletes walk.
        (
            "idx_outbox_finished_updated",
            "CREATE INDEX idx_outbox_finished_updated ON public.outbox USING btree (state, updated_at, id) WHERE ((state)::text = ANY ((ARRAY['sent'::character varying, 'dead'::character varying])::text[]))",
        ),
        // V16, a QueueBox addition: the dead rows by topic (the console's counts and filters).
        (
            "idx_outbox_dead_topic",
            "CREATE INDEX idx_outbox_dead_topic ON public.outbox USING btree (topic, created_at) WHERE ((state)::text = 'dead'::text)",
        ),
    ])
}

fn expected_inbox_indexes() -> Vec<(String, String)> {
    pairs(&[
        (
            "inbox_pkey",
            "CREATE UNIQUE INDEX inbox_pkey ON public.inbox USING btree (id)",
        ),
        (
            "uq_inbox_source_idempotency",
            "CREATE UNIQUE INDEX uq_inbox_source_idempotency ON public.inbox USING btree (source, idempotency_key)",
        ),
        // V18 dropped the documented idx_inbox_pending, idx_inbox_source and
        // idx_inbox_consumption_pending, V19 the documented idx_inbox_aggregate_state: deviations,
        // see features.md.
        (
            "idx_inbox_processing_claimed",
            "CREATE INDEX idx_inbox_processing_claimed ON public.inbox USING btree (claimed_at) WHERE ((state)::text = 'processing'::text)",
        ),
        (
            "idx_inbox_state_created",
            "CREATE INDEX idx_inbox_state_created ON public.inbox USING btree (state, created_at)",
        ),
        (
            "idx_inbox_pull_pending",
            "CREATE INDEX idx_inbox_pull_pending ON public.inbox USING btree (source, scheduled_at, created_at, id) WHERE (((consumption)::text = 'pull'::text) AND ((state)::text = 'pending'::text))",
        ),
        (
            "idx_inbox_pull_busy",
            "CREATE INDEX idx_inbox_pull_busy ON public.inbox USING btree (source, aggregate_id, lease_expires_at) WHERE (((consumption)::text = 'pull'::text) AND ((state)::text = 'processing'::text))",
        ),
        // V13, a QueueBox addition: the index the pull claim walks aggregate by aggregate.
        (
            "idx_inbox_pull_aggregate",
            "CREATE INDEX idx_inbox_pull_aggregate ON public.inbox USING btree (source, aggregate_id, scheduled_at, created_at, id) WHERE (((consumption)::text = 'pull'::text) AND ((state)::text = 'pending'::text))",
        ),
        // V15, a QueueBox addition: the index the relay claim walks aggregate by aggregate.
        (
            "idx_inbox_push_pending_aggregate",
            "CREATE INDEX idx_inbox_push_pending_aggregate ON public.inbox USING btree (NULLIF((aggregate_id)::text, ''::text), created_at, id) WHERE (((consumption)::text = 'push'::text) AND ((state)::text = 'pending'::text))",
        ),
        // V19, in place of idx_inbox_aggregate_state: the aggregates with a push row being relayed.
        (
            "idx_inbox_push_busy",
            "CREATE INDEX idx_inbox_push_busy ON public.inbox USING btree (aggregate_id) WHERE (((state)::text = 'processing'::text) AND ((consumption)::text = 'push'::text))",
        ),
    ])
}

async fn assert_documented_schema(db: &TestDb) {
    assert_eq!(columns(db, "outbox").await, expected_outbox());
    assert_eq!(columns(db, "inbox").await, expected_inbox());
    assert_eq!(indexes(db, "outbox").await, expected_outbox_indexes());
    assert_eq!(indexes(db, "inbox").await, expected_inbox_indexes());
    assert_eq!(
        constraints(db, "outbox").await,
        pairs(&[("outbox_pkey", "PRIMARY KEY (id)")])
    );
    assert_eq!(
        constraints(db, "inbox").await,
        pairs(&[
            (
                "ck_inbox_consumption",
                "CHECK (((consumption)::text = ANY ((ARRAY['push'::character varying, 'pull'::character varying])::text[])))",
            ),
            ("inbox_pkey", "PRIMARY KEY (id)"),
            (
                "uq_inbox_source_idempotency",
                "UNIQUE (source, idempotency_key)"
            ),
        ])
    );
    let capture: Vec<String> = columns(db, "queuebox_capture_state")
        .await
        .into_iter()
        .map(|c| c.0)
        .collect();
    for expected in [
        "identity_name",
        "instance_id",
        "settings_fingerprint",
        "log_position",
        "updated_at",
    ] {
        assert!(
            capture.iter().any(|c| c == expected),
            "{expected} in {capture:?}"
        );
    }
    let mut session = db.session().await;
    let owned_by: Option<String> =
        sqlx::query_scalar("SELECT pg_get_serial_sequence('outbox', 'sequence')")
            .fetch_one(&mut session)
            .await
            .expect("sequence owner");
    assert_eq!(owned_by.as_deref(), Some("public.outbox_sequence_seq"));
}

#[tokio::test]
async fn a_fresh_database_gets_the_documented_schema_and_a_second_run_changes_nothing() {
    let db = TestDb::create().await;
    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    database.prepare().await.expect("first prepare");
    assert_documented_schema(&db).await;

    let first = history(&db).await;
    let versions: Vec<i32> = first.iter().map(|r| r.0).collect();
    assert_eq!(versions, all_versions());
    assert!(first.iter().all(|r| r.3 == "applied"), "{first:?}");
    for (row, migration) in first.iter().zip(migration_files()) {
        assert_eq!(row.1, migration.name);
        assert_eq!(row.2, checksum(migration.sql));
    }

    let report = database.migrate().await.expect("second run");
    assert_eq!(report, MigrationReport::default());
    database.prepare().await.expect("prepare again");
    assert_eq!(history(&db).await, first);
    assert_documented_schema(&db).await;
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn two_processes_preparing_at_once_apply_each_version_once() {
    let db = TestDb::create().await;
    let options = db.options(true, SchemaNames::default());
    let (a, b) = tokio::join!(connect(&options), connect(&options));
    let (a, b) = (a.expect("connect a"), b.expect("connect b"));
    let (ra, rb) = tokio::join!(a.migrate(), b.migrate());
    let (ra, rb) = (ra.expect("run a"), rb.expect("run b"));
    // One run applied everything, the other found it recorded.
    let mut applied = [ra.applied.clone(), rb.applied.clone()];
    applied.sort();
    assert_eq!(applied, [vec![], all_versions()], "{ra:?} {rb:?}");
    assert!(ra.baselined.is_empty() && rb.baselined.is_empty());
    let rows = history(&db).await;
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), all_versions());
    let (pa, pb) = tokio::join!(a.prepare(), b.prepare());
    pa.expect("prepare a");
    pb.expect("prepare b");
    assert_documented_schema(&db).await;
    a.close().await;
    b.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn a_schema_applied_by_hand_is_baselined_not_rerun() {
    let db = TestDb::create().await;
    // Every bundled file by hand, V12, V17, V18 and V19 included.
    db.apply_by_hand(19).await;
    db.exec("INSERT INTO outbox (topic, payload) VALUES ('t', '{}')")
        .await;

    // migrate: false only checks the schema and writes nothing.
    let manual = connect(&db.options(false, SchemaNames::default()))
        .await
        .expect("connect");
    manual.prepare().await.expect("prepare without migrate");
    let mut session = db.session().await;
    let history_exists: bool =
        sqlx::query_scalar("SELECT to_regclass('queuebox_schema_history') IS NOT NULL")
            .fetch_one(&mut session)
            .await
            .expect("lookup");
    assert!(
        !history_exists,
        "migrate: false must not create the history table"
    );
    manual.close().await;

    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    let report = database.migrate().await.expect("migrate");
    assert_eq!(report.applied, Vec::<i32>::new());
    assert_eq!(report.baselined, all_versions());
    let rows = history(&db).await;
    assert!(rows.iter().all(|r| r.3 == "baselined"), "{rows:?}");
    database.prepare().await.expect("prepare");
    assert_documented_schema(&db).await;
    // Nothing ran again: the existing row kept its number, the next one continues after it.
    let sequences: Vec<i64> = sqlx::query_scalar("SELECT sequence FROM outbox ORDER BY sequence")
        .fetch_all(&mut session)
        .await
        .expect("sequences");
    assert_eq!(sequences, [1]);
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn a_database_with_v1_to_v10_by_hand_gets_only_v11_which_numbers_rows_in_created_order() {
    let db = TestDb::create().await;
    db.apply_by_hand(10).await;
    // Inserted out of created_at order on purpose.
    db.exec(
        "INSERT INTO outbox (topic, key, payload, created_at) VALUES
           ('t', 'k', '{\"n\": 2}', '2026-01-01T00:00:02Z'),
           ('t', 'k', '{\"n\": 3}', '2026-01-01T00:00:03Z'),
           ('t', 'k', '{\"n\": 1}', '2026-01-01T00:00:01Z')",
    )
    .await;
    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    let report = database.migrate().await.expect("migrate");
    assert_eq!(report.applied, [11, 12, 13, 14, 15, 16, 17, 18, 19]);
    assert_eq!(report.baselined, (1..=10).collect::<Vec<_>>());
    database.prepare().await.expect("prepare");
    assert_documented_schema(&db).await;

    let mut session = db.session().await;
    let order: Vec<(i64, i32)> =
        sqlx::query_as("SELECT sequence, (payload->>'n')::int FROM outbox ORDER BY sequence")
            .fetch_all(&mut session)
            .await
            .expect("read");
    assert_eq!(order, [(1, 1), (2, 2), (3, 3)]);
    let next: i64 = sqlx::query_scalar(
        "INSERT INTO outbox (topic, payload) VALUES ('t', '{}') RETURNING sequence",
    )
    .fetch_one(&mut session)
    .await
    .expect("insert");
    assert_eq!(next, 4);
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn v11_accepts_a_sequence_column_added_with_the_guard_statement() {
    let db = TestDb::create().await;
    db.apply_by_hand(10).await;
    db.exec("INSERT INTO outbox (topic, payload) VALUES ('t', '{}')")
        .await;
    for statement in queuebox_postgres::outbox_sequence_fix(&SchemaNames::default()) {
        db.exec(&statement).await;
    }
    // The identity column and its sequence are what V11 creates, so the runner records V11 as
    // applied by hand; the file itself must still run over them (an operator applying the
    // files by hand after the guard statement does exactly that).
    let v11 = migration_files()
        .iter()
        .find(|m| m.version == 11)
        .expect("V11");
    db.exec(v11.sql).await;
    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    let report = database
        .migrate()
        .await
        .expect("migrate over an identity column");
    assert_eq!(report.baselined, (1..=11).collect::<Vec<_>>());
    assert_eq!(report.applied, [12, 13, 14, 15, 16, 17, 18, 19]);
    database.prepare().await.expect("prepare");
    let mut session = db.session().await;
    sqlx::query("INSERT INTO outbox (topic, payload) VALUES ('t', '{}')")
        .execute(&mut session)
        .await
        .expect("insert");
    let sequences: Vec<i64> = sqlx::query_scalar("SELECT sequence FROM outbox ORDER BY sequence")
        .fetch_all(&mut session)
        .await
        .expect("read");
    assert_eq!(sequences, [1, 2]);
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn v17_runs_while_an_index_it_drops_is_still_there() {
    // An operator built V17's new index concurrently ahead of the upgrade, as the file advises,
    // but left the two old ones: the version is not taken as applied, it runs and drops them.
    let db = TestDb::create().await;
    db.apply_by_hand(16).await;
    db.exec(
        "CREATE INDEX idx_outbox_keyed_sequence ON outbox (key, sequence) \
         WHERE state IN ('pending', 'processing') AND key IS NOT NULL",
    )
    .await;
    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    let report = database.migrate().await.expect("migrate");
    assert_eq!(report.baselined, (1..=16).collect::<Vec<_>>());
    assert_eq!(report.applied, [17, 18, 19]);
    assert_documented_schema(&db).await;
    database.close().await;
    db.drop_now().await;
}

/// A database at version `at` on which an operator ran `statements` by hand (building and dropping
/// indexes concurrently, as the files of V18 and V19 advise) before the upgrade: what the runner
/// then does. The schema ends as documented either way.
async fn migrate_after_changes_by_hand(at: i32, statements: &[&str]) -> MigrationReport {
    let db = TestDb::create().await;
    db.apply_by_hand(at).await;
    for statement in statements {
        db.exec(statement).await;
    }
    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    let report = database.migrate().await.expect("migrate");
    assert_documented_schema(&db).await;
    database.close().await;
    db.drop_now().await;
    report
}

#[tokio::test]
async fn v18_runs_while_an_index_it_drops_is_still_there() {
    // Two of the three gone, the third left: the version is not taken as applied, it runs and drops
    // the last one.
    let report = migrate_after_changes_by_hand(
        17,
        &[
            "DROP INDEX CONCURRENTLY idx_inbox_source",
            "DROP INDEX CONCURRENTLY idx_inbox_pending",
        ],
    )
    .await;
    assert_eq!(report.baselined, (1..=17).collect::<Vec<_>>());
    assert_eq!(report.applied, [18, 19]);
}

#[tokio::test]
async fn v18_dropped_by_hand_is_baselined() {
    // All three gone: V2 and V6 are still recognised without them, and V18 is recorded, not run.
    let report = migrate_after_changes_by_hand(
        17,
        &[
            "DROP INDEX CONCURRENTLY idx_inbox_source",
            "DROP INDEX CONCURRENTLY idx_inbox_pending",
            "DROP INDEX CONCURRENTLY idx_inbox_consumption_pending",
        ],
    )
    .await;
    assert_eq!(report.baselined, (1..=18).collect::<Vec<_>>());
    assert_eq!(report.applied, [19]);
}

/// V19's index built by hand ahead of the upgrade, as its file advises.
const V19_INDEX_BY_HAND: &str = "CREATE INDEX CONCURRENTLY idx_inbox_push_busy ON inbox (aggregate_id) \
     WHERE state = 'processing' AND consumption = 'push'";

#[tokio::test]
async fn v19_runs_while_the_index_it_drops_is_still_there() {
    // The new index built, the old one left: not taken as applied, it runs and drops the old one.
    let report = migrate_after_changes_by_hand(18, &[V19_INDEX_BY_HAND]).await;
    assert_eq!(report.baselined, (1..=18).collect::<Vec<_>>());
    assert_eq!(report.applied, [19]);
}

#[tokio::test]
async fn v19_runs_when_only_the_old_index_was_dropped_by_hand() {
    // The old index gone before the new one was built: it runs and builds the new one.
    let report =
        migrate_after_changes_by_hand(18, &["DROP INDEX CONCURRENTLY idx_inbox_aggregate_state"])
            .await;
    assert_eq!(report.baselined, (1..=18).collect::<Vec<_>>());
    assert_eq!(report.applied, [19]);
}

#[tokio::test]
async fn v19_done_by_hand_is_baselined() {
    // The new index built and the old one dropped: V2 is still recognised without the old one, and
    // V19 is recorded, not run.
    let report = migrate_after_changes_by_hand(
        18,
        &[
            V19_INDEX_BY_HAND,
            "DROP INDEX CONCURRENTLY idx_inbox_aggregate_state",
        ],
    )
    .await;
    assert_eq!(report.baselined, all_versions());
    assert!(report.applied.is_empty(), "{report:?}");
}

#[tokio::test]
async fn a_partly_applied_version_is_completed() {
    let db = TestDb::create().await;
    db.apply_by_hand(5).await;
    // Half of V6 by hand: one column only.
    db.exec("ALTER TABLE outbox ADD COLUMN claim_token UUID")
        .await;
    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    let report = database.migrate().await.expect("migrate");
    assert_eq!(report.baselined, [1, 2, 3, 4, 5]);
    assert_eq!(
        report.applied,
        [6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    );
    assert_documented_schema(&db).await;
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn a_changed_file_is_refused_naming_its_version() {
    let db = TestDb::create().await;
    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    database.prepare().await.expect("prepare");
    db.exec("UPDATE queuebox_schema_history SET checksum = 'edited' WHERE version = 4")
        .await;
    let error = database.prepare().await.expect_err("checksum mismatch");
    assert!(
        matches!(error, PostgresError::ChecksumMismatch { version: 4, .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(text.contains("V4 (V4__add_last_error.sql)"), "{text}");
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn a_failing_migration_names_its_version_and_rolls_back() {
    let db = TestDb::create().await;
    db.apply_by_hand(10).await;
    // A column of the wrong type under the name V11 uses for its sequence makes V11 fail.
    db.exec("ALTER TABLE outbox ADD COLUMN sequence TEXT").await;
    db.exec("INSERT INTO outbox (topic, payload, sequence) VALUES ('t', '{}', 'x')")
        .await;
    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    let error = database.migrate().await.expect_err("V11 fails");
    assert!(
        matches!(error, PostgresError::Migration { version: 11, .. }),
        "{error:?}"
    );
    let mut session = db.session().await;
    let sequence_exists: bool =
        sqlx::query_scalar("SELECT to_regclass('outbox_sequence_seq') IS NOT NULL")
            .fetch_one(&mut session)
            .await
            .expect("lookup");
    assert!(
        !sequence_exists,
        "the failed version must roll back entirely"
    );
    let recorded: Vec<i32> = sqlx::query_scalar(AssertSqlSafe(
        "SELECT version FROM queuebox_schema_history ORDER BY version".to_owned(),
    ))
    .fetch_all(&mut session)
    .await
    .expect("history");
    assert_eq!(recorded, (1..=10).collect::<Vec<_>>());
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn migrate_with_a_renamed_mapping_is_refused_naming_each_setting() {
    let db = TestDb::create().await;
    let error = connect(&db.options(true, renamed_schema()))
        .await
        .expect_err("refused");
    let text = error.to_string();
    for setting in [
        "database.outboxTableName",
        "database.inboxTableName",
        "database.columnMapping.outbox.payload",
        "database.columnMapping.inbox.idempotencyKey",
    ] {
        assert!(text.contains(setting), "{setting} missing from: {text}");
    }
    assert!(
        matches!(error, PostgresError::MigrateWithRenamedSchema { ref settings } if settings.len() == 4)
    );
    db.drop_now().await;
}

#[tokio::test]
async fn the_eleven_documented_files_by_hand_get_only_our_index_versions() {
    let db = TestDb::create().await;
    db.apply_by_hand(11).await;
    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    let report = database.migrate().await.expect("migrate");
    assert_eq!(report.baselined, (1..=11).collect::<Vec<_>>());
    assert_eq!(report.applied, [12, 13, 14, 15, 16, 17, 18, 19]);
    assert_documented_schema(&db).await;
    database.close().await;
    db.drop_now().await;
}

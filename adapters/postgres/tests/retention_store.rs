//! The PostgreSQL retention store against a real server: each delete of the outbox AGE, outbox COUNT
//! and inbox AGE policies removes exactly the finished rows it selects, in batches of the asked size,
//! never a pending or processing row whatever its age; a row another transaction holds is passed over
//! instead of waited for; the deletes can walk an index; and a renamed schema works through the
//! mapping. Every test runs on a fresh database and reads the tables back.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::TestDb;
use queuebox_domain::mapping::SchemaNames;
use queuebox_ports::retention::{FinishedInbox, FinishedOutbox, RetentionStore, Sweep};
use queuebox_postgres::{PgRetentionStore, PostgresDatabase, connect};
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use uuid::Uuid;

const HOUR: Duration = Duration::from_secs(3_600);

/// A bound for a delete that must not wait for a lock; far above any honest run.
const NO_WAIT_BOUND: Duration = Duration::from_secs(20);

type Fixture = common::StoreFixture<PgRetentionStore>;

impl Fixture {
    async fn new() -> Self {
        Self::open(PostgresDatabase::retention_store).await
    }

    /// An outbox row in `state` last changed `minutes_ago`; a processing row holds a live claim.
    async fn outbox(&mut self, state: &str, minutes_ago: i64) -> Uuid {
        sqlx::query_scalar(
            "INSERT INTO outbox (topic, payload, state, updated_at, created_at, claim_token, lease_expires_at) \
             VALUES ('t', '{}'::jsonb, $1, now() - $2 * interval '1 minute', \
                     now() - $2 * interval '1 minute', \
                     CASE WHEN $1 = 'processing' THEN gen_random_uuid() END, \
                     CASE WHEN $1 = 'processing' THEN now() + interval '5 minutes' END) \
             RETURNING id",
        )
        .bind(state)
        .bind(minutes_ago)
        .fetch_one(&mut self.session)
        .await
        .expect("insert an outbox row")
    }

    /// An inbox row in `state` received `minutes_ago`.
    async fn inbox(&mut self, state: &str, consumption: &str, minutes_ago: i64) -> Uuid {
        sqlx::query_scalar(
            "INSERT INTO inbox (source, idempotency_key, payload, state, consumption, created_at, \
                                claim_token, lease_expires_at) \
             VALUES ('s', gen_random_uuid()::text, '{}'::jsonb, $1, $2, \
                     now() - $3 * interval '1 minute', \
                     CASE WHEN $1 = 'processing' THEN gen_random_uuid() END, \
                     CASE WHEN $1 = 'processing' THEN now() + interval '5 minutes' END) \
             RETURNING id",
        )
        .bind(state)
        .bind(consumption)
        .bind(minutes_ago)
        .fetch_one(&mut self.session)
        .await
        .expect("insert an inbox row")
    }

    async fn ids(&mut self, table: &str) -> BTreeSet<Uuid> {
        sqlx::query_scalar::<_, Uuid>(AssertSqlSafe(format!("SELECT id FROM {table}")))
            .fetch_all(&mut self.session)
            .await
            .expect("read ids")
            .into_iter()
            .collect()
    }

    async fn delete(&self, sweep: Sweep, limit: u32) -> u64 {
        self.store
            .delete_batch(&sweep, limit)
            .await
            .expect("delete batch")
    }

    /// Runs batches of `limit` until one comes back short; returns each batch's count.
    async fn drain(&self, sweep: Sweep, limit: u32) -> Vec<u64> {
        let mut batches = Vec::new();
        loop {
            let deleted = self.delete(sweep, limit).await;
            batches.push(deleted);
            if deleted < u64::from(limit) {
                return batches;
            }
            assert!(batches.len() < 100, "the sweep never ends: {batches:?}");
        }
    }
}

fn set(ids: &[Uuid]) -> BTreeSet<Uuid> {
    ids.iter().copied().collect()
}

fn outbox_age(state: FinishedOutbox) -> Sweep {
    Sweep::OutboxOlderThan {
        state,
        max_age: HOUR,
    }
}

fn inbox_age(state: FinishedInbox) -> Sweep {
    Sweep::InboxOlderThan {
        state,
        max_age: HOUR,
    }
}

#[tokio::test]
async fn outbox_age_deletes_old_sent_and_dead_rows_in_batches_and_never_active_rows() {
    let mut fx = Fixture::new().await;
    let mut old_sent = Vec::new();
    for _ in 0..5 {
        old_sent.push(fx.outbox("sent", 120).await);
    }
    let old_dead = [fx.outbox("dead", 61).await, fx.outbox("dead", 600).await];
    let young = [fx.outbox("sent", 59).await, fx.outbox("dead", 1).await];
    // Active rows far older than the max age.
    let active = [
        fx.outbox("pending", 10_000).await,
        fx.outbox("processing", 10_000).await,
    ];

    // Five old sent rows in batches of two: 2, 2, 1 (short, so the sweep is over).
    assert_eq!(
        fx.drain(outbox_age(FinishedOutbox::Sent), 2).await,
        [2, 2, 1]
    );
    let left = fx.ids("outbox").await;
    assert!(old_sent.iter().all(|id| !left.contains(id)), "{left:?}");
    assert!(
        old_dead.iter().all(|id| left.contains(id)),
        "dead rows wait for their own sweep"
    );

    assert_eq!(fx.drain(outbox_age(FinishedOutbox::Dead), 2).await, [2, 0]);
    let mut survivors = set(&young);
    survivors.extend(active);
    assert_eq!(fx.ids("outbox").await, survivors);

    // Nothing older than the age is left to take.
    assert_eq!(fx.delete(outbox_age(FinishedOutbox::Sent), 10).await, 0);
    fx.done().await;
}

#[tokio::test]
async fn outbox_count_keeps_the_newest_rows_of_each_finished_state() {
    let mut fx = Fixture::new().await;
    // Sent rows changed 1..=7 minutes ago, newest first in this list.
    let mut sent = Vec::new();
    for minutes in 1..=7 {
        sent.push(fx.outbox("sent", minutes).await);
    }
    let mut dead = Vec::new();
    for minutes in 1..=4 {
        dead.push(fx.outbox("dead", minutes * 10).await);
    }
    let active = [
        fx.outbox("pending", 10_000).await,
        fx.outbox("processing", 10_000).await,
        fx.outbox("pending", 0).await,
    ];

    let keep = |state| Sweep::OutboxBeyondNewest { state, keep: 3 };
    // Four sent rows beyond the newest three, two a batch.
    assert_eq!(fx.drain(keep(FinishedOutbox::Sent), 2).await, [2, 2, 0]);
    // One dead row beyond the newest three.
    assert_eq!(fx.drain(keep(FinishedOutbox::Dead), 2).await, [1]);

    let mut expected = set(&sent[..3]);
    expected.extend(&dead[..3]);
    expected.extend(active);
    assert_eq!(fx.ids("outbox").await, expected);
    fx.done().await;
}

#[tokio::test]
async fn outbox_count_breaks_ties_of_one_finish_batch_and_keeps_exactly_the_count() {
    let mut fx = Fixture::new().await;
    // One finish statement gives a whole batch the same updated_at.
    fx.db
        .exec(
            "INSERT INTO outbox (topic, payload, state, updated_at) \
             SELECT 't', '{}'::jsonb, 'sent', timestamptz '2020-01-01 00:00:00+00' \
               FROM generate_series(1, 10)",
        )
        .await;
    let sweep = Sweep::OutboxBeyondNewest {
        state: FinishedOutbox::Sent,
        keep: 4,
    };
    assert_eq!(fx.drain(sweep, 4).await, [4, 2]);
    assert_eq!(fx.ids("outbox").await.len(), 4);
    // Fewer rows than the count: nothing to delete.
    assert_eq!(fx.delete(sweep, 100).await, 0);
    fx.done().await;
}

#[tokio::test]
async fn inbox_age_deletes_old_processed_and_dead_rows_by_created_at_and_never_active_rows() {
    let mut fx = Fixture::new().await;
    let old_processed = [
        fx.inbox("processed", "push", 90).await,
        fx.inbox("processed", "pull", 90).await,
        fx.inbox("processed", "push", 5_000).await,
    ];
    let old_dead = [fx.inbox("dead", "push", 90).await];
    let young = [
        fx.inbox("processed", "push", 30).await,
        fx.inbox("dead", "pull", 30).await,
    ];
    let active = [
        fx.inbox("pending", "push", 10_000).await,
        fx.inbox("pending", "pull", 10_000).await,
        fx.inbox("processing", "push", 10_000).await,
        fx.inbox("processing", "pull", 10_000).await,
    ];

    assert_eq!(
        fx.drain(inbox_age(FinishedInbox::Processed), 2).await,
        [2, 1]
    );
    assert_eq!(fx.drain(inbox_age(FinishedInbox::Dead), 2).await, [1]);

    let left = fx.ids("inbox").await;
    assert!(
        old_processed
            .iter()
            .chain(&old_dead)
            .all(|id| !left.contains(id))
    );
    let mut survivors = set(&young);
    survivors.extend(active);
    assert_eq!(left, survivors);
    fx.done().await;
}

#[tokio::test]
async fn a_row_held_by_another_transaction_is_skipped_not_waited_for() {
    let mut fx = Fixture::new().await;
    let held = fx.outbox("sent", 120).await;
    // Two free rows beside it.
    fx.outbox("sent", 120).await;
    fx.outbox("sent", 120).await;
    let held_inbox = fx.inbox("processed", "push", 120).await;
    let free_inbox = fx.inbox("processed", "push", 120).await;

    // Another session holds one row of each table (as a replay or a pull client would).
    let mut other = fx.db.session().await;
    let mut transaction = other.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM outbox WHERE id = $1 FOR UPDATE")
        .bind(held)
        .execute(&mut *transaction)
        .await
        .expect("hold the outbox row");
    sqlx::query("SELECT 1 FROM inbox WHERE id = $1 FOR UPDATE")
        .bind(held_inbox)
        .execute(&mut *transaction)
        .await
        .expect("hold the inbox row");

    let outbox = tokio::time::timeout(
        NO_WAIT_BOUND,
        fx.store.delete_batch(&outbox_age(FinishedOutbox::Sent), 10),
    )
    .await
    .expect("the delete waited for a held row")
    .expect("delete");
    assert_eq!(outbox, 2);
    let inbox = tokio::time::timeout(
        NO_WAIT_BOUND,
        fx.store
            .delete_batch(&inbox_age(FinishedInbox::Processed), 10),
    )
    .await
    .expect("the delete waited for a held row")
    .expect("delete");
    assert_eq!(inbox, 1);
    assert_eq!(fx.ids("outbox").await, set(&[held]));
    assert!(!fx.ids("inbox").await.contains(&free_inbox));

    // Once released, the next batch takes it.
    transaction.rollback().await.expect("release");
    assert_eq!(fx.delete(outbox_age(FinishedOutbox::Sent), 10).await, 1);
    assert_eq!(fx.delete(inbox_age(FinishedInbox::Processed), 10).await, 1);
    assert!(fx.ids("outbox").await.is_empty());
    assert!(fx.ids("inbox").await.is_empty());
    let _ = other.close().await;
    fx.done().await;
}

/// The plan of a rendered statement with sequential scans priced out: whether an index can serve it.
async fn plan(session: &mut PgConnection, sql: &str, state: &str) -> String {
    sqlx::query("SET enable_seqscan = off")
        .execute(&mut *session)
        .await
        .expect("set");
    let lines: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!("EXPLAIN {sql}")))
        .bind(state)
        .bind(3_600_000_i64)
        .bind(1_000_i32)
        .fetch_all(&mut *session)
        .await
        .expect("explain");
    lines.join("\n")
}

#[tokio::test]
async fn each_delete_can_walk_an_index() {
    let mut fx = Fixture::new().await;
    let statements = fx.database.statements().clone();
    for (sql, state, index) in [
        (
            &statements.retention_outbox_age,
            "sent",
            "idx_outbox_finished_updated",
        ),
        (
            &statements.retention_outbox_count,
            "dead",
            "idx_outbox_finished_updated",
        ),
        (
            &statements.retention_inbox_age,
            "processed",
            "idx_inbox_state_created",
        ),
    ] {
        let plan = plan(&mut fx.session, sql.as_str(), state).await;
        assert!(plan.contains(index), "{plan}");
    }
    fx.done().await;
}

#[tokio::test]
async fn a_renamed_schema_is_cleaned_through_the_mapping() {
    let db = TestDb::create().await;
    db.apply_by_hand(i32::MAX).await;
    db.exec(
        r#"ALTER TABLE outbox RENAME TO qb_outbox;
           ALTER TABLE qb_outbox RENAME COLUMN state TO status;
           ALTER TABLE qb_outbox RENAME COLUMN updated_at TO changed_at;
           ALTER TABLE qb_outbox RENAME COLUMN id TO message_id;
           ALTER TABLE inbox RENAME TO qb_inbox;
           ALTER TABLE qb_inbox RENAME COLUMN state TO status;
           ALTER TABLE qb_inbox RENAME COLUMN created_at TO received_at;
           ALTER TABLE qb_inbox RENAME COLUMN id TO message_id;
           INSERT INTO qb_outbox (topic, payload, status, changed_at) VALUES
               ('old-sent', '{}', 'sent', now() - interval '2 hours'),
               ('old-dead', '{}', 'dead', now() - interval '2 hours'),
               ('old-pending', '{}', 'pending', now() - interval '2 hours'),
               ('young-sent', '{}', 'sent', now());
           INSERT INTO qb_inbox (source, idempotency_key, payload, status, received_at) VALUES
               ('s', 'old-processed', '{}', 'processed', now() - interval '2 hours'),
               ('s', 'old-pending', '{}', 'pending', now() - interval '2 hours'),
               ('s', 'young-processed', '{}', 'processed', now());"#,
    )
    .await;
    let mut names = SchemaNames {
        outbox_table: "qb_outbox".into(),
        inbox_table: "qb_inbox".into(),
        ..SchemaNames::default()
    };
    for (key, column) in [
        ("state", "status"),
        ("updatedAt", "changed_at"),
        ("id", "message_id"),
    ] {
        assert!(names.outbox.set(key, column), "{key}");
    }
    for (key, column) in [
        ("state", "status"),
        ("createdAt", "received_at"),
        ("id", "message_id"),
    ] {
        assert!(names.inbox.set(key, column), "{key}");
    }
    let database = connect(&db.options(false, names)).await.expect("connect");
    database.prepare().await.expect("schema check");
    let store = database.retention_store();
    let keep_one = Sweep::OutboxBeyondNewest {
        state: FinishedOutbox::Sent,
        keep: 1,
    };
    for (sweep, expected) in [
        (outbox_age(FinishedOutbox::Sent), 1),
        (outbox_age(FinishedOutbox::Dead), 1),
        // One sent row is left, and it is the one kept.
        (keep_one, 0),
        (inbox_age(FinishedInbox::Processed), 1),
    ] {
        let deleted = store.delete_batch(&sweep, 10).await.expect("delete");
        assert_eq!(deleted, expected, "{sweep:?}");
    }

    let mut session = db.session().await;
    let topics: BTreeSet<String> = sqlx::query_scalar("SELECT topic FROM qb_outbox")
        .fetch_all(&mut session)
        .await
        .expect("read")
        .into_iter()
        .collect();
    assert_eq!(
        topics,
        BTreeSet::from(["old-pending".to_owned(), "young-sent".to_owned()])
    );
    let keys: BTreeSet<String> = sqlx::query_scalar("SELECT idempotency_key FROM qb_inbox")
        .fetch_all(&mut session)
        .await
        .expect("read")
        .into_iter()
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["old-pending".to_owned(), "young-processed".to_owned()])
    );
    let _ = session.close().await;
    drop(store);
    database.close().await;
    db.drop_now().await;
}

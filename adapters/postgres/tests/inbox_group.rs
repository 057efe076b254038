//! Group inserts of the PostgreSQL inbox store against a real server: one statement for many
//! messages, each with its own outcome, and the ingest coalescer over it falling back to single
//! inserts when one row fails the statement.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestDb, eventually, renamed_schema};
use queuebox_application::ingest::{CoalesceOptions, CoalescingInbox};
use queuebox_domain::mapping::SchemaNames;
use queuebox_ports::inbox::{Consumption, InboxStore, InsertManyError, NewInboxMessage, Stored};
use queuebox_postgres::{PostgresDatabase, connect};
use sqlx::Row;
use uuid::Uuid;

fn message(source: &str, key: &str) -> NewInboxMessage {
    NewInboxMessage {
        id: Uuid::new_v4(),
        source: source.into(),
        idempotency_key: key.into(),
        aggregate_id: Some("cus_1".into()),
        event_type: Some("invoice.paid".into()),
        payload: format!(r#"{{"key": "{key}", "amount": 12.5}}"#),
        headers: vec![("x-tenant".into(), "acme".into())],
        correlation_id: Some(format!("corr-{key}")),
        consumption: Consumption::Push,
        dead_reason: None,
    }
}

async fn migrated(db: &TestDb) -> PostgresDatabase {
    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    database.prepare().await.expect("migrate");
    database
}

async fn count(db: &TestDb, table: &str) -> i64 {
    let mut session = db.session().await;
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
        .fetch_one(&mut session)
        .await
        .expect("count")
}

/// (idempotency key, id) of every stored row, by key.
async fn stored(db: &TestDb) -> Vec<(String, Uuid)> {
    let mut session = db.session().await;
    sqlx::query("SELECT idempotency_key, id FROM inbox ORDER BY idempotency_key, id")
        .fetch_all(&mut session)
        .await
        .expect("read")
        .iter()
        .map(|row| (row.get("idempotency_key"), row.get("id")))
        .collect()
}

#[tokio::test]
async fn two_messages_of_one_key_in_a_group_store_one_row_and_one_duplicate() {
    let db = TestDb::create().await;
    let database = migrated(&db).await;
    let store = database.inbox_store();
    let first = message("stripe", "evt_1");
    let second = message("stripe", "evt_1");
    let outcomes = store
        .insert_many(&[first.clone(), second.clone()])
        .await
        .expect("group insert");
    // Exactly one of the two made the row, and its outcome carries its own id.
    let id = match outcomes.as_slice() {
        [Stored::New(id), Stored::Duplicate] => {
            assert_eq!(*id, first.id);
            *id
        }
        [Stored::Duplicate, Stored::New(id)] => {
            assert_eq!(*id, second.id);
            *id
        }
        other => panic!("expected one new row and one duplicate, got {other:?}"),
    };
    assert_eq!(stored(&db).await, vec![("evt_1".to_owned(), id)]);
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn a_group_mixing_new_messages_and_repeats_answers_each_in_order() {
    let db = TestDb::create().await;
    let database = migrated(&db).await;
    let store = database.inbox_store();
    for key in ["k1", "k2"] {
        assert!(matches!(
            store.insert(&message("stripe", key)).await,
            Ok(Stored::New(_))
        ));
    }
    // Out of key order on purpose: the store sorts its rows, the answers keep the callers' order.
    let mut dead = message("rabbit", "k0");
    dead.payload = "<xml/>".into();
    dead.dead_reason = Some("Invalid JSON".into());
    let group = vec![
        message("stripe", "k4"),
        message("stripe", "k1"),
        message("stripe", "k3"),
        dead.clone(),
        message("stripe", "k2"),
        message("github", "k1"),
    ];
    let outcomes = store.insert_many(&group).await.expect("group insert");
    assert_eq!(
        outcomes,
        vec![
            Stored::New(group[0].id),
            Stored::Duplicate,
            Stored::New(group[2].id),
            Stored::New(dead.id),
            Stored::Duplicate,
            Stored::New(group[5].id),
        ]
    );
    assert_eq!(count(&db, "inbox").await, 6);

    // Every column of a grouped row is written as given, as by the single insert.
    let mut session = db.session().await;
    let row = sqlx::query(
        "SELECT source, aggregate_id, event_type, payload::text AS payload, headers::text AS headers, \
         correlation_id, consumption, state, last_error FROM inbox WHERE id = $1",
    )
    .bind(group[0].id)
    .fetch_one(&mut session)
    .await
    .expect("read");
    let text = |column: &str| -> Option<String> { row.get(column) };
    assert_eq!(text("source").as_deref(), Some("stripe"));
    assert_eq!(text("aggregate_id").as_deref(), Some("cus_1"));
    assert_eq!(text("event_type").as_deref(), Some("invoice.paid"));
    assert_eq!(
        text("payload").as_deref(),
        Some(r#"{"key": "k4", "amount": 12.5}"#)
    );
    assert_eq!(text("headers").as_deref(), Some(r#"{"x-tenant": "acme"}"#));
    assert_eq!(text("correlation_id").as_deref(), Some("corr-k4"));
    assert_eq!(text("consumption").as_deref(), Some("push"));
    assert_eq!(text("state").as_deref(), Some("pending"));
    assert_eq!(text("last_error"), None);
    let row =
        sqlx::query("SELECT payload::text AS payload, state, last_error FROM inbox WHERE id = $1")
            .bind(dead.id)
            .fetch_one(&mut session)
            .await
            .expect("read the dead row");
    let text = |column: &str| -> Option<String> { row.get(column) };
    assert_eq!(text("payload").as_deref(), Some(r#"{"raw": "<xml/>"}"#));
    assert_eq!(text("state").as_deref(), Some("dead"));
    assert_eq!(text("last_error").as_deref(), Some("Invalid JSON"));
    drop(session);
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn a_failing_row_fails_its_group_statement_and_stores_nothing_of_it() {
    let db = TestDb::create().await;
    let database = migrated(&db).await;
    db.exec("ALTER TABLE inbox ADD CONSTRAINT test_no_poison CHECK (idempotency_key <> 'poison')")
        .await;
    let store = database.inbox_store();
    let result = store
        .insert_many(&[message("stripe", "a"), message("stripe", "poison")])
        .await;
    assert!(
        matches!(result, Err(InsertManyError::Statement(_))),
        "{result:?}"
    );
    // A pending payload that is not JSON fails the group before any statement, as a statement error.
    let mut not_json = message("stripe", "b");
    not_json.payload = "<xml/>".into();
    let result = store.insert_many(&[message("stripe", "c"), not_json]).await;
    assert!(
        matches!(&result, Err(InsertManyError::Statement(e)) if e.reason.contains("not JSON")),
        "{result:?}"
    );
    assert_eq!(count(&db, "inbox").await, 0);
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn through_the_coalescer_a_failing_row_fails_alone_and_its_group_is_stored() {
    let db = TestDb::create().await;
    let database = migrated(&db).await;
    db.exec("ALTER TABLE inbox ADD CONSTRAINT test_no_poison CHECK (idempotency_key <> 'poison')")
        .await;
    let inbox = Arc::new(CoalescingInbox::new(
        Arc::new(database.inbox_store()),
        CoalesceOptions {
            max_group: 64,
            max_parallel: 1,
        },
    ));

    // Another session inserts key "blocker" and keeps its transaction open, so the coalescer's
    // insert of the same key waits on it: its one runner is busy, and what follows queues.
    let mut blocker = db.session().await;
    sqlx::query("BEGIN")
        .execute(&mut blocker)
        .await
        .expect("begin");
    sqlx::query(
        "INSERT INTO inbox (id, source, idempotency_key, payload) VALUES ($1, 'stripe', 'blocker', '{}')",
    )
    .bind(Uuid::new_v4())
    .execute(&mut blocker)
    .await
    .expect("hold the key");

    let submit = |key: &str| {
        let inbox = Arc::clone(&inbox);
        let message = message("stripe", key);
        tokio::spawn(async move {
            let outcome = inbox.insert(&message).await;
            (message, outcome)
        })
    };
    let held = submit("blocker");
    // The held insert is in the database, waiting for the blocker's lock.
    let observer = sqlx::PgPool::connect(&db.url()).await.expect("connect");
    let lock_waits = || {
        let observer = observer.clone();
        async move {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
            .fetch_one(&observer)
            .await
            .expect("read pg_stat_activity");
            waiting > 0
        }
    };
    assert!(
        eventually(Duration::from_secs(10), lock_waits).await,
        "no insert waited for the blocker"
    );
    let queued: Vec<_> = ["a", "poison", "b", "a"].into_iter().map(submit).collect();
    assert!(eventually(Duration::from_secs(10), || async { inbox.waiting() == 4 }).await);
    sqlx::query("ROLLBACK")
        .execute(&mut blocker)
        .await
        .expect("rollback");

    let (blocker_message, blocker_outcome) = held.await.expect("join");
    assert_eq!(
        blocker_outcome.expect("insert"),
        Stored::New(blocker_message.id)
    );
    let mut new = Vec::new();
    let mut duplicates = 0;
    for task in queued {
        let (message, outcome) = task.await.expect("join");
        match (message.idempotency_key.as_str(), outcome) {
            ("poison", outcome) => assert!(outcome.is_err(), "{outcome:?}"),
            (_, Ok(Stored::New(id))) => {
                assert_eq!(id, message.id);
                new.push((message.idempotency_key.clone(), id));
            }
            (_, Ok(Stored::Duplicate)) => duplicates += 1,
            (key, Ok(Stored::Refused { reason })) => panic!("{key} was refused: {reason}"),
            (key, Err(e)) => panic!("{key} failed: {e}"),
        }
    }
    assert_eq!(duplicates, 1);
    new.push(("blocker".to_owned(), blocker_message.id));
    new.sort();
    assert_eq!(stored(&db).await, new);
    drop(blocker);
    observer.close().await;
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn a_renamed_schema_takes_group_inserts_through_the_mapping() {
    let db = TestDb::create().await;
    db.create_renamed_schema().await;
    let database = connect(&db.options(false, renamed_schema()))
        .await
        .expect("connect");
    database.prepare().await.expect("schema check");
    let store = database.inbox_store();
    let group = [
        message("stripe", "r1"),
        message("stripe", "r1"),
        message("stripe", "r2"),
    ];
    let outcomes = store.insert_many(&group).await.expect("group insert");
    assert_eq!(
        outcomes.iter().filter(|o| **o == Stored::Duplicate).count(),
        1
    );
    let mut session = db.session().await;
    let keys: Vec<String> = sqlx::query_scalar("SELECT dedup_key FROM qb_inbox ORDER BY dedup_key")
        .fetch_all(&mut session)
        .await
        .expect("read");
    assert_eq!(keys, vec!["r1".to_owned(), "r2".to_owned()]);
    drop(session);
    database.close().await;
    db.drop_now().await;
}

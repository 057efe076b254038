//! The PostgreSQL inbox store against a real server: one row per (source, key), every column
//! written as given, concurrent repeats deduplicated by the constraint, renamed schemas honoured.

mod common;

use std::sync::Arc;

use common::{TestDb, renamed_schema};
use queuebox_domain::mapping::SchemaNames;
use queuebox_ports::inbox::{Consumption, InboxStore, NewInboxMessage, Stored};
use queuebox_postgres::connect;
use sqlx::Row;

fn message(source: &str, key: &str) -> NewInboxMessage {
    NewInboxMessage {
        id: uuid::Uuid::new_v4(),
        source: source.into(),
        idempotency_key: key.into(),
        aggregate_id: Some("cus_1".into()),
        event_type: Some("invoice.paid".into()),
        payload: r#"{"id": "evt", "amount": 12.5, "nested": {"a": [1, 2]}}"#.into(),
        headers: vec![
            ("x-tenant".into(), "acme".into()),
            ("content-type".into(), "application/json".into()),
        ],
        correlation_id: Some("corr-1".into()),
        consumption: Consumption::Pull,
        dead_reason: None,
    }
}

#[tokio::test]
async fn a_new_message_is_one_row_and_a_repeat_is_a_duplicate() {
    let db = TestDb::create().await;
    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    database.prepare().await.expect("migrate");
    let store = database.inbox_store();

    let first = message("stripe", "evt_1");
    let Stored::New(id) = store.insert(&first).await.expect("insert") else {
        panic!("expected a new row");
    };
    // The row takes the id the caller chose (the source transform has read it as $messageId).
    assert_eq!(id, first.id);
    assert_eq!(
        store
            .insert(&message("stripe", "evt_1"))
            .await
            .expect("repeat"),
        Stored::Duplicate
    );
    // The same key in another source is another row.
    assert!(matches!(
        store
            .insert(&message("github", "evt_1"))
            .await
            .expect("other source"),
        Stored::New(_)
    ));

    let mut session = db.session().await;
    let row = sqlx::query(
        "SELECT source, idempotency_key, aggregate_id, event_type, payload::text AS payload, \
         headers::text AS headers, correlation_id, consumption, state FROM inbox WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&mut session)
    .await
    .expect("read the row");
    let text = |column: &str| -> String { row.get(column) };
    assert_eq!(text("source"), "stripe");
    assert_eq!(text("idempotency_key"), "evt_1");
    assert_eq!(text("aggregate_id"), "cus_1");
    assert_eq!(text("event_type"), "invoice.paid");
    let payload: serde_json::Value = serde_json::from_str(&text("payload")).expect("json");
    assert_eq!(
        payload,
        serde_json::json!({"id": "evt", "amount": 12.5, "nested": {"a": [1, 2]}})
    );
    let headers: serde_json::Value = serde_json::from_str(&text("headers")).expect("json");
    assert_eq!(
        headers,
        serde_json::json!({"x-tenant": "acme", "content-type": "application/json"})
    );
    assert_eq!(text("correlation_id"), "corr-1");
    assert_eq!(text("consumption"), "pull");
    assert_eq!(text("state"), "pending");
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM inbox")
        .fetch_one(&mut session)
        .await
        .expect("count");
    assert_eq!(count, 2);
    drop(session);
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn concurrent_repeats_store_one_row() {
    let db = TestDb::create().await;
    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    database.prepare().await.expect("migrate");
    let store = Arc::new(database.inbox_store());
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            store.insert(&message("stripe", "race")).await
        }));
    }
    let mut new = 0;
    for task in tasks {
        if let Stored::New(_) = task.await.expect("join").expect("insert") {
            new += 1;
        }
    }
    assert_eq!(new, 1);
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn a_renamed_schema_is_written_through_the_mapping() {
    let db = TestDb::create().await;
    db.create_renamed_schema().await;
    let names = renamed_schema();
    let database = connect(&db.options(false, names)).await.expect("connect");
    database.prepare().await.expect("schema check");
    let store = database.inbox_store();
    assert!(matches!(
        store
            .insert(&message("stripe", "evt_r"))
            .await
            .expect("insert"),
        Stored::New(_)
    ));
    let mut session = db.session().await;
    let keys: Vec<String> = sqlx::query_scalar("SELECT dedup_key FROM qb_inbox")
        .fetch_all(&mut session)
        .await
        .expect("read");
    assert_eq!(keys, vec!["evt_r".to_owned()]);
    drop(session);
    assert_eq!(
        store
            .insert(&message("stripe", "evt_r"))
            .await
            .expect("repeat"),
        Stored::Duplicate
    );
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn a_row_refused_at_receipt_is_stored_dead_with_its_reason() {
    let db = TestDb::create().await;
    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    database.prepare().await.expect("migrate");
    let store = database.inbox_store();
    // A transform that said `Dead`: the original JSON payload is kept.
    let mut rejected = message("rabbit", "rejected");
    rejected.dead_reason = Some("Transform failed: boom".into());
    // A broker message that is not JSON: its text is kept under `raw`.
    let mut not_json = message("rabbit", "bad");
    not_json.payload = "<xml/>".into();
    not_json.dead_reason = Some("Invalid JSON".into());
    // The same payload without a dead reason is an error, never a row.
    let mut invalid = message("rabbit", "invalid");
    invalid.payload = "<xml/>".into();
    assert!(store.insert(&invalid).await.is_err());
    for dead in [&rejected, &not_json] {
        assert!(matches!(store.insert(dead).await, Ok(Stored::New(_))));
    }
    // A repeat is still a duplicate.
    assert_eq!(store.insert(&rejected).await.ok(), Some(Stored::Duplicate));

    let mut session = db.session().await;
    let rows = sqlx::query(
        "SELECT idempotency_key, state, last_error, payload::text AS payload FROM inbox ORDER BY idempotency_key",
    )
    .fetch_all(&mut session)
    .await
    .expect("read");
    let rows: Vec<(String, String, Option<String>, String)> = rows
        .iter()
        .map(|r| {
            (
                r.get("idempotency_key"),
                r.get("state"),
                r.get("last_error"),
                r.get("payload"),
            )
        })
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0].0, "bad");
    assert_eq!(rows[0].1, "dead");
    assert_eq!(rows[0].2.as_deref(), Some("Invalid JSON"));
    assert_eq!(rows[0].3, r#"{"raw": "<xml/>"}"#);
    assert_eq!(rows[1].0, "rejected");
    assert_eq!(rows[1].1, "dead");
    assert_eq!(rows[1].2.as_deref(), Some("Transform failed: boom"));
    assert!(rows[1].3.contains(r#""amount": 12.5"#), "{}", rows[1].3);
    drop(session);
    database.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn a_value_the_server_refuses_as_data_is_refused_not_a_failure_and_stores_nothing() {
    let db = TestDb::create().await;
    let database = connect(&db.options(true, SchemaNames::default()))
        .await
        .expect("connect");
    database.prepare().await.expect("migrate");
    let store = database.inbox_store();
    // Each of these is refused by the server itself (SQLSTATE class 22), whatever the pipeline
    // checked before: the same message would be refused on every try.
    let mut too_long = message("stripe", &"k".repeat(256));
    too_long.id = uuid::Uuid::new_v4();
    let mut nul = message("stripe", "nul");
    nul.payload = r#"{"a": "x\u0000y"}"#.into();
    let mut tiny = message("stripe", "tiny");
    tiny.payload = "[1e-20000]".into();
    for (refused, code) in [(&too_long, "22001"), (&nul, "22P05"), (&tiny, "22003")] {
        match store.insert(refused).await {
            Ok(Stored::Refused { reason }) => {
                assert!(reason.contains(code), "{reason}");
            }
            other => panic!(
                "{}: expected a refusal, got {other:?}",
                refused.idempotency_key
            ),
        }
    }
    // In a group, the refusal fails the statement, and each message alone tells which one it was.
    let fine = message("stripe", "fine");
    let group = store
        .insert_many(&[fine.clone(), nul.clone()])
        .await
        .expect_err("the group holds a refused value");
    assert!(group.to_string().contains("22P05"), "{group}");
    assert_eq!(store.insert(&fine).await.ok(), Some(Stored::New(fine.id)));

    let mut session = db.session().await;
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM inbox")
        .fetch_one(&mut session)
        .await
        .expect("count");
    assert_eq!(count, 1, "only the message that fits was stored");
    drop(session);
    database.close().await;
    db.drop_now().await;
}

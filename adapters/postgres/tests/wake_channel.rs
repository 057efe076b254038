//! The wake-ups between replicas (`pg_notify` / `LISTEN`): a notice reaches a listener, and sending
//! one does not wait for a log flush nor change the sending session's own setting.

mod common;

use queuebox_ports::capture::WakeChannel;
use queuebox_postgres::{ANNOUNCE_STATEMENT, PgWakeChannel};
use sqlx::{AssertSqlSafe, PgConnection};
use std::time::Duration;

type Fixture = common::StoreFixture<PgWakeChannel>;

async fn synchronous_commit(session: &mut PgConnection) -> String {
    sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(&mut *session)
        .await
        .expect("show synchronous_commit")
}

async fn exec(session: &mut PgConnection, sql: &str) {
    sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
        .execute(&mut *session)
        .await
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
}

#[tokio::test]
async fn an_announced_notice_reaches_a_listener() {
    let fx = Fixture::open(|database| PgWakeChannel::new(database.pool().clone())).await;
    let mut feed = fx.store.subscribe("qb_test_wake").await.expect("subscribe");
    fx.store.announce("qb_test_wake").await.expect("announce");
    tokio::time::timeout(Duration::from_secs(5), feed.next())
        .await
        .expect("no notice within 5 s")
        .expect("the feed failed");
    drop(feed);
    fx.done().await;
}

#[tokio::test]
async fn a_notice_commits_without_waiting_for_its_flush_and_only_itself() {
    let mut fx = Fixture::open(|database| PgWakeChannel::new(database.pool().clone())).await;
    let own = synchronous_commit(&mut fx.session).await;
    assert_ne!(own, "off", "the test server must flush commits by default");
    // Inside an explicit transaction the statement's SET LOCAL is visible until the end of it.
    exec(&mut fx.session, "BEGIN").await;
    sqlx::query(ANNOUNCE_STATEMENT)
        .bind("qb_test_wake")
        .execute(&mut fx.session)
        .await
        .expect("announce in a transaction");
    let inside = synchronous_commit(&mut fx.session).await;
    exec(&mut fx.session, "ROLLBACK").await;
    assert_eq!(inside, "off", "a notice waits for its flush");
    // In autocommit the setting ends with the statement.
    sqlx::query(ANNOUNCE_STATEMENT)
        .bind("qb_test_wake")
        .execute(&mut fx.session)
        .await
        .expect("announce");
    assert_eq!(
        synchronous_commit(&mut fx.session).await,
        own,
        "the notice changed the session's setting"
    );
    fx.done().await;
}

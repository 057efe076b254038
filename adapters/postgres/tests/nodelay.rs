//! The pool's connections have Nagle's algorithm off (`TCP_NODELAY`), over TLS and plain TCP.
//!
//! sqlx 0.9.0 leaves it on; over TLS each claim then waited up to 40 ms for the server's delayed
//! acknowledgement, and a 200-row claim drain fell to less than half its rate (issue 28). This file
//! is its own test process with one test, so the only sockets to the server while it looks are the
//! pool's own.

mod common;

use common::TestDb;
use queuebox_domain::mapping::SchemaNames;
use queuebox_ports::database::DatabaseOptions;
use queuebox_postgres::connect;
use queuebox_postgres::nodelay::state_of_sockets_to_port;

/// Opens the adapter on `options`, makes the pool hold four connections at once, and returns the
/// option's state on every socket to the server while they are open.
async fn pool_sockets(options: DatabaseOptions, port: u16) -> Vec<bool> {
    let database = connect(&options).await.expect("open the database");
    let pool = database.pool();
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut connection = pool.acquire().await.expect("a pooled connection");
        sqlx::query("SELECT 1")
            .execute(&mut *connection)
            .await
            .expect("a statement on the connection");
        held.push(connection);
    }
    let states = state_of_sockets_to_port(port).expect("read the sockets of this process");
    drop(held);
    pool.close().await;
    states
}

#[tokio::test]
async fn every_pooled_connection_has_nagle_off_over_tls_and_plain_tcp() {
    let db = TestDb::create().await;
    let port = db.server.port;
    for (sslmode, migrate) in [("require", true), ("disable", false)] {
        let mut options = db.options(migrate, SchemaNames::default());
        options.target.params = vec![("sslmode".into(), sslmode.into())];
        let states = pool_sockets(options, port).await;
        assert!(
            states.len() >= 4,
            "sslmode={sslmode}: the pool's sockets were found: {states:?}"
        );
        assert!(
            states.iter().all(|&on| on),
            "sslmode={sslmode}: TCP_NODELAY on each socket: {states:?}"
        );
    }
    db.drop_now().await;
}

//! Shared helpers of the integration tests: one fresh database per test on the server named by
//! `QB_TEST_PG_URL`, dropped again when the test ends (also when it panics).

#![allow(dead_code)] // Each test file uses a different subset.

use std::time::Duration;

use queuebox_domain::mapping::SchemaNames;
use queuebox_domain::secret::Secret;
use queuebox_ports::database::{DatabaseHost, DatabaseKind, DatabaseOptions, DatabaseTarget};
use queuebox_postgres::migration_files;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

/// The server URL; a missing variable fails the test with the fix.
pub fn server_url() -> String {
    match std::env::var("QB_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "QB_TEST_PG_URL is not set: start the test services and export their variables with \
             `eval \"$(bash scripts/services.sh)\"` from the repository root"
        ),
    }
}

/// The parts of a `postgres://user:password@host:port/database` URL.
#[derive(Debug, Clone)]
pub struct ServerUrl {
    pub user: String,
    pub password: String,
    pub host: String,
    pub port: u16,
    pub database: String,
}

pub fn parse_url(url: &str) -> ServerUrl {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .expect("QB_TEST_PG_URL starts with postgres://");
    let (credentials, rest) = rest
        .split_once('@')
        .expect("user and password in QB_TEST_PG_URL");
    let (user, password) = credentials.split_once(':').unwrap_or((credentials, ""));
    let (address, database) = rest.split_once('/').unwrap_or((rest, "postgres"));
    let database = database.split('?').next().unwrap_or("postgres");
    let (host, port) = address.rsplit_once(':').unwrap_or((address, "5432"));
    ServerUrl {
        user: user.to_owned(),
        password: password.to_owned(),
        host: host.to_owned(),
        port: port.parse().expect("numeric port"),
        database: database.to_owned(),
    }
}

/// A database created for one test.
pub struct TestDb {
    pub name: String,
    pub server: ServerUrl,
}

impl TestDb {
    pub async fn create() -> Self {
        let server = parse_url(&server_url());
        let name = format!("qb_test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(&server_url())
            .await
            .expect("connect to QB_TEST_PG_URL");
        sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .expect("create the test database");
        let _ = admin.close().await;
        Self { name, server }
    }

    pub fn url(&self) -> String {
        let s = &self.server;
        format!(
            "postgres://{}:{}@{}:{}/{}",
            s.user, s.password, s.host, s.port, self.name
        )
    }

    /// Options for the adapter on this database.
    pub fn options(&self, migrate: bool, schema: SchemaNames) -> DatabaseOptions {
        DatabaseOptions {
            target: DatabaseTarget {
                kind: DatabaseKind::Postgresql,
                hosts: vec![DatabaseHost {
                    host: self.server.host.clone(),
                    port: Some(self.server.port),
                }],
                database: self.name.clone(),
                username: self.server.user.clone(),
                password: Secret::new(self.server.password.clone()),
                params: vec![],
            },
            pool_size: 5,
            // Generous: a loaded CI machine can take seconds to hand out a connection, and a test
            // that means to time out sets its own, shorter bounds.
            connection_timeout: Duration::from_secs(20),
            startup_timeout: Duration::from_secs(30),
            migrate,
            schema,
        }
    }

    /// A plain session on this database, for setting up and inspecting.
    pub async fn session(&self) -> PgConnection {
        PgConnection::connect(&self.url())
            .await
            .expect("connect to the test database")
    }

    /// Runs SQL text (several statements allowed).
    pub async fn exec(&self, sql: &str) {
        let mut session = self.session().await;
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(&mut session)
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"));
        let _ = session.close().await;
    }

    /// The bundled schema applied by hand, then renamed as [`renamed_schema`] maps it (tables
    /// `qb_outbox` and `qb_inbox`, columns `body` and `dedup_key`), as an operator would.
    pub async fn create_renamed_schema(&self) {
        self.apply_by_hand(i32::MAX).await;
        self.exec(
            r#"ALTER TABLE outbox RENAME TO qb_outbox;
               ALTER TABLE qb_outbox RENAME COLUMN payload TO body;
               ALTER TABLE inbox RENAME TO qb_inbox;
               ALTER TABLE qb_inbox RENAME COLUMN idempotency_key TO dedup_key;"#,
        )
        .await;
    }

    /// Applies the bundled files by hand, as an operator would with psql, versions `1..=last`.
    pub async fn apply_by_hand(&self, last: i32) {
        for migration in migration_files().iter().filter(|m| m.version <= last) {
            self.exec(migration.sql).await;
        }
    }

    /// Drops the database now (the Drop impl does the same as a fallback). `WITH (FORCE)` also ends
    /// an autovacuum worker that happens to be in the database, because the services script grants
    /// the test account `pg_signal_backend`.
    pub async fn drop_now(&self) {
        let mut admin = PgConnection::connect(&server_url())
            .await
            .expect("connect to QB_TEST_PG_URL");
        sqlx::raw_sql(AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        )))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|error| panic!("drop the test database {}: {error}", self.name));
        let _ = admin.close().await;
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Best effort, also after a panic: a thread with its own runtime, since Drop cannot await.
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                if let Ok(mut admin) = PgConnection::connect(&server_url()).await {
                    let _ = sqlx::raw_sql(AssertSqlSafe(format!(
                        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                    )))
                    .execute(&mut admin)
                    .await;
                    let _ = admin.close().await;
                }
            });
        })
        .join();
    }
}

/// The renamed mapping of the documentation's example.
pub fn renamed_schema() -> SchemaNames {
    let mut names = SchemaNames {
        outbox_table: "qb_outbox".into(),
        inbox_table: "qb_inbox".into(),
        ..SchemaNames::default()
    };
    assert!(names.outbox.set("payload", "body"));
    assert!(names.inbox.set("idempotencyKey", "dedup_key"));
    names
}

/// Waits until `condition` holds or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A fresh database with the bundled migrations, one store on it and a session to inspect it: the
/// shape every store test starts from. Each test file adds its own helpers to its `StoreFixture<S>`.
pub struct StoreFixture<S> {
    pub db: TestDb,
    pub database: queuebox_postgres::PostgresDatabase,
    pub store: S,
    pub session: PgConnection,
}

impl<S> StoreFixture<S> {
    /// Creates the database, migrates it and builds the store with `make`.
    pub async fn open(make: impl FnOnce(&queuebox_postgres::PostgresDatabase) -> S) -> Self {
        let db = TestDb::create().await;
        let database = queuebox_postgres::connect(&db.options(true, SchemaNames::default()))
            .await
            .expect("connect");
        database.prepare().await.expect("migrate and check");
        let store = make(&database);
        let session = db.session().await;
        Self {
            db,
            database,
            store,
            session,
        }
    }

    /// Closes the session and the pool, then drops the database.
    pub async fn done(self) {
        let Self {
            db,
            database,
            store,
            session,
        } = self;
        drop(store);
        let _ = session.close().await;
        database.close().await;
        db.drop_now().await;
    }
}

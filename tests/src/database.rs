//! A fresh PostgreSQL database for one test, dropped when the test ends.

use sqlx::{AssertSqlSafe, Connection, PgConnection};

/// The URL of the test server's maintenance database, from `QB_TEST_PG_URL`.
pub fn server_url() -> String {
    std::env::var("QB_TEST_PG_URL").unwrap_or_else(|_| {
        panic!(
            "QB_TEST_PG_URL is not set: start the services first with \
             `eval \"$(bash scripts/services.sh)\"`"
        )
    })
}

/// The capture account `scripts/services.sh` creates (REPLICATION, nothing else), from
/// `QB_TEST_PG_CAPTURE_ACCOUNT` (`user:password`).
pub fn capture_account() -> (String, String) {
    let account = std::env::var("QB_TEST_PG_CAPTURE_ACCOUNT").unwrap_or_else(|_| {
        panic!(
            "QB_TEST_PG_CAPTURE_ACCOUNT is not set: start the services first with \
             `eval \"$(bash scripts/services.sh)\"`"
        )
    });
    let (user, password) = account
        .split_once(':')
        .expect("QB_TEST_PG_CAPTURE_ACCOUNT is user:password");
    (user.to_owned(), password.to_owned())
}

/// A database created for one test.
pub struct TestDatabase {
    /// The database name.
    pub name: String,
    /// `postgres://user:password@host:port/name`.
    pub url: String,
    /// User of the test server.
    pub user: String,
    /// Password of the test server.
    pub password: String,
    /// `host:port` of the test server.
    pub host_port: String,
    /// The URL of the server's maintenance database, for creating, fencing and dropping this one.
    server: String,
}

impl TestDatabase {
    /// Creates an empty database with a unique name on the test server (`QB_TEST_PG_URL`).
    pub async fn create() -> Self {
        Self::create_on(&server_url()).await
    }

    /// Creates an empty database with a unique name on the server whose maintenance database is
    /// at `server` (`postgres://user:password@host:port/postgres`).
    pub async fn create_on(server: &str) -> Self {
        let server = server.to_owned();
        let name = format!("qb_e2e_{}", uuid::Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(&server)
            .await
            .unwrap_or_else(|error| panic!("cannot reach the test PostgreSQL server: {error}"));
        sqlx::query(AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut admin)
            .await
            .expect("create the test database");
        let _ = admin.close().await;

        let (scheme_user, rest) = server
            .split_once('@')
            .expect("QB_TEST_PG_URL holds user@host");
        let credentials = scheme_user
            .trim_start_matches("postgres://")
            .trim_start_matches("postgresql://");
        let (user, password) = credentials.split_once(':').unwrap_or((credentials, ""));
        let host_port = rest.split('/').next().unwrap_or(rest).to_owned();
        let url = format!("postgres://{user}:{password}@{host_port}/{name}");
        Self {
            name,
            url,
            user: user.to_owned(),
            password: password.to_owned(),
            host_port,
            server,
        }
    }

    /// The `jdbc:postgresql://` form that the configuration documents.
    pub fn jdbc_url(&self) -> String {
        format!("jdbc:postgresql://{}/{}", self.host_port, self.name)
    }

    /// Opens a connection to this database.
    pub async fn connect(&self) -> PgConnection {
        PgConnection::connect(&self.url)
            .await
            .expect("connect to the test database")
    }

    /// A small pool on this database, for helpers that query through `&self` inside
    /// `wait_until` closures.
    pub async fn pool(&self) -> sqlx::PgPool {
        sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(&self.url)
            .await
            .expect("connect to the test database")
    }

    /// Runs SQL text (several statements allowed) on this database.
    pub async fn execute(&self, sql: &str) {
        let mut connection = self.connect().await;
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(&mut connection)
            .await
            .unwrap_or_else(|error| panic!("SQL failed: {error}\n{sql}"));
        let _ = connection.close().await;
    }

    /// Refuses every new connection and ends the open ones of the test account, as a database
    /// outage would (a superuser's session, such as someone's psql watching the run, is left alone:
    /// the test account may not end it).
    pub async fn refuse_connections(&self) {
        let mut admin = PgConnection::connect(&self.server)
            .await
            .expect("admin connection");
        sqlx::query(AssertSqlSafe(format!(
            "ALTER DATABASE \"{}\" WITH ALLOW_CONNECTIONS false",
            self.name
        )))
        .execute(&mut admin)
        .await
        .expect("disallow connections");
        sqlx::query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND usename = current_user AND pid <> pg_backend_pid()",
        )
        .bind(&self.name)
        .execute(&mut admin)
        .await
        .expect("terminate backends");
        let _ = admin.close().await;
    }

    /// Lets connections in again after [`TestDatabase::refuse_connections`].
    pub async fn allow_connections(&self) {
        let mut admin = PgConnection::connect(&self.server)
            .await
            .expect("admin connection");
        sqlx::query(AssertSqlSafe(format!(
            "ALTER DATABASE \"{}\" WITH ALLOW_CONNECTIONS true",
            self.name
        )))
        .execute(&mut admin)
        .await
        .expect("allow connections");
        let _ = admin.close().await;
    }

    /// Drops the database, ending any connection still open to it.
    pub async fn drop_database(self) {
        if let Ok(mut admin) = PgConnection::connect(&self.server).await {
            let _ = sqlx::query(AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                self.name
            )))
            .execute(&mut admin)
            .await;
            let _ = admin.close().await;
        }
    }
}

/// Drops replication slot `slot` through `url` (a connection to the slot's own database, as an
/// account that may drop it), waiting up to `deadline` for the walsender of a stopped QueueBox to
/// end. `Ok` when no such slot is left; a slot left behind keeps WAL and its database.
///
/// # Errors
/// The connection failed, or the slot was still active at the deadline.
pub async fn drop_replication_slot(
    url: &str,
    slot: &str,
    deadline: std::time::Duration,
) -> Result<(), String> {
    let mut connection = PgConnection::connect(url)
        .await
        .map_err(|e| format!("connect to drop slot {slot}: {e}"))?;
    let started = std::time::Instant::now();
    let outcome = loop {
        let _ = sqlx::query(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active",
        )
        .bind(slot)
        .execute(&mut connection)
        .await;
        let left: Result<i64, _> =
            sqlx::query_scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1")
                .bind(slot)
                .fetch_one(&mut connection)
                .await;
        match left {
            Ok(0) => break Ok(()),
            Ok(_) if started.elapsed() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Ok(_) => break Err(format!("slot {slot} stayed active for {deadline:?}")),
            Err(e) => break Err(format!("count slots: {e}")),
        }
    };
    let _ = connection.close().await;
    outcome
}

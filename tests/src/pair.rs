//! The pair of PostgreSQL clusters of the restart and fail-over tests, made by
//! `scripts/services.sh` (`start_postgres_pair`): a primary and a streaming standby with synchronous
//! replication, on ports of their own so that stopping them never touches the main cluster other
//! tests share. `pair.sh` (`QB_TEST_PG_FAILOVER_CONTROL`) stops, starts, promotes and resets them.
//!
//! The pair is one for the whole machine: a test takes [`Pair::lock`] for its whole run, which
//! holds a mutex of this process and an exclusive lock on a file beside `pair.sh`, so runs of the
//! suite by several people on one machine take turns instead of resetting the pair under each other.

use sqlx::{AssertSqlSafe, Connection, PgConnection};
use std::time::Duration;
use tokio::sync::{Mutex, MutexGuard};

static PAIR: Mutex<()> = Mutex::const_new(());

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: start the services first with `eval \"$(bash scripts/services.sh)\"`")
    })
}

/// The two clusters: `host:port` of each, the test account, the control script.
#[derive(Debug, Clone)]
pub struct Pair {
    /// `host:port` of the cluster that is the primary after [`Pair::reset`].
    pub primary: String,
    /// `host:port` of the cluster that is the standby after [`Pair::reset`].
    pub standby: String,
    /// The test account.
    pub user: String,
    /// Its password.
    pub password: String,
    control: String,
}

/// The pair is this test's until the guard drops (the file lock goes with the file).
pub struct PairGuard {
    _turn: MutexGuard<'static, ()>,
    _file: std::fs::File,
}

/// One of the two clusters, by its role after [`Pair::reset`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    /// The cluster that starts as the primary.
    Primary,
    /// The cluster that starts as the standby.
    Standby,
}

impl Node {
    fn as_str(self) -> &'static str {
        match self {
            Node::Primary => "primary",
            Node::Standby => "standby",
        }
    }
}

impl Pair {
    /// Takes the pair for one test (waiting for the test that has it) and resets it: the
    /// primary up and writable, the standby rebuilt and streaming in sync, no test database left.
    pub async fn lock() -> (Self, PairGuard) {
        let turn = PAIR.lock().await;
        let (user, password) = env("QB_TEST_PG_FAILOVER_ACCOUNT")
            .split_once(':')
            .map(|(u, p)| (u.to_owned(), p.to_owned()))
            .expect("QB_TEST_PG_FAILOVER_ACCOUNT is user:password");
        let pair = Self {
            primary: env("QB_TEST_PG_FAILOVER_PRIMARY"),
            standby: env("QB_TEST_PG_FAILOVER_STANDBY"),
            user,
            password,
            control: env("QB_TEST_PG_FAILOVER_CONTROL"),
        };
        let path = std::path::Path::new(&pair.control).with_file_name("tests.lock");
        let file = tokio::task::spawn_blocking(move || {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .unwrap_or_else(|error| panic!("open {}: {error}", path.display()));
            file.lock()
                .unwrap_or_else(|error| panic!("lock {}: {error}", path.display()));
            file
        })
        .await
        .expect("take the pair's file lock");
        pair.control(&["reset"]).await;
        (
            pair,
            PairGuard {
                _turn: turn,
                _file: file,
            },
        )
    }

    /// Runs `pair.sh <args>`, panicking with its output when it fails.
    pub async fn control(&self, args: &[&str]) {
        let output = tokio::process::Command::new(&self.control)
            .args(args)
            .output()
            .await
            .unwrap_or_else(|error| panic!("run {} {args:?}: {error}", self.control));
        assert!(
            output.status.success(),
            "{} {args:?} failed: {}",
            self.control,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Stops `node`: `fast` ends the sessions and shuts down cleanly, `immediate` is a crash.
    pub async fn stop(&self, node: Node, mode: &str) {
        self.control(&["stop", node.as_str(), mode]).await;
    }

    /// Starts `node` and waits until it accepts connections.
    pub async fn start(&self, node: Node) {
        self.control(&["start", node.as_str()]).await;
    }

    /// Promotes the standby and waits until it accepts writes.
    pub async fn promote_standby(&self) {
        self.control(&["promote", "standby"]).await;
    }

    /// Turns `default_transaction_read_only` of `node` on or off (reloaded at once, for open
    /// sessions too).
    pub async fn read_only(&self, node: Node, on: bool) {
        self.control(&["read-only", node.as_str(), if on { "on" } else { "off" }])
            .await;
    }

    /// `host:port` of `node`.
    pub fn address(&self, node: Node) -> &str {
        match node {
            Node::Primary => &self.primary,
            Node::Standby => &self.standby,
        }
    }

    /// `postgres://` URL of database `name` on `node`.
    pub fn url(&self, node: Node, name: &str) -> String {
        format!(
            "postgres://{}:{}@{}/{name}",
            self.user,
            self.password,
            self.address(node)
        )
    }

    /// Creates an empty database on the primary (the standby receives it) and returns its name.
    /// The next [`Pair::lock`] drops it.
    pub async fn create_database(&self) -> String {
        let name = format!("qb_e2e_{}", uuid::Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(&self.url(Node::Primary, "postgres"))
            .await
            .expect("connect to the pair's primary");
        sqlx::query(AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut admin)
            .await
            .expect("create the test database on the pair");
        let _ = admin.close().await;
        // The standby commits the CREATE in sync but may replay it a moment later; a test that
        // starts QueueBox with the standby listed first would meet "database does not exist"
        // there instead of a read-only host (seen once in CI).
        let standby = self.url(Node::Standby, &name);
        crate::wait_until(
            "the new database on the standby",
            Duration::from_secs(30),
            || async {
                let connection = PgConnection::connect(&standby).await.ok()?;
                let _ = connection.close().await;
                Some(())
            },
        )
        .await;
        name
    }
}

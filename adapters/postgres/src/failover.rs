//! Fail-over between the hosts of a multi-host `database.url` while QueueBox runs.
//!
//! sqlx's pool opens each new connection with the options it was given; [`Failover`] keeps the
//! hosts of the URL and moves those options ([`sqlx::Pool::set_connect_options`]) to the first host,
//! in the URL's order, that accepts a session and writes: every QueueBox path writes, so a standby
//! or a server with `default_transaction_read_only` on is no use (JDBC's `targetServerType=primary`).
//!
//! What starts a search (the "trouble" reports): a new connection lands on a read-only host
//! (`after_connect`), an idle connection turns out read-only or broken (`before_acquire`, which
//! replaces sqlx's ping with the read-only check, one round trip either way, and closes such a
//! connection), and an acquire that
//! fails or has not finished after [`SLOW_ACQUIRE`] (sqlx retries a refused connection until
//! `connectionTimeoutMs`, so the acquire itself never says that the host has gone). A background
//! task ([`watch`]) then tries the hosts in order, each for at most [`PROBE_TIMEOUT`], until one
//! accepts writes, pausing between rounds while none does. After a move, connections opened before
//! it are closed at their next acquire, so no session stays on the old host.
//!
//! A URL with one host uses none of this: sqlx's own reconnect does the whole job there.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use queuebox_domain::secret::Secret;
use sqlx::pool::PoolConnectionMetadata;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};
use tokio::sync::Notify;

use crate::error::redact;

/// The check of [`is_read_only`].
const READ_ONLY: &str = include_str!("../queries/session_read_only.sql");

/// An acquire that takes longer than this makes the watcher look at the hosts.
pub(crate) const SLOW_ACQUIRE: Duration = Duration::from_secs(1);

/// The longest one host gets to answer during a search (less when `connectionTimeoutMs` is less).
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The pause between two searches that found no writable host, doubled up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(200);
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// The hosts of a multi-host URL and which one the pool's new connections go to.
#[derive(Debug)]
pub(crate) struct Failover {
    hosts: Vec<PgConnectOptions>,
    current: AtomicUsize,
    /// When the pool last moved to another host; connections older than that are closed.
    moved_at: Mutex<Option<Instant>>,
    trouble: Notify,
    probe_timeout: Duration,
    /// Only to scrub it from error texts.
    password: Secret,
}

impl Failover {
    /// `hosts` in the URL's order; the pool starts on `hosts[current]`.
    pub(crate) fn new(
        hosts: Vec<PgConnectOptions>,
        current: usize,
        connection_timeout: Duration,
        password: Secret,
    ) -> Self {
        Self {
            hosts,
            current: AtomicUsize::new(current),
            moved_at: Mutex::new(None),
            trouble: Notify::new(),
            probe_timeout: connection_timeout.min(PROBE_TIMEOUT),
            password,
        }
    }

    /// The options of the host new connections go to now.
    pub(crate) fn current_options(&self) -> PgConnectOptions {
        let index = self.current.load(Ordering::Acquire);
        self.hosts[index.min(self.hosts.len() - 1)].clone()
    }

    /// Something suggests the current host can no longer serve: wake the watcher. Reports made
    /// while it searches fold into one more search.
    pub(crate) fn report(&self, why: &str) {
        tracing::debug!(%why, "database host trouble reported");
        self.trouble.notify_one();
    }

    /// Whether a connection of this `age` was opened before the last move to another host.
    fn opened_before_move(&self, age: Duration) -> bool {
        self.moved_at
            .lock()
            .ok()
            .and_then(|moved| *moved)
            .is_some_and(|moved| moved.elapsed() < age)
    }

    /// The `after_connect` step: a new connection to a read-only host wakes the watcher. The
    /// connection is kept (its first write fails with SQLSTATE 25006 and the next acquire closes
    /// it cleanly in [`Failover::before_acquire`]): refusing it here makes sqlx close it hard, and
    /// a hard close of a healthy TLS session waits for the server to speak first, which holds the
    /// acquire until `connectionTimeoutMs` (measured: 30 s with the default).
    pub(crate) async fn after_connect(&self, connection: &mut PgConnection) -> sqlx::Result<()> {
        match is_read_only(connection).await {
            Ok(false) => Ok(()),
            Ok(true) => {
                self.report("a new connection is read-only");
                Ok(())
            }
            Err(error) => {
                self.report("a new connection failed its first statement");
                Err(error)
            }
        }
    }

    /// The `before_acquire` step: `Ok(false)` closes a connection that was opened before the
    /// last move or whose host turned read-only; an error (a broken connection) closes it too.
    pub(crate) async fn before_acquire(
        &self,
        connection: &mut PgConnection,
        meta: PoolConnectionMetadata,
    ) -> sqlx::Result<bool> {
        if self.opened_before_move(meta.age) {
            return Ok(false);
        }
        match is_read_only(connection).await {
            Ok(false) => Ok(true),
            Ok(true) => {
                self.report("an idle connection turned read-only");
                Ok(false)
            }
            Err(error) => {
                self.report("an idle connection is broken");
                Err(error)
            }
        }
    }

    /// Runs `acquire`, reporting trouble when it fails or is slow.
    pub(crate) async fn watch_acquire<T>(
        &self,
        acquire: impl Future<Output = sqlx::Result<T>>,
    ) -> sqlx::Result<T> {
        tokio::pin!(acquire);
        let result = tokio::select! {
            result = &mut acquire => result,
            () = tokio::time::sleep(SLOW_ACQUIRE) => {
                self.report("an acquire is slow");
                acquire.await
            }
        };
        if let Err(error) = &result
            && !matches!(error, sqlx::Error::PoolClosed)
        {
            self.report("an acquire failed");
        }
        result
    }

    /// The index of the first host, in the URL's order, that accepts a session and writes, or
    /// each host's reason.
    async fn first_writable(&self) -> Result<usize, Vec<String>> {
        let mut causes = Vec::with_capacity(self.hosts.len());
        for (index, host) in self.hosts.iter().enumerate() {
            match probe(host, self.probe_timeout).await {
                Ok(()) => return Ok(index),
                Err(cause) => causes.push(format!(
                    "{}: {}",
                    describe(host),
                    redact(cause, self.password.expose())
                )),
            }
        }
        Err(causes)
    }

    /// Points the pool's new connections at `hosts[index]`.
    fn move_to(&self, pool: &PgPool, index: usize) {
        let from = self.current.swap(index, Ordering::AcqRel);
        if from == index {
            return;
        }
        pool.set_connect_options(self.hosts[index].clone());
        if let Ok(mut moved) = self.moved_at.lock() {
            *moved = Some(Instant::now());
        }
        tracing::warn!(
            from = %describe(&self.hosts[from]),
            to = %describe(&self.hosts[index]),
            "database fail-over: new connections go to the next writable host of database.url; connections to the old host close at their next use"
        );
    }
}

/// The watcher: on each trouble report, searches the hosts until one accepts writes, and moves
/// the pool there. Runs until the pool's owner aborts it.
pub(crate) async fn watch(failover: std::sync::Arc<Failover>, pool: PgPool) {
    loop {
        failover.trouble.notified().await;
        let mut pause = FIRST_PAUSE;
        loop {
            match failover.first_writable().await {
                Ok(index) => {
                    failover.move_to(&pool, index);
                    break;
                }
                Err(causes) => {
                    tracing::warn!(
                        causes = %causes.join("; "),
                        retry_in_ms = pause.as_millis() as u64,
                        "no host of database.url accepts writes; looking again"
                    );
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
            }
        }
        // Reports that arrive right after a search (connections still failing on the old host)
        // are answered by that search; a short quiet time keeps them from starting another.
        tokio::time::sleep(SLOW_ACQUIRE).await;
    }
}

/// Whether `connection`'s session is read-only (a standby, or `default_transaction_read_only`).
///
/// # Errors
/// The statement failed (the connection is broken).
pub(crate) async fn is_read_only(connection: &mut PgConnection) -> sqlx::Result<bool> {
    sqlx::query_scalar(READ_ONLY).fetch_one(connection).await
}

/// One attempt at `host`: a session within `timeout` that may write.
async fn probe(host: &PgConnectOptions, timeout: Duration) -> Result<(), String> {
    let attempt = async {
        let mut connection = host.connect().await.map_err(|e| e.to_string())?;
        let read_only = is_read_only(&mut connection).await;
        let _ = connection.close().await;
        match read_only {
            Ok(false) => Ok(()),
            Ok(true) => Err("accepts no writes (transaction_read_only is on)".to_owned()),
            Err(error) => Err(error.to_string()),
        }
    };
    tokio::time::timeout(timeout, attempt)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} ms", timeout.as_millis())))
}

/// `host:port` of `options`, for log lines.
pub(crate) fn describe(options: &PgConnectOptions) -> String {
    format!("{}:{}", options.get_host(), options.get_port())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failover() -> Failover {
        let host = |name: &str| PgConnectOptions::new_without_pgpass().host(name).port(5432);
        Failover::new(
            vec![host("db1"), host("db2")],
            0,
            Duration::from_secs(30),
            Secret::new("hunter2"),
        )
    }

    #[test]
    fn a_search_is_bounded_by_the_shorter_timeout() {
        assert_eq!(failover().probe_timeout, PROBE_TIMEOUT);
        let quick = Failover::new(vec![], 0, Duration::from_secs(2), Secret::new(""));
        assert_eq!(quick.probe_timeout, Duration::from_secs(2));
    }

    #[test]
    fn connections_opened_before_a_move_are_recognised() {
        let failover = failover();
        assert!(!failover.opened_before_move(Duration::from_secs(3600)));
        *failover.moved_at.lock().expect("lock") =
            Some(Instant::now() - Duration::from_millis(500));
        assert!(failover.opened_before_move(Duration::from_secs(1)));
        assert!(!failover.opened_before_move(Duration::from_millis(10)));
    }

    #[test]
    fn the_current_host_starts_where_the_start_found_one() {
        let failover = Failover::new(
            vec![
                PgConnectOptions::new_without_pgpass().host("db1"),
                PgConnectOptions::new_without_pgpass().host("db2"),
            ],
            1,
            Duration::from_secs(1),
            Secret::new(""),
        );
        assert_eq!(failover.current_options().get_host(), "db2");
    }
}

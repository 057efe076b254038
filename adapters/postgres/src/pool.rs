//! The connection pool: sqlx's `PgPool` behind a wrapper that measures every acquire and release.
//!
//! Code of this crate (and of later statements) takes connections through [`Pool::acquire`], so
//! the HikariCP-named metrics of [`crate::pool_metrics`] see them. [`Pool::sqlx`] hands out the raw
//! pool for code that needs an executor; it works, but is not measured.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queuebox_ports::metrics::MAIN_POOL_NAME;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgConnection, PgPool, Postgres};
use tokio::task::JoinHandle;

use crate::error::PostgresError;
use crate::failover::{self, Failover};
use crate::pool_metrics::PoolMetrics;

/// HikariCP's `minimumIdle` counterpart. The pool opens connections on demand, up to `poolSize`,
/// and closes idle ones after ten minutes (sqlx's default, the same as HikariCP's).
pub(crate) const MIN_CONNECTIONS: u32 = 0;

/// How often the sampler refreshes the size gauges and the `_max` windows.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

tokio::task_local! {
    /// When the acquire running in this task started; read by the `after_connect` hook to time
    /// the creation of a physical connection (the hook runs inside that acquire's poll).
    static ACQUIRE_STARTED: Instant;
}

/// The measured connection pool. Cloning shares the pool.
#[derive(Debug, Clone)]
pub struct Pool {
    inner: PgPool,
    metrics: Arc<PoolMetrics>,
    sampler: Arc<TaskHandle>,
    /// The hosts of a multi-host URL and the task that moves the pool between them.
    failover: Option<(Arc<Failover>, Arc<TaskHandle>)>,
}

/// A background task of the pool, aborted when the last clone of the pool goes.
#[derive(Debug)]
struct TaskHandle(JoinHandle<()>);

impl Drop for TaskHandle {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Pool {
    /// Builds a pool that opens its connections on first use with `connect`.
    pub(crate) fn new(connect: PgConnectOptions, size: u32, acquire_timeout: Duration) -> Self {
        Self::build(connect, size, acquire_timeout, None)
    }

    /// Builds a pool on the current host of `failover` that moves to another host of a
    /// multi-host URL when this one goes away or turns read-only (see [`crate::failover`]).
    pub(crate) fn with_failover(failover: Failover, size: u32, acquire_timeout: Duration) -> Self {
        let connect = failover.current_options();
        Self::build(connect, size, acquire_timeout, Some(Arc::new(failover)))
    }

    fn build(
        connect: PgConnectOptions,
        size: u32,
        acquire_timeout: Duration,
        failover: Option<Arc<Failover>>,
    ) -> Self {
        let metrics = Arc::new(PoolMetrics::new(MAIN_POOL_NAME, MIN_CONNECTIONS, size));
        metrics.register();
        let on_connect = Arc::clone(&metrics);
        let check_new = failover.clone();
        let base_port = connect.get_port();
        let mut options = PgPoolOptions::new()
            .max_connections(size)
            .min_connections(MIN_CONNECTIONS)
            .acquire_timeout(acquire_timeout)
            .after_connect(move |connection, _meta| {
                if let Ok(started) = ACQUIRE_STARTED.try_with(|started| *started) {
                    on_connect.created(started.elapsed());
                }
                let port = check_new
                    .as_ref()
                    .map_or(base_port, |failover| failover.current_options().get_port());
                turn_nagle_off(port);
                let check_new = check_new.clone();
                Box::pin(async move {
                    match check_new {
                        Some(failover) => failover.after_connect(connection).await,
                        None => Ok(()),
                    }
                })
            });
        if let Some(failover) = &failover {
            // The read-only check replaces sqlx's ping: one round trip either way.
            let check_idle = Arc::clone(failover);
            options = options
                .test_before_acquire(false)
                .before_acquire(move |connection, meta| {
                    let check_idle = Arc::clone(&check_idle);
                    Box::pin(async move { check_idle.before_acquire(connection, meta).await })
                });
        }
        let inner = options.connect_lazy_with(connect);
        let sampler = tokio::spawn(sample(inner.clone(), Arc::clone(&metrics)));
        let failover = failover.map(|failover| {
            let watcher = tokio::spawn(failover::watch(Arc::clone(&failover), inner.clone()));
            (failover, Arc::new(TaskHandle(watcher)))
        });
        Self {
            inner,
            metrics,
            sampler: Arc::new(TaskHandle(sampler)),
            failover,
        }
    }

    /// A connection from the pool, waiting at most `database.connectionTimeoutMs`.
    ///
    /// # Errors
    /// [`PostgresError::PoolTimedOut`] when no connection became free in time (counted in
    /// `hikaricp_connections_timeout_total`), or the error that opening a connection gave.
    pub async fn acquire(&self) -> Result<PooledConnection, PostgresError> {
        let started = Instant::now();
        let result = {
            let _pending = self.metrics.start_pending();
            let acquire = ACQUIRE_STARTED.scope(started, self.inner.acquire());
            match &self.failover {
                Some((failover, _)) => failover.watch_acquire(acquire).await,
                None => acquire.await,
            }
        };
        self.sample();
        match result {
            Ok(connection) => {
                self.metrics.acquired(started.elapsed());
                Ok(PooledConnection {
                    connection,
                    acquired_at: Instant::now(),
                    pool: self.clone(),
                })
            }
            Err(sqlx::Error::PoolTimedOut) => {
                self.metrics.timed_out();
                Err(PostgresError::PoolTimedOut)
            }
            Err(error) => Err(error.into()),
        }
    }

    /// The raw sqlx pool, for an executor; its acquires are not measured.
    pub fn sqlx(&self) -> &PgPool {
        &self.inner
    }

    /// Closes every connection and waits for the borrowed ones to come back.
    pub async fn close(&self) {
        if let Some((_, watcher)) = &self.failover {
            watcher.0.abort();
        }
        self.inner.close().await;
        self.sampler.0.abort();
        self.sample();
    }

    /// Whether [`Pool::close`] ran.
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    fn sample(&self) {
        self.metrics
            .sample(self.inner.size(), self.inner.num_idle());
    }
}

async fn sample(pool: PgPool, metrics: Arc<PoolMetrics>) {
    let mut ticks = tokio::time::interval(SAMPLE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        metrics.sample(pool.size(), pool.num_idle());
    }
}

/// A connection taken from [`Pool`]; returning it (drop) records its usage time.
#[derive(Debug)]
pub struct PooledConnection {
    connection: PoolConnection<Postgres>,
    acquired_at: Instant,
    pool: Pool,
}

impl PooledConnection {
    /// Closes the physical connection instead of returning it, for a session whose state is
    /// uncertain (for example a session lock that could not be released).
    pub fn close(mut self) {
        self.connection.close_on_drop();
    }
}

impl Deref for PooledConnection {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        &self.connection
    }
}

impl DerefMut for PooledConnection {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.connection
    }
}

impl Drop for PooledConnection {
    fn drop(&mut self) {
        self.pool.metrics.released(self.acquired_at.elapsed());
        // The connection itself goes back (or closes) when the field drops, right after this.
        self.pool.sample();
    }
}

/// Sets `TCP_NODELAY` on the connection just opened (see [`crate::nodelay`]); a failure is logged
/// once, since every later connection would fail the same way.
fn turn_nagle_off(port: u16) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    match crate::nodelay::set_on_sockets_to_port(port) {
        Ok(pass) => tracing::trace!(found = pass.found, changed = pass.changed, "TCP_NODELAY on database sockets"),
        Err(error) => WARNED.call_once(|| {
            tracing::warn!(
                %error,
                "could not set TCP_NODELAY on the database connections (pidfd_getfd refused: in a container, add the SYS_PTRACE capability); over TLS each statement may then wait up to 40 ms for the server's delayed acknowledgement"
            );
        }),
    }
}

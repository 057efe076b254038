//! The pool's metrics under the documented HikariCP names, label `pool`.
//!
//! How each one is measured (sqlx has no pool metrics of its own):
//! - `connections`, `idle`, `active` come from the pool's own counters (`size`, `num_idle`), set
//!   after every acquire and release and by a sampler once a second, because sqlx returns a
//!   released connection to the idle queue in the background.
//! - `pending` counts callers inside [`crate::pool::Pool::acquire`]; `timeout_total` counts acquires
//!   that ran out of `connectionTimeoutMs`.
//! - `acquire_seconds` times a successful acquire; `usage_seconds` times a connection from acquire
//!   to release.
//! - `creation_seconds` is timed from the start of the acquire that opened a physical connection
//!   to the moment sqlx's `after_connect` hook sees it ready. sqlx 0.9 has no hook before a
//!   connect, so a caller that first waited for a free slot includes that wait (rare: it needs a
//!   connection that broke while the pool was full).
//! - Each `_max` gauge is the largest value recorded in the current one-minute window; the sampler
//!   sets it back to zero when a window passes without a recording.
//!
//! Only acquires through [`crate::pool::Pool`] are measured; the raw sqlx pool is unmetered.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};
use queuebox_ports::metrics as names;

/// The length of the window of each `_max` gauge.
pub(crate) const MAX_WINDOW: Duration = Duration::from_secs(60);

/// The largest value seen in the current window.
#[derive(Debug)]
pub(crate) struct WindowMax {
    window: Duration,
    state: Mutex<(Instant, f64)>,
}

impl WindowMax {
    pub(crate) fn new(window: Duration) -> Self {
        Self {
            window,
            state: Mutex::new((Instant::now(), 0.0)),
        }
    }

    /// Records `value` and returns the window's maximum.
    pub(crate) fn record(&self, value: f64, now: Instant) -> f64 {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if now.duration_since(state.0) >= self.window {
            *state = (now, value);
        } else if value > state.1 {
            state.1 = value;
        }
        state.1
    }

    /// The window's maximum, or zero once the window has passed without a recording.
    pub(crate) fn current(&self, now: Instant) -> f64 {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if now.duration_since(state.0) >= self.window {
            *state = (now, 0.0);
        }
        state.1
    }
}

/// A summary with its `_max` gauge.
#[derive(Debug)]
struct Timing {
    summary: Histogram,
    max_gauge: Gauge,
    max: WindowMax,
}

impl Timing {
    fn new(name: &'static str, pool: &'static str) -> Self {
        Self {
            summary: histogram!(name, "pool" => pool),
            max_gauge: gauge!(format!("{name}{}", names::MAX_SUFFIX), "pool" => pool),
            max: WindowMax::new(MAX_WINDOW),
        }
    }

    fn record(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        self.summary.record(seconds);
        self.max_gauge.set(self.max.record(seconds, Instant::now()));
    }

    fn refresh(&self) {
        self.max_gauge.set(self.max.current(Instant::now()));
    }
}

/// Records the metrics of one pool.
///
/// The handles are resolved once, from the recorder installed when the pool is built: every
/// acquire and release sets about twenty series, and looking each one up by name and label on
/// every request cost more CPU than the request's own work on the duplicate path.
#[derive(Debug)]
pub(crate) struct PoolMetrics {
    min: u32,
    max: u32,
    pending: AtomicU64,
    connections: Gauge,
    idle: Gauge,
    active: Gauge,
    min_gauge: Gauge,
    max_gauge: Gauge,
    pending_gauge: Gauge,
    timeouts: Counter,
    acquire: Timing,
    creation: Timing,
    usage: Timing,
}

impl PoolMetrics {
    pub(crate) fn new(pool: &'static str, min: u32, max: u32) -> Self {
        Self {
            min,
            max,
            pending: AtomicU64::new(0),
            connections: gauge!(names::POOL_CONNECTIONS, "pool" => pool),
            idle: gauge!(names::POOL_CONNECTIONS_IDLE, "pool" => pool),
            active: gauge!(names::POOL_CONNECTIONS_ACTIVE, "pool" => pool),
            min_gauge: gauge!(names::POOL_CONNECTIONS_MIN, "pool" => pool),
            max_gauge: gauge!(names::POOL_CONNECTIONS_MAX, "pool" => pool),
            pending_gauge: gauge!(names::POOL_CONNECTIONS_PENDING, "pool" => pool),
            timeouts: counter!(names::POOL_CONNECTIONS_TIMEOUT_TOTAL, "pool" => pool),
            acquire: Timing::new(names::POOL_CONNECTIONS_ACQUIRE_SECONDS, pool),
            creation: Timing::new(names::POOL_CONNECTIONS_CREATION_SECONDS, pool),
            usage: Timing::new(names::POOL_CONNECTIONS_USAGE_SECONDS, pool),
        }
    }

    /// A caller starts waiting for a connection; the returned guard ends the wait when dropped,
    /// so a cancelled acquire is not counted forever.
    pub(crate) fn start_pending(&self) -> PendingGuard<'_> {
        let now = self.pending.fetch_add(1, Ordering::SeqCst) + 1;
        self.set_pending(now);
        PendingGuard { metrics: self }
    }

    fn set_pending(&self, value: u64) {
        self.pending_gauge.set(value as f64);
    }

    pub(crate) fn acquired(&self, elapsed: Duration) {
        self.acquire.record(elapsed);
    }

    pub(crate) fn timed_out(&self) {
        self.timeouts.increment(1);
    }

    pub(crate) fn created(&self, elapsed: Duration) {
        self.creation.record(elapsed);
    }

    pub(crate) fn released(&self, used_for: Duration) {
        self.usage.record(used_for);
    }

    /// Sets the size gauges from the pool's counters and refreshes the `_max` windows.
    pub(crate) fn sample(&self, size: u32, idle: usize) {
        let size = f64::from(size);
        let idle = idle as f64;
        self.connections.set(size);
        self.idle.set(idle);
        self.active.set((size - idle).max(0.0));
        self.min_gauge.set(f64::from(self.min));
        self.max_gauge.set(f64::from(self.max));
        self.set_pending(self.pending.load(Ordering::SeqCst));
        self.acquire.refresh();
        self.creation.refresh();
        self.usage.refresh();
    }

    /// Makes every series exist from the start, so a scrape shows the pool before its first use.
    pub(crate) fn register(&self) {
        self.timeouts.absolute(0);
        self.sample(0, 0);
    }
}

/// Ends one pending acquire when dropped.
pub(crate) struct PendingGuard<'a> {
    metrics: &'a PoolMetrics,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        let now = self.metrics.pending.fetch_sub(1, Ordering::SeqCst) - 1;
        self.metrics.set_pending(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_max_keeps_the_largest_value_until_the_window_passes() {
        let max = WindowMax::new(Duration::from_secs(60));
        let start = Instant::now();
        assert_eq!(max.record(0.5, start), 0.5);
        assert_eq!(max.record(0.2, start + Duration::from_secs(1)), 0.5);
        assert_eq!(max.current(start + Duration::from_secs(30)), 0.5);
        // A new window starts from the next value, or from zero when nothing was recorded.
        assert_eq!(max.record(0.1, start + Duration::from_secs(61)), 0.1);
        assert_eq!(max.current(start + Duration::from_secs(200)), 0.0);
    }
}

//! The pool's HikariCP-named metrics, seen through a local recorder.
//!
//! Its own test binary, because a metrics recorder is global to the process.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{TestDb, eventually};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_util::registry::{AtomicStorage, Registry};
use queuebox_domain::mapping::SchemaNames;
use queuebox_ports::metrics as names;
use queuebox_postgres::{PostgresError, connect};

/// A recorder that keeps every value readable (the debugging recorder of metrics-util resets
/// counters and gauges on each snapshot, which would hide the current value).
#[derive(Clone)]
struct Seen {
    registry: Arc<Registry<Key, AtomicStorage>>,
}

impl Recorder for Seen {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        self.registry
            .get_or_create_counter(key, |c| Counter::from_arc(Arc::clone(c)))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        self.registry
            .get_or_create_gauge(key, |g| Gauge::from_arc(Arc::clone(g)))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        self.registry
            .get_or_create_histogram(key, |h| Histogram::from_arc(Arc::clone(h)))
    }
}

impl Seen {
    fn key(name: &str) -> Key {
        Key::from_parts(
            name.to_owned(),
            vec![metrics::Label::new("pool", names::MAIN_POOL_NAME)],
        )
    }

    /// The current value of a counter or gauge labelled `pool="queuebox"`.
    fn scalar(&self, name: &str) -> Option<f64> {
        let key = Self::key(name);
        if let Some(gauge) = self.registry.get_gauge_handles().get(&key) {
            return Some(f64::from_bits(gauge.load(Ordering::SeqCst)));
        }
        self.registry
            .get_counter_handles()
            .get(&key)
            .map(|counter| counter.load(Ordering::SeqCst) as f64)
    }

    /// How many values a histogram labelled `pool="queuebox"` received.
    fn samples(&self, name: &str) -> usize {
        self.registry
            .get_histogram_handles()
            .get(&Self::key(name))
            .map_or(0, |histogram| histogram.data().len())
    }
}

fn max_name(name: &str) -> String {
    format!("{name}{}", names::MAX_SUFFIX)
}

#[tokio::test]
async fn pool_metrics_follow_acquire_release_and_timeouts() {
    let seen = Seen {
        registry: Arc::new(Registry::atomic()),
    };
    metrics::set_global_recorder(seen.clone()).expect("install the recorder");

    let db = TestDb::create().await;
    let mut options = db.options(false, SchemaNames::default());
    options.pool_size = 1;
    options.connection_timeout = Duration::from_millis(300);
    let database = connect(&options).await.expect("connect");

    // Every series exists before the first use.
    assert_eq!(seen.scalar(names::POOL_CONNECTIONS_MAX), Some(1.0));
    assert_eq!(seen.scalar(names::POOL_CONNECTIONS_MIN), Some(0.0));
    assert_eq!(
        seen.scalar(names::POOL_CONNECTIONS_TIMEOUT_TOTAL),
        Some(0.0)
    );
    assert_eq!(seen.scalar(names::POOL_CONNECTIONS_PENDING), Some(0.0));

    let held = database.pool().acquire().await.expect("acquire");
    assert_eq!(seen.scalar(names::POOL_CONNECTIONS), Some(1.0));
    assert_eq!(seen.scalar(names::POOL_CONNECTIONS_ACTIVE), Some(1.0));
    assert_eq!(seen.scalar(names::POOL_CONNECTIONS_IDLE), Some(0.0));
    assert!(seen.samples(names::POOL_CONNECTIONS_CREATION_SECONDS) >= 1);
    assert!(seen.samples(names::POOL_CONNECTIONS_ACQUIRE_SECONDS) >= 1);
    let creation_max = seen
        .scalar(&max_name(names::POOL_CONNECTIONS_CREATION_SECONDS))
        .expect("creation max");
    assert!(creation_max > 0.0, "{creation_max}");

    // A second caller waits (pending), then times out (counted).
    let pool = database.pool().clone();
    let waiter = tokio::spawn(async move { pool.acquire().await.map(|_| ()) });
    let pending_seen = eventually(Duration::from_secs(5), || {
        let seen = seen.clone();
        async move { seen.scalar(names::POOL_CONNECTIONS_PENDING) == Some(1.0) }
    })
    .await;
    assert!(pending_seen, "the waiting caller never showed as pending");
    let outcome = waiter.await.expect("join");
    assert!(
        matches!(outcome, Err(PostgresError::PoolTimedOut)),
        "{outcome:?}"
    );
    assert_eq!(
        seen.scalar(names::POOL_CONNECTIONS_TIMEOUT_TOTAL),
        Some(1.0)
    );
    assert_eq!(seen.scalar(names::POOL_CONNECTIONS_PENDING), Some(0.0));

    // Returning the connection records its usage time; the pool shows it idle soon after.
    tokio::time::sleep(Duration::from_millis(20)).await; // a measurable usage time
    drop(held);
    assert!(seen.samples(names::POOL_CONNECTIONS_USAGE_SECONDS) >= 1);
    let usage_max = seen
        .scalar(&max_name(names::POOL_CONNECTIONS_USAGE_SECONDS))
        .expect("usage max");
    assert!(usage_max >= 0.02, "{usage_max}");
    let idle = eventually(Duration::from_secs(5), || {
        let seen = seen.clone();
        async move {
            seen.scalar(names::POOL_CONNECTIONS_IDLE) == Some(1.0)
                && seen.scalar(names::POOL_CONNECTIONS_ACTIVE) == Some(0.0)
        }
    })
    .await;
    assert!(idle, "the released connection never showed as idle");

    // A reused connection is not counted as a new creation.
    let creations = seen.samples(names::POOL_CONNECTIONS_CREATION_SECONDS);
    let again = database.pool().acquire().await.expect("acquire again");
    drop(again);
    assert_eq!(
        seen.samples(names::POOL_CONNECTIONS_CREATION_SECONDS),
        creations
    );

    database.close().await;
    db.drop_now().await;
}

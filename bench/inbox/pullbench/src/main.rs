//! Pull-claim throughput of the Rust pull client: WORKERS `InboxWorker`s on one source, each with
//! its own claim loop, a no-op handler, run until EXPECT rows were handled (or TIMEOUT seconds).
//!
//! Prints one line: `handled=N rate=R first_ms=F wall_ms=W processed=P left=L`, where `rate` is
//! (N-1) / (time of the N-th handler call - time of the 1st), so pool connect and the first claim
//! are not in it (on a timeout: rows handled by then, over the time since the 1st call), and
//! `processed`/`left` are counted in the database after the workers stopped.
//!
//! It also prints `worker_cpu_ms` (this process, user + system) and `pg_cpu_ms` (the PostgreSQL
//! backends of the bench's connections, read from /proc before the pool closes), and the two per
//! handled row in microseconds: on a shared machine CPU time per row is steadier than rows/s.
//!
//! Usage: qb-inbox-pullbench --url URL --source S --expect N [--workers 4] [--batch 10]
//!        [--concurrency 1] [--timeout 120] [--test-before-acquire true]
//!
//! `--test-before-acquire` is the sqlx pool setting of that name (default `true`, as in sqlx): with
//! it, every connection taken from the pool is first pinged, one more round trip per handled row.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use queuebox_inbox::{InboxWorker, Options, handler_fn};
use sqlx::postgres::PgPoolOptions;
use tokio::sync::watch;

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_owned())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = arg(
        &args,
        "--url",
        "postgres://queuebox:queuebox@127.0.0.1:5432/queuebox",
    );
    let source = arg(&args, "--source", "bench");
    let expect: u64 = arg(&args, "--expect", "50000").parse().expect("--expect");
    let workers: usize = arg(&args, "--workers", "4").parse().expect("--workers");
    let batch: u32 = arg(&args, "--batch", "10").parse().expect("--batch");
    let concurrency: usize = arg(&args, "--concurrency", "1")
        .parse()
        .expect("--concurrency");
    let timeout: u64 = arg(&args, "--timeout", "120").parse().expect("--timeout");
    let test_before_acquire: bool = arg(&args, "--test-before-acquire", "true")
        .parse()
        .expect("--test-before-acquire");

    // Each worker: one claim connection plus one transaction per running handler.
    let pool_size = u32::try_from(workers * (concurrency + 1) + 2).unwrap_or(100);
    let pool = PgPoolOptions::new()
        .max_connections(pool_size)
        .min_connections(pool_size)
        .test_before_acquire(test_before_acquire)
        .connect(&url)
        .await
        .expect("connect to PostgreSQL");

    let started = Instant::now();
    let handled = Arc::new(AtomicU64::new(0));
    // Nanoseconds since `started` of the first and of the expect-th handler call.
    let first_ns = Arc::new(AtomicU64::new(0));
    let last_ns = Arc::new(AtomicU64::new(0));
    let (stop_tx, stop_rx) = watch::channel(false);
    let stop_tx = Arc::new(stop_tx);

    let mut runs = Vec::new();
    for _ in 0..workers {
        let mut options = Options::new(source.clone());
        options.batch_size = batch;
        options.max_concurrency = concurrency;
        options.poll_interval = Duration::from_millis(100);
        options.shutdown_grace = Duration::from_secs(10);
        let worker = InboxWorker::new(pool.clone(), options).expect("worker options");
        let (handled, first_ns, last_ns, stop_tx) = (
            handled.clone(),
            first_ns.clone(),
            last_ns.clone(),
            stop_tx.clone(),
        );
        let handler = handler_fn(move |_message, _tx| {
            let n = handled.fetch_add(1, Ordering::Relaxed) + 1;
            let now = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            if n == 1 {
                first_ns.store(now, Ordering::Relaxed);
            }
            if n == expect {
                last_ns.store(now, Ordering::Relaxed);
                let _ = stop_tx.send(true);
            }
            Box::pin(async { Ok(()) })
        });
        let mut stop = stop_rx.clone();
        runs.push(tokio::spawn(async move {
            worker
                .run(handler, async move {
                    let _ = stop.wait_for(|stopped| *stopped).await;
                })
                .await;
        }));
    }

    let mut stop = stop_rx.clone();
    let timed_out = tokio::time::timeout(Duration::from_secs(timeout), stop.wait_for(|s| *s))
        .await
        .is_err();
    // On a timeout the rate is taken over the rows handled until now, before the drain.
    let cut_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let handled_at_cut = handled.load(Ordering::Relaxed);
    let _ = stop_tx.send(true);
    for run in runs {
        let _ = run.await;
    }
    let wall = started.elapsed();

    let n = handled.load(Ordering::Relaxed);
    let first = first_ns.load(Ordering::Relaxed);
    let (last, counted) = if timed_out {
        (cut_ns, handled_at_cut)
    } else {
        (last_ns.load(Ordering::Relaxed), expect)
    };
    let span = (last.saturating_sub(first)) as f64 / 1e9;
    let rate = if span > 0.0 {
        counted.saturating_sub(1) as f64 / span
    } else {
        0.0
    };
    let worker_cpu = cpu_ticks("self");
    let backends: Vec<(i32,)> =
        sqlx::query_as("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            .fetch_all(&pool)
            .await
            .expect("list backends");
    let pg_cpu: u64 = backends
        .iter()
        .map(|(pid,)| cpu_ticks(&pid.to_string()))
        .sum();
    let (processed, left): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE state = 'processed'), count(*) FILTER (WHERE state <> 'processed') \
         FROM inbox WHERE source = $1",
    )
    .bind(&source)
    .fetch_one(&pool)
    .await
    .expect("count rows");
    println!(
        "handled={n} rate={rate:.0} first_ms={} wall_ms={} processed={processed} left={left} timed_out={timed_out}",
        first / 1_000_000,
        wall.as_millis()
    );
    let (worker_ms, pg_ms) = (ticks_ms(worker_cpu), ticks_ms(pg_cpu));
    let per_row = |ms: u64| {
        if n > 0 {
            ms as f64 * 1000.0 / n as f64
        } else {
            0.0
        }
    };
    println!(
        "cpu worker_cpu_ms={worker_ms} pg_cpu_ms={pg_ms} worker_us_per_row={:.0} pg_us_per_row={:.0}",
        per_row(worker_ms),
        per_row(pg_ms)
    );
}

/// User + system CPU ticks of a process (`self` or a pid), 0 when unreadable.
fn cpu_ticks(pid: &str) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // Fields after the command name, which is in parentheses and may hold spaces.
    let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
        return 0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line: indexes 11 and 12 after the name.
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(11) + field(12)
}

/// Clock ticks to milliseconds; Linux reports 100 ticks a second (USER_HZ).
fn ticks_ms(ticks: u64) -> u64 {
    ticks * 10
}

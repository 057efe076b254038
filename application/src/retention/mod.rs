//! The retention cleanup: deletes finished rows of the outbox and the inbox that their table's policy
//! no longer keeps, so `sent`, `dead` and `processed` rows do not pile up and slow the claims down.
//!
//! ```text
//!  per table: run ──► each sweep: delete ≤ batchSize ──► full batch? delete again : next sweep
//!     ▲                                                     (stop requested: return between batches)
//!     └── wait cleanupInterval (30 s at most after a failed run) ◄── metrics, health
//! ```
//!
//! Every batch is one short statement of its own, so a run never holds a lock for long and never
//! waits for a row the dispatcher, the relay or a pull client holds (the store skips those). Each
//! replica runs its own cleanup; two replicas cleaning at once skip each other's rows.

mod plan;

pub use plan::TablePlan;

use crate::lifecycle::StopSignal;
use crate::telemetry::CleanupMetrics;
use crate::worker_health::WorkerHealth;
use queuebox_ports::health::HealthCheck;
use queuebox_ports::outbox::StoreError;
use queuebox_ports::retention::RetentionStore;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// The health component name.
pub const COMPONENT: &str = "retention-service";

/// After a failed run the next one comes this soon (or after the interval, if shorter), so a passing
/// database fault does not keep the component down for a whole interval.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(30);

/// How one run of a table ended.
#[derive(Debug, PartialEq, Eq)]
enum RunEnd {
    /// Every sweep ran until a short batch.
    Complete,
    /// The stop was requested between two batches.
    Stopped,
}

struct Table {
    plan: TablePlan,
    metrics: CleanupMetrics,
    next_run: Instant,
    /// Why the table's last run failed; `None` after a complete run.
    last_failure: Option<String>,
}

/// One replica's retention cleanup.
pub struct RetentionService {
    store: Arc<dyn RetentionStore>,
    tables: Vec<Table>,
    health: Arc<WorkerHealth>,
}

impl RetentionService {
    /// A cleanup of the tables with a plan; its metrics are registered here. The first run of each
    /// table starts as soon as the service runs.
    pub fn new(store: Arc<dyn RetentionStore>, plans: Vec<TablePlan>) -> Self {
        let now = Instant::now();
        let tables = plans
            .into_iter()
            .map(|plan| Table {
                metrics: CleanupMetrics::new(plan.table.as_str()),
                plan,
                next_run: now,
                last_failure: None,
            })
            .collect();
        Self {
            store,
            tables,
            health: Arc::new(WorkerHealth::with_failure(COMPONENT, "cleanup fails")),
        }
    }

    /// The `retention-service` health component.
    pub fn health_check(&self) -> Arc<dyn HealthCheck> {
        Arc::clone(&self.health) as Arc<dyn HealthCheck>
    }

    /// Runs until `stop` fires. A batch in flight when the stop comes is finished (one short
    /// statement); no further batch starts.
    pub async fn run(mut self, mut stop: StopSignal) {
        tracing::info!(
            tables = ?self.tables.iter().map(|t| t.plan.table.as_str()).collect::<Vec<_>>(),
            "retention cleanup started"
        );
        'running: while !stop.is_stopping() {
            let Some(due) = self.tables.iter().map(|t| t.next_run).min() else {
                // Retention is on but every table is DISABLED: nothing to do until the stop.
                stop.stopped().await;
                break;
            };
            tokio::select! {
                _ = tokio::time::sleep_until(due) => {}
                _ = stop.stopped() => break,
            }
            for table in self
                .tables
                .iter_mut()
                .filter(|t| t.next_run <= Instant::now())
            {
                let outcome = run_table(self.store.as_ref(), table, &stop).await;
                let wait = match outcome {
                    Ok(RunEnd::Stopped) => break 'running,
                    Ok(RunEnd::Complete) => {
                        table.last_failure = None;
                        table.plan.interval
                    }
                    Err(error) => {
                        table.last_failure =
                            Some(format!("{}: {error}", table.plan.table.as_str()));
                        table.plan.interval.min(RETRY_AFTER_FAILURE)
                    }
                };
                table.next_run = Instant::now() + wait;
            }
            self.report_health();
        }
        self.health.stopped();
        tracing::info!("retention cleanup stopped");
    }

    /// Down while the last run of any table failed.
    fn report_health(&self) {
        let failures: Vec<&str> = self
            .tables
            .iter()
            .filter_map(|t| t.last_failure.as_deref())
            .collect();
        if failures.is_empty() {
            self.health.run_succeeded();
        } else {
            self.health.run_failed(failures.join("; "));
        }
    }
}

/// One run of one table: every sweep, batch after batch, until a batch comes back short.
async fn run_table(
    store: &dyn RetentionStore,
    table: &Table,
    stop: &StopSignal,
) -> Result<RunEnd, StoreError> {
    let started = Instant::now();
    let name = table.plan.table.as_str();
    let batch = table.plan.batch_size;
    let mut total = 0_u64;
    let mut end = RunEnd::Complete;
    let mut failure = None;
    'sweeps: for sweep in &table.plan.sweeps {
        loop {
            if stop.is_stopping() {
                end = RunEnd::Stopped;
                break 'sweeps;
            }
            match store.delete_batch(sweep, batch).await {
                Ok(deleted) => {
                    total += deleted;
                    // Counted per batch, so a run that fails later still shows what it removed.
                    table.metrics.deleted.increment(deleted);
                    if deleted < u64::from(batch) {
                        break;
                    }
                    // Between two batches, let the stop and other tasks of this thread in.
                    tokio::task::yield_now().await;
                }
                Err(error) => {
                    failure = Some(error);
                    break 'sweeps;
                }
            }
        }
    }
    let took = started.elapsed();
    table.metrics.duration.record(took);
    match failure {
        Some(error) => {
            tracing::warn!(table = name, deleted = total, %error, "retention cleanup run failed");
            Err(error)
        }
        None => {
            if end == RunEnd::Complete {
                // Only a complete run moves the timestamp, so an alert on its age catches a cleanup
                // that keeps failing as well as one that stopped.
                table.metrics.last_run.set(unix_seconds());
            }
            tracing::info!(
                table = name,
                deleted = total,
                took_ms = took.as_millis() as u64,
                ?end,
                "retention cleanup run"
            );
            Ok(end)
        }
    }
}

fn unix_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests;

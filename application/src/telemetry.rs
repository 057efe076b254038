//! Typed metric events of the application. Every metric this crate records goes through here, with
//! its name taken from `queuebox_ports::metrics`, so the scrape matches the documented names.

use queuebox_ports::metrics as names;
use queuebox_ports::publish::PublishErrorKind;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a `_max` gauge remembers its largest value before it starts again.
const MAX_WINDOW: Duration = Duration::from_secs(60);

/// The largest value seen in the current window, mirrored into a `_max` gauge.
pub struct WindowMax {
    state: Mutex<(Instant, f64)>,
    gauge: metrics::Gauge,
}

impl WindowMax {
    /// Tracks the maximum for `gauge`.
    pub fn new(gauge: metrics::Gauge) -> Self {
        Self {
            state: Mutex::new((Instant::now(), 0.0)),
            gauge,
        }
    }

    /// Records one observation.
    pub fn record(&self, value: f64) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let now = Instant::now();
        if now.duration_since(state.0) > MAX_WINDOW {
            *state = (now, 0.0);
        }
        if value > state.1 {
            state.1 = value;
        }
        self.gauge.set(state.1);
    }
}

/// A summary and its `_max` gauge.
pub struct Timer {
    summary: metrics::Histogram,
    max: WindowMax,
}

impl Timer {
    fn new(summary: metrics::Histogram, max: metrics::Gauge) -> Self {
        Self {
            summary,
            max: WindowMax::new(max),
        }
    }

    /// Records one duration.
    pub fn record(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        self.summary.record(seconds);
        self.max.record(seconds);
    }
}

/// The outbox metrics, registered once per dispatcher so the hot path does no name lookups.
pub struct OutboxMetrics {
    /// `queuebox_outbox_messages_total{status="sent"}`.
    pub sent: metrics::Counter,
    /// `queuebox_outbox_messages_total{status="failed"}`.
    pub failed: metrics::Counter,
    /// `queuebox_outbox_messages_total{status="dead"}`.
    pub dead: metrics::Counter,
    /// `queuebox_outbox_messages_reclaimed_total`.
    pub reclaimed: metrics::Counter,
    /// `queuebox_claims_lost_total{component="outbox"}`.
    pub claims_lost: metrics::Counter,
    /// `queuebox_outbox_process_errors_total`.
    pub process_errors: metrics::Counter,
    /// `queuebox_outbox_processing_duration_seconds` and its `_max`.
    pub processing: Timer,
}

impl Default for OutboxMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl OutboxMetrics {
    /// Registers the fixed-label outbox metrics.
    pub fn new() -> Self {
        let status = |value: &'static str| metrics::counter!(names::OUTBOX_MESSAGES_TOTAL, "status" => value);
        Self {
            sent: status("sent"),
            failed: status("failed"),
            dead: status("dead"),
            reclaimed: metrics::counter!(names::OUTBOX_MESSAGES_RECLAIMED_TOTAL),
            claims_lost: metrics::counter!(names::CLAIMS_LOST_TOTAL, "component" => "outbox"),
            process_errors: metrics::counter!(names::OUTBOX_PROCESS_ERRORS_TOTAL),
            processing: Timer::new(
                metrics::histogram!(names::OUTBOX_PROCESSING_DURATION_SECONDS),
                metrics::gauge!(max_name(names::OUTBOX_PROCESSING_DURATION_SECONDS)),
            ),
        }
    }
}

/// The outbox's pending gauges: `queuebox_outbox_messages_pending`,
/// `queuebox_outbox_oldest_pending_age_seconds` and `queuebox_outbox_queue_depth{destination}`.
///
/// Unlike the other metrics they are registered by the dispatcher's first count, not at start: a
/// scrape before that count shows no value instead of a zero nobody measured (the first count comes
/// one interval after start, see the dispatcher's maintenance). They are set once per
/// `outbox.pendingGaugeIntervalMs` at most, so the name lookup of each set does not matter.
pub struct OutboxPendingGauges;

impl OutboxPendingGauges {
    /// Sets the total pending count and the age of the oldest pending row.
    pub fn set_pending(pending: u64, oldest_age: Duration) {
        metrics::gauge!(names::OUTBOX_MESSAGES_PENDING).set(pending as f64);
        metrics::gauge!(names::OUTBOX_OLDEST_PENDING_AGE_SECONDS).set(oldest_age.as_secs_f64());
    }

    /// Sets the pending count of one destination.
    pub fn set_queue_depth(destination: &str, pending: u64) {
        metrics::gauge!(names::OUTBOX_QUEUE_DEPTH, "destination" => destination.to_owned())
            .set(pending as f64);
    }
}

/// The per-destination metrics, registered when the destination is wired.
pub struct DestinationMetrics {
    /// `queuebox_outbox_destination_messages_total{destination, outcome="success"}`.
    pub success: metrics::Counter,
    /// `queuebox_outbox_destination_messages_total{destination, outcome="failure"}`.
    pub failure: metrics::Counter,
    /// `queuebox_outbox_publish_duration_seconds{destination_type}` and its `_max`.
    pub publish: Timer,
    destination: String,
    destination_type: &'static str,
}

impl DestinationMetrics {
    /// Registers the metrics of one destination.
    pub fn new(destination: &str, destination_type: &'static str) -> Self {
        let outcome = |value: &'static str| {
            metrics::counter!(
                names::OUTBOX_DESTINATION_MESSAGES_TOTAL,
                "destination" => destination.to_owned(),
                "outcome" => value
            )
        };
        Self {
            success: outcome("success"),
            failure: outcome("failure"),
            publish: Timer::new(
                metrics::histogram!(names::OUTBOX_PUBLISH_DURATION_SECONDS, "destination_type" => destination_type),
                metrics::gauge!(
                    max_name(names::OUTBOX_PUBLISH_DURATION_SECONDS),
                    "destination_type" => destination_type
                ),
            ),
            destination: destination.to_owned(),
            destination_type,
        }
    }

    /// A failed publish: `queuebox_outbox_destination_messages_total{outcome="failure"}` and
    /// `queuebox_outbox_publish_failures_total{destination, destination_type, kind}`, so a nack, an
    /// unroutable message and an unreachable broker can be told apart. The second is recorded by
    /// name when it happens, so a kind appears in the scrape only after its first failure (a
    /// handle per kind and destination, registered at start, would be mostly zeros).
    pub fn publish_failed(&self, kind: PublishErrorKind) {
        self.failure.increment(1);
        metrics::counter!(
            names::OUTBOX_PUBLISH_FAILURES_TOTAL,
            "destination" => self.destination.clone(),
            "destination_type" => self.destination_type,
            "kind" => kind.as_str()
        )
        .increment(1);
    }
}

/// `<name>_max`, the gauge beside a summary.
fn max_name(summary: &str) -> String {
    format!("{summary}{}", names::MAX_SUFFIX)
}

/// The inbox relay metrics, registered once per relay.
pub struct RelayMetrics {
    /// `queuebox_inbox_messages_total{status="forwarded"}`.
    pub forwarded: metrics::Counter,
    /// `queuebox_inbox_relay_errors_total`.
    pub errors: metrics::Counter,
    /// `queuebox_claims_lost_total{component="inbox"}`.
    pub claims_lost: metrics::Counter,
    /// `queuebox_inbox_oldest_pending_age_seconds`.
    pub oldest_pending_age: metrics::Gauge,
}

impl Default for RelayMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl RelayMetrics {
    /// Registers the relay metrics.
    pub fn new() -> Self {
        Self {
            forwarded: metrics::counter!(names::INBOX_MESSAGES_TOTAL, "status" => "forwarded"),
            errors: metrics::counter!(names::INBOX_RELAY_ERRORS_TOTAL),
            claims_lost: metrics::counter!(names::CLAIMS_LOST_TOTAL, "component" => "inbox"),
            oldest_pending_age: metrics::gauge!(names::INBOX_OLDEST_PENDING_AGE_SECONDS),
        }
    }
}

/// The retention cleanup metrics of one table, registered when the cleanup starts.
pub struct CleanupMetrics {
    /// `queuebox_cleanup_messages_deleted_total{table}`.
    pub deleted: metrics::Counter,
    /// `queuebox_cleanup_duration_seconds{table}` and its `_max`.
    pub duration: Timer,
    /// `queuebox_cleanup_last_run_timestamp{table}`: Unix seconds of the last complete run.
    pub last_run: metrics::Gauge,
}

impl CleanupMetrics {
    /// Registers the cleanup metrics of `table` (`outbox` or `inbox`).
    pub fn new(table: &'static str) -> Self {
        Self {
            deleted: metrics::counter!(names::CLEANUP_MESSAGES_DELETED_TOTAL, "table" => table),
            duration: Timer::new(
                metrics::histogram!(names::CLEANUP_DURATION_SECONDS, "table" => table),
                metrics::gauge!(max_name(names::CLEANUP_DURATION_SECONDS), "table" => table),
            ),
            last_run: metrics::gauge!(names::CLEANUP_LAST_RUN_TIMESTAMP, "table" => table),
        }
    }
}

/// The ingest metrics. Each is recorded by name at the moment it happens, so a status, reason or
/// source appears in the scrape only after its first occurrence, as the metrics reference says.
pub struct IngestEvents;

impl IngestEvents {
    /// `queuebox_inbox_messages_total{status="new"}`: a row was stored.
    pub fn stored() {
        metrics::counter!(names::INBOX_MESSAGES_TOTAL, "status" => "new").increment(1);
    }

    /// `queuebox_inbox_messages_total{status="duplicate"}`: the source already held the key.
    pub fn duplicate() {
        metrics::counter!(names::INBOX_MESSAGES_TOTAL, "status" => "duplicate").increment(1);
    }

    /// `queuebox_inbox_rejections_total{reason="extraction_failed"}`: the body is not JSON or the
    /// idempotency key path found nothing.
    pub fn extraction_failed() {
        metrics::counter!(names::INBOX_REJECTIONS_TOTAL, "reason" => "extraction_failed")
            .increment(1);
    }

    /// `queuebox_inbox_rejections_total{reason="transform_failed"}`: the source transform failed
    /// with `Fail` or `Dead`.
    pub fn transform_failed() {
        metrics::counter!(names::INBOX_REJECTIONS_TOTAL, "reason" => "transform_failed")
            .increment(1);
    }

    /// `queuebox_inbox_rejections_total{reason="storage_failed"}`: the insert failed.
    pub fn storage_failed() {
        metrics::counter!(names::INBOX_REJECTIONS_TOTAL, "reason" => "storage_failed").increment(1);
    }

    /// `queuebox_inbox_filtered_total{source}`: the source's header filter dropped a message.
    pub fn filtered(source: &str) {
        metrics::counter!(names::INBOX_FILTERED_TOTAL, "source" => source.to_owned()).increment(1);
    }
}

/// `queuebox_transform_failures_total{strategy}`: a route or destination transform failed, and
/// the block's `onError` strategy (`Fail`, `Skip` or `Dead`) decided what followed.
pub fn transform_failed(strategy: queuebox_ports::transform::ErrorStrategy) {
    metrics::counter!(names::TRANSFORM_FAILURES_TOTAL, "strategy" => strategy.as_str())
        .increment(1);
}

/// The capture metrics (additions; see `queuebox_ports::metrics`).
pub struct CaptureMetrics {
    /// `queuebox_capture_changes_total{kind="insert"}`.
    pub inserts: metrics::Counter,
    /// `queuebox_capture_changes_total{kind="ignored"}`.
    pub ignored: metrics::Counter,
    /// `queuebox_capture_wakes_total{origin="log"}`.
    pub log_wakes: metrics::Counter,
    /// `queuebox_capture_wakes_total{origin="start"}`.
    pub start_wakes: metrics::Counter,
    /// `queuebox_capture_wakes_total{origin="peer"}`.
    pub peer_wakes: metrics::Counter,
    /// `queuebox_capture_lag_bytes`.
    pub lag_bytes: metrics::Gauge,
    /// `queuebox_capture_commit_to_wake_seconds` and its `_max`.
    pub commit_to_wake: Timer,
}

/// The statuses of `queuebox_capture_status`.
pub const CAPTURE_STATUSES: [&str; 5] = ["starting", "streaming", "paused", "retrying", "stopped"];

impl CaptureMetrics {
    /// Registers the capture metrics.
    pub fn new() -> Self {
        Self {
            inserts: metrics::counter!(names::CAPTURE_CHANGES_TOTAL, "kind" => "insert"),
            ignored: metrics::counter!(names::CAPTURE_CHANGES_TOTAL, "kind" => "ignored"),
            log_wakes: metrics::counter!(names::CAPTURE_WAKES_TOTAL, "origin" => "log"),
            start_wakes: metrics::counter!(names::CAPTURE_WAKES_TOTAL, "origin" => "start"),
            peer_wakes: metrics::counter!(names::CAPTURE_WAKES_TOTAL, "origin" => "peer"),
            lag_bytes: metrics::gauge!(names::CAPTURE_LAG_BYTES),
            commit_to_wake: Timer::new(
                metrics::histogram!(names::CAPTURE_COMMIT_TO_WAKE_SECONDS),
                metrics::gauge!(max_name(names::CAPTURE_COMMIT_TO_WAKE_SECONDS)),
            ),
        }
    }

    /// Sets `queuebox_capture_status` to `status` (one of [`CAPTURE_STATUSES`]).
    pub fn status(&self, status: &str) {
        for each in CAPTURE_STATUSES {
            let value = if each == status { 1.0 } else { 0.0 };
            metrics::gauge!(names::CAPTURE_STATUS, "status" => each).set(value);
        }
    }
}

impl Default for CaptureMetrics {
    fn default() -> Self {
        Self::new()
    }
}

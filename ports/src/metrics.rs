//! Every metric name QueueBox exposes, in one place, with the label names they carry.
//!
//! The names match the documented scrape exactly (the metrics reference page), including the pool
//! family that keeps its documented `hikaricp_` names so existing alerts work unchanged. Code that
//! records a metric uses these constants; nothing else spells a metric name.

/// Build information gauge, always 1, label `version`. Scraped as `queuebox{version="..."}`.
pub const BUILD_INFO: &str = "queuebox";
/// Seconds since the process started.
pub const UPTIME_SECONDS: &str = "queuebox_uptime_seconds";

/// Outbox delivery outcomes, label `status` = sent | failed | dead.
pub const OUTBOX_MESSAGES_TOTAL: &str = "queuebox_outbox_messages_total";
/// Outbox rows waiting for a publish.
pub const OUTBOX_MESSAGES_PENDING: &str = "queuebox_outbox_messages_pending";
/// Rows returned to pending after a stale claim.
pub const OUTBOX_MESSAGES_RECLAIMED_TOTAL: &str = "queuebox_outbox_messages_reclaimed_total";
/// Age of the oldest pending outbox row.
pub const OUTBOX_OLDEST_PENDING_AGE_SECONDS: &str = "queuebox_outbox_oldest_pending_age_seconds";
/// Terminal writes that lost their claim, label `component` = outbox | inbox.
pub const CLAIMS_LOST_TOTAL: &str = "queuebox_claims_lost_total";
/// Errors that stopped the processing of one outbox message.
pub const OUTBOX_PROCESS_ERRORS_TOTAL: &str = "queuebox_outbox_process_errors_total";
/// Time to process one outbox message (summary; `_max` gauge beside it).
pub const OUTBOX_PROCESSING_DURATION_SECONDS: &str = "queuebox_outbox_processing_duration_seconds";
/// Time to publish one message, label `destination_type` (summary; `_max` gauge beside it).
pub const OUTBOX_PUBLISH_DURATION_SECONDS: &str = "queuebox_outbox_publish_duration_seconds";
/// Messages per destination and outcome, labels `destination`, `outcome` = success | failure.
pub const OUTBOX_DESTINATION_MESSAGES_TOTAL: &str = "queuebox_outbox_destination_messages_total";
/// Failed publishes by cause, labels `destination`, `destination_type` and `kind` (the
/// [`crate::publish::PublishErrorKind`] label: rejected | timeout | unreachable | auth |
/// invalid_message | other). Not in the documented scrape: an addition (features.md).
pub const OUTBOX_PUBLISH_FAILURES_TOTAL: &str = "queuebox_outbox_publish_failures_total";
/// Messages waiting for one destination, label `destination`.
pub const OUTBOX_QUEUE_DEPTH: &str = "queuebox_outbox_queue_depth";
/// HTTP publish responses, label `status_class` = 1xx | 2xx | 3xx | 4xx | 5xx | other.
pub const HTTP_PUBLISH_RESPONSES_TOTAL: &str = "queuebox_http_publish_responses_total";
/// Transform failures, label `strategy`.
pub const TRANSFORM_FAILURES_TOTAL: &str = "queuebox_transform_failures_total";
/// Inbox messages, label `status` = new | forwarded | duplicate.
pub const INBOX_MESSAGES_TOTAL: &str = "queuebox_inbox_messages_total";
/// Errors of the inbox relay.
pub const INBOX_RELAY_ERRORS_TOTAL: &str = "queuebox_inbox_relay_errors_total";
/// Rejected inbox messages, label `reason` = extraction_failed | transform_failed | storage_failed.
pub const INBOX_REJECTIONS_TOTAL: &str = "queuebox_inbox_rejections_total";
/// Messages a source's header filter dropped, label `source`.
pub const INBOX_FILTERED_TOTAL: &str = "queuebox_inbox_filtered_total";
/// Age of the oldest pending inbox row.
pub const INBOX_OLDEST_PENDING_AGE_SECONDS: &str = "queuebox_inbox_oldest_pending_age_seconds";
/// Rows deleted by retention, label `table`.
pub const CLEANUP_MESSAGES_DELETED_TOTAL: &str = "queuebox_cleanup_messages_deleted_total";
/// Duration of one cleanup run, label `table` (summary; `_max` gauge beside it).
pub const CLEANUP_DURATION_SECONDS: &str = "queuebox_cleanup_duration_seconds";
/// Unix time of the last cleanup run, label `table`.
pub const CLEANUP_LAST_RUN_TIMESTAMP: &str = "queuebox_cleanup_last_run_timestamp";

// Change data capture. The documentation names no capture metric; these are additions
// (features.md), each under the queuebox_capture_ prefix.
/// Outbox changes capture read from the log, label `kind`: `insert` (wakes delivery) or `ignored`
/// (updates, deletes and truncates, which never do).
pub const CAPTURE_CHANGES_TOTAL: &str = "queuebox_capture_changes_total";
/// Wake-ups given to the dispatcher, label `origin`: `log` (a committed insert), `start` (each
/// capture attempt, standing in for a snapshot) or `peer` (the owner's notice on another replica).
pub const CAPTURE_WAKES_TOTAL: &str = "queuebox_capture_wakes_total";
/// Seconds from a transaction's commit (server clock) to the wake-up capture gave for it: how
/// long the log took to reach QueueBox (summary; `_max` gauge beside it).
pub const CAPTURE_COMMIT_TO_WAKE_SECONDS: &str = "queuebox_capture_commit_to_wake_seconds";
/// Bytes of log between the server's current position and the slot's confirmed one: what the slot
/// keeps from being released beyond what capture has handled.
pub const CAPTURE_LAG_BYTES: &str = "queuebox_capture_lag_bytes";
/// 1 for the capture status in force and 0 for the others, label `status`: `starting`,
/// `streaming`, `retrying` or `stopped` (a fault that needs an operator).
pub const CAPTURE_STATUS: &str = "queuebox_capture_status";

/// Connections in the pool, idle and active; label `pool` on every pool metric.
pub const POOL_CONNECTIONS: &str = "hikaricp_connections";
/// Connections a caller holds.
pub const POOL_CONNECTIONS_ACTIVE: &str = "hikaricp_connections_active";
/// Free connections.
pub const POOL_CONNECTIONS_IDLE: &str = "hikaricp_connections_idle";
/// Callers waiting for a connection.
pub const POOL_CONNECTIONS_PENDING: &str = "hikaricp_connections_pending";
/// Configured minimum idle connections.
pub const POOL_CONNECTIONS_MIN: &str = "hikaricp_connections_min";
/// Configured maximum pool size.
pub const POOL_CONNECTIONS_MAX: &str = "hikaricp_connections_max";
/// Connection requests that timed out.
pub const POOL_CONNECTIONS_TIMEOUT_TOTAL: &str = "hikaricp_connections_timeout_total";
/// Time to acquire a pooled connection (summary; `_max` gauge beside it).
pub const POOL_CONNECTIONS_ACQUIRE_SECONDS: &str = "hikaricp_connections_acquire_seconds";
/// Time to create a physical connection (summary; `_max` gauge beside it).
pub const POOL_CONNECTIONS_CREATION_SECONDS: &str = "hikaricp_connections_creation_seconds";
/// Time a caller held a connection (summary; `_max` gauge beside it).
pub const POOL_CONNECTIONS_USAGE_SECONDS: &str = "hikaricp_connections_usage_seconds";

/// The suffix of the gauge that carries the largest value of a summary's current window.
pub const MAX_SUFFIX: &str = "_max";

/// Spans of the message path that trace export dropped, label `reason`: `queue_full` (the bounded
/// export queue was full) or `export_failed` (the collector refused them or could not be reached).
/// Export never holds a delivery back: a span that cannot be sent is counted here and dropped.
pub const TRACING_SPANS_DROPPED_TOTAL: &str = "queuebox_tracing_spans_dropped_total";

/// The `pool` label value of the main database pool.
pub const MAIN_POOL_NAME: &str = "queuebox";

//! The retention cleanup's plans, from `retention.*`.

use queuebox_application::retention::TablePlan;
use queuebox_config::{RetentionKind, RetentionPolicy, RetentionSettings};

/// The plan of each table whose policy is not `DISABLED`. The configuration already refused a
/// policy without its `maxAge` or `maxCount`, and `COUNT` on the inbox.
pub fn plans(settings: &RetentionSettings) -> Vec<TablePlan> {
    let outbox = &settings.outbox;
    let inbox = &settings.inbox;
    let outbox_plan = match (outbox.policy, outbox.max_age, outbox.max_count) {
        (RetentionKind::Age, Some(max_age), _) => Some(TablePlan::outbox_by_age(
            max_age,
            outbox.cleanup_interval,
            outbox.batch_size,
        )),
        (RetentionKind::Count, _, Some(keep)) => Some(TablePlan::outbox_by_count(
            keep,
            outbox.cleanup_interval,
            outbox.batch_size,
        )),
        _ => None,
    };
    let inbox_plan = match (inbox.policy, inbox.max_age) {
        (RetentionKind::Age, Some(max_age)) => Some(TablePlan::inbox_by_age(
            max_age,
            inbox.cleanup_interval,
            inbox.batch_size,
        )),
        _ => None,
    };
    for (table, policy, plan) in [
        ("outbox", outbox, &outbox_plan),
        ("inbox", inbox, &inbox_plan),
    ] {
        log_plan(table, policy, plan.is_some());
    }
    outbox_plan.into_iter().chain(inbox_plan).collect()
}

fn log_plan(table: &str, policy: &RetentionPolicy, planned: bool) {
    if planned {
        tracing::info!(
            table,
            policy = ?policy.policy,
            max_age_s = policy.max_age.map(|age| age.as_secs()),
            max_count = policy.max_count,
            interval_s = policy.cleanup_interval.as_secs(),
            batch_size = policy.batch_size,
            "retention on"
        );
    } else {
        tracing::info!(table, "retention off for this table");
    }
}

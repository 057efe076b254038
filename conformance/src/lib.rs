//! The port conformance suites of QueueBox: one generic test body per promise a port documents,
//! and a macro that expands them into `#[tokio::test]` functions for one adapter.
//!
//! Three suites:
//!
//! - [`store`]: the outbox, relay, inbox, replay and retention stores of one database
//!   ([`store::StoreFixture`], [`store_conformance_suite!`]).
//! - [`publish`]: one destination kind behind the [`queuebox_ports::publish::Publisher`] port
//!   ([`publish::PublisherFixture`], [`publisher_conformance_suite!`]).
//! - [`source`]: one broker source kind behind the
//!   [`queuebox_ports::source::SourceClient`] port, run by the application's source driver
//!   ([`source::SourceFixture`], [`source_conformance_suite!`]). The fixture, in the adapter's
//!   test, wires the driver; this crate stays on the ports.
//!
//! Test kits the adapters' own tests share: [`recorder::Recorder`], a scripted stand-in for the
//! ingest port that records what a source hands it; [`proxy::FaultProxy`], a loopback TCP proxy a
//! test holds, releases or cuts in front of a real broker; and [`wait::wait_for`], the
//! deadline-bound polling loop.
//!
//! The suites test the port contract only: what the traits in `queuebox-ports` say an adapter
//! MUST do, observed through the ports themselves and through a small fixture the adapter
//! implements (insert a row the application would insert, read a row's state, let a lease pass).
//! They hold no SQL, no HTTP and no AMQP. Product details (query plans, SQLSTATEs, schema checks,
//! headers on the wire) stay in each adapter's own tests.
//!
//! This crate is a `[dev-dependencies]` entry only; nothing that ships depends on it. It depends
//! on the domain and the ports, never on an adapter or the application.
//!
//! # Running the suites for a new adapter
//!
//! An adapter adds one file, `tests/conformance.rs`, and this crate (plus `tokio`, which the
//! generated tests use) to its `[dev-dependencies]`:
//!
//! ```toml
//! [dev-dependencies]
//! queuebox-conformance = { workspace = true }
//! tokio = { workspace = true }
//! ```
//!
//! For a database, the file implements [`store::StoreFixture`] on a fresh, migrated database per
//! test and invokes the store macro:
//!
//! ```ignore
//! use queuebox_conformance::store::{StoreFixture, NewOutboxRow, OutboxRowView, InboxRowView};
//!
//! struct SqlServerFixture { /* a fresh database, its stores, a session to inspect it */ }
//!
//! #[async_trait::async_trait]
//! impl StoreFixture for SqlServerFixture {
//!     async fn fresh() -> Self { /* create, migrate, connect */ }
//!     fn outbox(&self) -> Arc<dyn OutboxStore> { /* ... */ }
//!     // ... the other stores and the few inspection helpers
//! }
//!
//! queuebox_conformance::store_conformance_suite!(SqlServerFixture);
//! ```
//!
//! For a destination kind, the file implements [`publish::PublisherFixture`] (an accepting, a
//! refusing, an unreachable and a silent destination) and invokes the publisher macro:
//!
//! ```ignore
//! queuebox_conformance::publisher_conformance_suite!(KafkaFixture);
//! ```
//!
//! Each macro expands to one `#[tokio::test]` per test body, named after the body, so a failure
//! names the promise that was broken (`cargo test -p queuebox-kafka --test conformance`). The
//! adapter is done when its suites pass; the suites, the domain and the other adapters do not
//! change to admit it.

pub mod proxy;
pub mod publish;
pub mod recorder;
pub mod source;
pub mod store;
pub mod wait;

/// Expands to one `#[tokio::test]` per store conformance test, each run against a fresh
/// `$fixture` (a type implementing [`store::StoreFixture`]).
#[macro_export]
macro_rules! store_conformance_suite {
    ($fixture:ty) => {
        $crate::__conformance_tests!(store, $fixture;
            outbox_claim_takes_a_due_row_with_a_token_and_a_lease,
            outbox_claim_honours_the_limit,
            outbox_fenced_finish_writes_sent_retry_and_dead,
            outbox_a_stale_token_is_refused_and_the_current_one_still_works,
            outbox_a_second_finish_of_one_claim_is_refused,
            outbox_finish_and_renew_after_the_lease_expired_are_refused,
            outbox_renew_extends_a_held_lease_only,
            outbox_reclaim_returns_an_expired_lease_to_pending,
            outbox_release_returns_the_row_at_once_without_an_attempt,
            outbox_rows_of_one_key_go_one_at_a_time_in_insert_order,
            outbox_a_retry_holds_its_key_and_dead_releases_it,
            outbox_rows_without_a_key_null_or_empty_are_unordered,
            outbox_pending_stats_count_pending_rows_and_age_the_oldest,
            outbox_next_deadline_is_the_earliest_future_retry,
            relay_claims_one_row_per_aggregate_and_push_rows_only,
            relay_fenced_forward_writes_the_outbox_row_and_marks_the_inbox_row_processed,
            relay_a_lost_fence_writes_nothing,
            relay_mark_dead_is_fenced_and_releases_the_aggregate,
            relay_reclaim_returns_an_expired_claim_to_pending,
            inbox_insert_stores_a_new_message_once_and_reports_a_duplicate,
            inbox_insert_with_a_dead_reason_stores_the_row_dead,
            inbox_insert_many_reports_duplicates_inside_the_group_and_against_stored_rows,
            inbox_concurrent_inserts_of_one_key_store_one_row,
            replay_candidates_are_sent_and_dead_rows_only_in_id_order,
            replay_selection_filters_combine,
            replay_move_to_pending_moves_only_sent_and_dead_rows,
            retention_outbox_age_deletes_only_finished_rows_past_the_policy,
            retention_outbox_count_keeps_the_newest_finished_rows,
            retention_inbox_age_deletes_only_finished_rows_past_the_policy,
        );
    };
}

/// Expands to one `#[tokio::test]` per publisher conformance test, each run against the
/// destinations `$fixture` (a type implementing [`publish::PublisherFixture`]) sets up.
#[macro_export]
macro_rules! publisher_conformance_suite {
    ($fixture:ty) => {
        $crate::__conformance_tests!(publish, $fixture;
            publish_succeeds_only_once_the_destination_took_the_message,
            publish_a_refusal_is_rejected_and_not_delivered,
            publish_an_unreachable_destination_is_unreachable,
            publish_no_answer_in_time_is_a_timeout,
            publish_failure_reasons_are_redacted_and_cut_to_the_limit,
            publish_concurrent_calls_are_each_confirmed,
            publish_a_future_dropped_mid_call_leaves_the_publisher_usable,
        );
    };
}

/// Expands to one multi-threaded `#[tokio::test]` per source conformance test, each run against
/// the broker `$fixture` (a type implementing [`source::SourceFixture`]) sets up.
#[macro_export]
macro_rules! source_conformance_suite {
    ($fixture:ty) => {
        $crate::__source_conformance_tests!($fixture;
            source_stores_once_per_key_the_first_kept,
            source_acknowledges_only_after_the_store_answered,
            source_a_failed_store_comes_again_after_the_retry_delay,
            source_a_rate_limited_store_waits_for_its_delay,
            source_a_non_json_body_becomes_a_dead_row_and_is_acknowledged,
            source_health_names_the_cause_and_recovers,
            source_stop_drains_and_ends_stopped,
            source_a_kill_between_commit_and_ack_stores_once,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __source_conformance_tests {
    ($fixture:ty; $($name:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $crate::source::$name::<$fixture>().await;
            }
        )*
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($module:ident, $fixture:ty; $($name:ident),* $(,)?) => {
        $(
            #[::tokio::test]
            async fn $name() {
                $crate::$module::$name::<$fixture>().await;
            }
        )*
    };
}

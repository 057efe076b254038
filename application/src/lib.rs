//! The use cases of QueueBox, written against the ports only: the health registry, the lifecycle of
//! background workers, and (in later issues) the dispatcher, ingest pipeline, relay, replay and
//! retention.
//!
//! This crate depends on the domain and the ports; it must never depend on an adapter.

pub mod dispatcher;
pub mod health;
pub mod ingest;
pub mod lifecycle;
pub mod relay;
pub mod replay;
pub mod retention;
pub mod telemetry;
#[cfg(test)]
mod test_metrics;
pub mod transform;
pub mod worker_health;

//! The JSONata transformer of QueueBox: the [`queuebox_ports::transform::Transformer`] port over
//! our own engine, `queuebox_jsonata`.
//!
//! How an evaluation runs, and why:
//! - Compiled once ([`JsonataTransformer::compile`]); the compiled expression is immutable and
//!   shared by every concurrent application.
//! - The payload goes in and comes out as JSON text (`evaluate_json`), so no `serde_json::Value`
//!   tree is built for the payload on the way.
//! - Each application first runs inline on the calling task with a short time budget
//!   ([`DEFAULT_INLINE_BUDGET`], 1 ms). Typical transforms finish in microseconds, so the common
//!   case pays no thread hand-off, which matters at 10,000 messages a second. An evaluation that
//!   is still running when the inline budget runs out is abandoned and started again on tokio's
//!   blocking pool with what is left of `timeoutMs`, so an async worker thread is never blocked
//!   for much longer than the inline budget, whatever `timeoutMs` says. At most
//!   [`JsonataTransformer::slow_lane_width`] slow evaluations run at once; more wait (without
//!   blocking a worker), so runaway expressions cannot take every core.
//!   The restart repeats the work of the first millisecond; expressions are pure, except that
//!   `$now()`, `$millis()` and `$random()` give the values of the second run.
//!
//! This crate depends on the domain, the ports and the engine only.

mod bindings;
mod compiled;
mod errors;

pub use compiled::{DEFAULT_INLINE_BUDGET, JsonataTransform, JsonataTransformer};

//! Change data capture, the pure part: log positions, what makes a recorded position meaningful
//! (the scope and its fingerprint), and the start-time comparison of the database's record, the
//! state files and the settings that decides whether capture may run.
//!
//! Capture only wakes delivery, so nothing here decides the fate of a row; a wrong decision costs
//! latency or a replay of wake-ups, never a message.

pub mod lsn;
pub mod reconcile;
pub mod scope;

pub use lsn::Lsn;
pub use reconcile::{Fault, FilesState, Plan, Recorded, reconcile};
pub use scope::{CaptureScope, wake_channel};

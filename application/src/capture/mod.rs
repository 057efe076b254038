//! Change data capture: the owner's runner that streams the database log and wakes delivery, the
//! follower that passes the owner's wake-ups to the other replicas, and the wake-up itself.
//!
//! Capture only wakes the dispatcher; the dispatcher still claims every row through SQL, so a lost
//! or late wake-up costs latency and never a message.

mod files;
mod follower;
mod health;
mod keeper;
mod runner;
mod wake;

#[cfg(test)]
mod tests;

pub use follower::follow_wakes;
pub use runner::{CaptureOptions, CaptureRunner};
pub use wake::{DeliveryWake, IdleWaking};

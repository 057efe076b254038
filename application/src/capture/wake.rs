//! The wake-up that capture gives the outbox dispatcher, and how long the dispatcher may sleep
//! when none comes.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// A wake-up for the dispatcher's claim loop. Waking while the loop is busy is kept (one pending
/// wake-up), so an insert seen during a claim still triggers the next one.
#[derive(Debug, Clone, Default)]
pub struct DeliveryWake(Arc<Notify>);

impl DeliveryWake {
    /// A wake-up nobody has signalled yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Wakes the claim loop now, or at its next wait when it is busy.
    pub fn wake(&self) {
        self.0.notify_one();
    }

    /// Waits for a wake-up.
    pub async fn woken(&self) {
        self.0.notified().await;
    }
}

/// How an idle dispatcher that can be woken waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleWaking {
    /// Poll every `outbox.pollIntervalMs` as without capture, and claim at once on a wake-up (a
    /// replica that follows another's capture).
    Poll,
    /// Sleep until a wake-up, the next retry falls due, or `reconciliation` passes, whichever comes
    /// first (the replica that owns capture).
    Reconcile(Duration),
}

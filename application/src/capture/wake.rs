//! The wake-up that capture gives the outbox dispatcher, and how long the dispatcher may sleep
//! when none comes.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// A wake-up for the dispatcher's claim loop, and the loop's word on whether it is working off a
/// backlog. Waking while the loop is busy is kept (one pending wake-up), so an insert seen during a
/// claim still triggers the next one.
#[derive(Debug, Clone)]
pub struct DeliveryWake {
    notify: Arc<Notify>,
    /// `true` while every claim comes back full (or rows wait in hand): the loop claims again
    /// without waiting, so a wake-up changes nothing.
    backlog: Arc<watch::Sender<bool>>,
}

impl Default for DeliveryWake {
    fn default() -> Self {
        Self {
            notify: Arc::default(),
            backlog: Arc::new(watch::channel(false).0),
        }
    }
}

impl DeliveryWake {
    /// A wake-up nobody has signalled yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Wakes the claim loop now, or at its next wait when it is busy.
    pub fn wake(&self) {
        self.notify.notify_one();
    }

    /// Waits for a wake-up.
    pub async fn woken(&self) {
        self.notify.notified().await;
    }

    /// The claim loop says whether it is working off a backlog.
    pub fn set_backlog(&self, backlog: bool) {
        self.backlog.send_if_modified(|current| {
            let changed = *current != backlog;
            *current = backlog;
            changed
        });
    }

    /// Returns once the claim loop has reported a backlog for `length` without a break.
    pub async fn backlog_lasted(&self, length: Duration) {
        let mut backlog = self.backlog.subscribe();
        loop {
            // The sender lives as long as `self`: these waits end only by a change.
            let _ = backlog.wait_for(|b| *b).await;
            tokio::select! {
                () = tokio::time::sleep(length) => return,
                _ = backlog.wait_for(|b| !*b) => {}
            }
        }
    }

    /// Returns once the claim loop reports no backlog (at once when it reports none now).
    pub async fn backlog_ended(&self) {
        let _ = self.backlog.subscribe().wait_for(|b| !*b).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_backlog_counts_only_when_it_lasts_without_a_break() {
        let wake = DeliveryWake::new();
        let lasted = {
            let wake = wake.clone();
            tokio::spawn(async move {
                wake.backlog_lasted(Duration::from_secs(1)).await;
                tokio::time::Instant::now()
            })
        };
        let start = tokio::time::Instant::now();
        wake.set_backlog(true);
        tokio::time::sleep(Duration::from_millis(600)).await;
        // A short claim breaks the backlog: the second starts the second over.
        wake.set_backlog(false);
        tokio::time::sleep(Duration::from_millis(100)).await;
        wake.set_backlog(true);
        let at = lasted.await.expect("the waiter ran");
        assert_eq!(at - start, Duration::from_millis(1_700));
    }

    #[tokio::test(start_paused = true)]
    async fn the_end_of_a_backlog_is_seen_at_once_and_no_backlog_is_one_already() {
        let wake = DeliveryWake::new();
        tokio::time::timeout(Duration::from_millis(1), wake.backlog_ended())
            .await
            .expect("no backlog reported: nothing to wait for");
        wake.set_backlog(true);
        assert!(
            tokio::time::timeout(Duration::from_secs(5), wake.backlog_ended())
                .await
                .is_err(),
            "ended while the backlog was still reported"
        );
        let ended = {
            let wake = wake.clone();
            tokio::spawn(async move { wake.backlog_ended().await })
        };
        tokio::task::yield_now().await;
        wake.set_backlog(false);
        tokio::time::timeout(Duration::from_millis(1), ended)
            .await
            .expect("the end was seen")
            .expect("the waiter ran");
    }
}

//! How long the claim loop waits after a claim that did not fill its batch.
//!
//! Waiting the whole `outbox.pollIntervalMs` after every short claim makes a row written at a steady
//! trickle wait half a poll interval on average (measured: p50 49.5 ms at 1,000 rows a second with a
//! 100 ms interval), because the claim right after a finish mostly comes too early for the next
//! commit and then sleeps the full interval. While rows keep arriving, the loop instead polls after a
//! short wait that doubles with every empty claim: 1 ms, 2 ms, 4 ms, ... up to the poll interval.
//! Once one poll interval has passed without finding a row, the loop is idle and polls every
//! interval, as configured, so an idle replica costs the database what the setting says.

use std::time::{Duration, Instant};

/// The first wait after a claim that found rows.
const FIRST_WAIT: Duration = Duration::from_millis(1);

/// How long after a capture wake-up an empty claim is followed by quick ones. Logical decoding can
/// stream a commit a few milliseconds before other sessions see the transaction (measured: 0.1 to
/// 5 ms, for about one commit in ten), so the claim the wake-up triggers may find nothing; without
/// this window the row then waited for the next reconciliation pass.
const WAKE_WINDOW: Duration = Duration::from_millis(100);

/// The state of the backoff between claims.
#[derive(Debug)]
pub(crate) struct IdleWait {
    poll_interval: Duration,
    /// When a claim last found rows; `None` before the first one.
    last_found: Option<Instant>,
    /// The wait after the next empty claim while still active.
    next: Duration,
    /// Until when empty claims are retried quickly after a wake-up.
    woken_until: Option<Instant>,
    /// Whether rows found keep the loop polling quickly. Not with capture: every new row comes
    /// with a wake-up and every finished key with the finisher's, so those quick claims found
    /// nothing and only stood in the way of the claim a wake-up asked for.
    follow_activity: bool,
}

impl IdleWait {
    pub(crate) fn new(poll_interval: Duration) -> Self {
        Self {
            poll_interval,
            last_found: None,
            next: FIRST_WAIT,
            woken_until: None,
            follow_activity: true,
        }
    }

    /// A wait that polls quickly only inside the window after a wake-up (capture's owner).
    pub(crate) fn woken_only(poll_interval: Duration) -> Self {
        Self {
            follow_activity: false,
            ..Self::new(poll_interval)
        }
    }

    /// Records a capture wake-up at `now`: empty claims within the next [`WAKE_WINDOW`] are
    /// followed by quick ones (1 ms, doubling), in case the woken-for row is not yet visible.
    pub(crate) fn woken(&mut self, now: Instant) {
        self.woken_until = Some(now + WAKE_WINDOW);
        self.next = FIRST_WAIT;
    }

    /// Records that the loop is busy (rows in hand) at `now` without claiming.
    pub(crate) fn mark_active(&mut self, now: Instant) {
        self.last_found = Some(now);
        self.next = FIRST_WAIT;
    }

    /// Records the outcome of a claim made at `now` and returns how long to wait before the next one
    /// (when the claim was not full; a full claim is followed by another at once by the caller).
    pub(crate) fn after_claim(&mut self, found_rows: bool, now: Instant) -> Duration {
        if found_rows {
            self.mark_active(now);
        }
        let active = (self.follow_activity
            && self
                .last_found
                .is_some_and(|at| now.saturating_duration_since(at) < self.poll_interval))
            || self.woken_until.is_some_and(|until| now < until);
        if !active {
            return self.poll_interval;
        }
        let wait = self.next.min(self.poll_interval);
        self.next = (self.next * 2).min(self.poll_interval);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLL: Duration = Duration::from_millis(100);

    #[test]
    fn idle_from_the_start_waits_the_poll_interval() {
        let mut wait = IdleWait::new(POLL);
        let now = Instant::now();
        assert_eq!(wait.after_claim(false, now), POLL);
        assert_eq!(wait.after_claim(false, now + POLL), POLL);
    }

    #[test]
    fn rows_found_start_a_doubling_backoff() {
        let mut wait = IdleWait::new(POLL);
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(wait.after_claim(true, t0), ms(1));
        assert_eq!(wait.after_claim(false, t0 + ms(1)), ms(2));
        assert_eq!(wait.after_claim(false, t0 + ms(3)), ms(4));
        assert_eq!(wait.after_claim(false, t0 + ms(7)), ms(8));
        // Rows again: the backoff starts over.
        assert_eq!(wait.after_claim(true, t0 + ms(15)), ms(1));
        assert_eq!(wait.after_claim(false, t0 + ms(16)), ms(2));
    }

    #[test]
    fn the_wait_never_exceeds_the_poll_interval() {
        let mut wait = IdleWait::new(Duration::from_millis(5));
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(wait.after_claim(true, t0), ms(1));
        assert_eq!(wait.after_claim(false, t0 + ms(1)), ms(2));
        assert_eq!(wait.after_claim(false, t0 + ms(3)), ms(4));
        assert_eq!(wait.after_claim(false, t0 + ms(4)), ms(5));
    }

    #[test]
    fn rows_in_hand_keep_the_loop_active() {
        let mut wait = IdleWait::new(POLL);
        let t0 = Instant::now();
        wait.after_claim(true, t0);
        wait.mark_active(t0 + POLL * 5);
        assert_eq!(
            wait.after_claim(false, t0 + POLL * 5),
            Duration::from_millis(1)
        );
    }

    #[test]
    fn a_wake_up_retries_empty_claims_quickly_for_a_while_then_idles() {
        let mut wait = IdleWait::new(POLL * 50);
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(wait.after_claim(false, t0), POLL * 50);
        wait.woken(t0);
        assert_eq!(wait.after_claim(false, t0), ms(1));
        assert_eq!(wait.after_claim(false, t0 + ms(1)), ms(2));
        assert_eq!(wait.after_claim(false, t0 + ms(3)), ms(4));
        assert_eq!(wait.after_claim(false, t0 + WAKE_WINDOW), POLL * 50);
    }

    #[test]
    fn woken_only_rows_found_alone_do_not_start_quick_claims() {
        let mut wait = IdleWait::woken_only(POLL);
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(wait.after_claim(true, t0), POLL);
        wait.woken(t0 + ms(5));
        assert_eq!(wait.after_claim(false, t0 + ms(5)), ms(1));
        assert_eq!(wait.after_claim(true, t0 + ms(6)), ms(1));
        assert_eq!(wait.after_claim(false, t0 + ms(7)), ms(2));
        assert_eq!(wait.after_claim(false, t0 + ms(5) + WAKE_WINDOW), POLL);
    }

    #[test]
    fn a_poll_interval_without_rows_returns_to_idle_polling() {
        let mut wait = IdleWait::new(POLL);
        let t0 = Instant::now();
        wait.after_claim(true, t0);
        assert_eq!(wait.after_claim(false, t0 + POLL), POLL);
        assert_eq!(wait.after_claim(false, t0 + POLL * 3), POLL);
    }
}

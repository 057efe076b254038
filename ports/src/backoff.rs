//! The one backoff policy of QueueBox: a first wait, doubled per further consecutive failure, up
//! to a ceiling. Broker sources (reconnects and redeliveries), publishers (reconnects) and the
//! capture follower all wait by it, so "how long until the next try" has one answer.

use std::time::Duration;

/// The most doublings applied; past it the wait is at the ceiling for any sane `min`.
const MAX_DOUBLINGS: u32 = 20;

/// Waits that start at `min` and double per further consecutive failure, never above `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    min: Duration,
    max: Duration,
}

impl Backoff {
    /// A policy from `min` to `max`; a `max` below `min` is raised to `min`.
    pub const fn new(min: Duration, max: Duration) -> Self {
        let max = if max.as_nanos() < min.as_nanos() {
            min
        } else {
            max
        };
        Self { min, max }
    }

    /// The first wait.
    pub fn min(&self) -> Duration {
        self.min
    }

    /// The longest wait.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// The wait after `failures` consecutive failures: `min` after the first (and for 0),
    /// doubled per further failure, at most `max`.
    pub fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(MAX_DOUBLINGS);
        self.min.saturating_mul(1 << doublings).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_up_to_the_ceiling() {
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        let waits: Vec<u128> = (0..=9).map(|n| backoff.delay(n).as_millis()).collect();
        assert_eq!(
            waits,
            [100, 100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000]
        );
        assert_eq!(backoff.delay(u32::MAX), Duration::from_secs(5));
    }

    #[test]
    fn a_ceiling_below_the_first_wait_is_raised() {
        let backoff = Backoff::new(Duration::from_secs(2), Duration::from_secs(1));
        assert_eq!(backoff.max(), Duration::from_secs(2));
        assert_eq!(backoff.delay(7), Duration::from_secs(2));
    }
}

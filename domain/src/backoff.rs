//! The retry delay after a failed delivery: exponential in the attempt, with bounded jitter.
//!
//! The delay is `base × 2^attempt`, plus a random share of up to a quarter of that, and never more
//! than [`MAX_RETRY_DELAY`]. The random share is a parameter, not drawn here, so the domain stays
//! deterministic and tests can pin it; the caller draws a fraction in `[0, 1)`.

use std::time::Duration;

/// The longest delay QueueBox ever waits before a retry.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);

/// The largest share of the exponential delay that jitter adds (a quarter).
const JITTER_SHARE: f64 = 0.25;

/// The retry schedule of the outbox (`outbox.retryBaseDelayMs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
}

impl Backoff {
    /// A schedule whose first retry waits `base` (plus jitter).
    pub fn new(base: Duration) -> Self {
        Self { base }
    }

    /// A schedule from `outbox.retryBaseDelayMs`.
    pub fn from_millis(base_ms: u64) -> Self {
        Self::new(Duration::from_millis(base_ms))
    }

    /// The base delay.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The wait before the next delivery of a row that just failed with `attempt` failures before
    /// this one (the row's `attempt` column at the time of the failure).
    ///
    /// `jitter` is a random fraction in `[0, 1)`; a value outside that range (or NaN) is clamped, so
    /// a bad random source can never stretch the delay past a quarter. A negative attempt counts as
    /// zero. The result never exceeds [`MAX_RETRY_DELAY`] and never overflows, whatever the attempt.
    pub fn delay(&self, attempt: i32, jitter: f64) -> Duration {
        let cap_ms = millis(MAX_RETRY_DELAY);
        let base_ms = millis(self.base);
        // 2^attempt saturates: any shift of 64 or more (or an overflowing product) is past the cap.
        let exponent = u32::try_from(attempt.max(0)).unwrap_or(0);
        let factor = 1u64.checked_shl(exponent).unwrap_or(u64::MAX);
        let exponential_ms = base_ms.saturating_mul(factor);
        if exponential_ms >= cap_ms {
            return MAX_RETRY_DELAY;
        }
        let fraction = if jitter.is_nan() {
            0.0
        } else {
            jitter.clamp(0.0, 1.0)
        };
        // exponential_ms < 60_000 here, so the float product is exact enough and small.
        let jitter_ms = (exponential_ms as f64 * JITTER_SHARE * fraction) as u64;
        Duration::from_millis(exponential_ms.saturating_add(jitter_ms).min(cap_ms))
    }
}

/// A duration in whole milliseconds, saturating at `u64::MAX`.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(value: u64) -> Duration {
        Duration::from_millis(value)
    }

    #[test]
    fn doubles_per_attempt_without_jitter() {
        let backoff = Backoff::from_millis(1000);
        assert_eq!(backoff.delay(0, 0.0), ms(1000));
        assert_eq!(backoff.delay(1, 0.0), ms(2000));
        assert_eq!(backoff.delay(2, 0.0), ms(4000));
        assert_eq!(backoff.delay(5, 0.0), ms(32000));
    }

    #[test]
    fn jitter_adds_at_most_a_quarter() {
        let backoff = Backoff::from_millis(1000);
        assert_eq!(backoff.delay(0, 0.5), ms(1125));
        assert_eq!(backoff.delay(2, 0.999_999), ms(4999));
        for step in 0..100 {
            let jitter = f64::from(step) / 100.0;
            for attempt in 0..6 {
                let plain = backoff.delay(attempt, 0.0);
                let with = backoff.delay(attempt, jitter);
                assert!(with >= plain, "attempt {attempt} jitter {jitter}");
                assert!(
                    with <= plain + plain / 4,
                    "attempt {attempt} jitter {jitter}"
                );
            }
        }
    }

    #[test]
    fn never_exceeds_sixty_seconds() {
        let backoff = Backoff::from_millis(1000);
        // 1000 × 2^5 = 32 s, plus 25 % = 40 s; 2^6 = 64 s is capped.
        assert_eq!(backoff.delay(6, 0.0), MAX_RETRY_DELAY);
        // 1600 × 2^5 = 51.2 s is under the cap; the jitter pushes it over.
        assert_eq!(Backoff::from_millis(1600).delay(5, 0.0), ms(51_200));
        assert_eq!(Backoff::from_millis(1600).delay(5, 0.99), MAX_RETRY_DELAY);
        for attempt in [7, 31, 32, 63, 64, 65, 1000, i32::MAX] {
            assert_eq!(backoff.delay(attempt, 0.9), MAX_RETRY_DELAY, "{attempt}");
        }
        let huge = Backoff::new(Duration::MAX);
        assert_eq!(huge.delay(0, 0.0), MAX_RETRY_DELAY);
        assert_eq!(huge.delay(i32::MAX, 0.99), MAX_RETRY_DELAY);
    }

    #[test]
    fn odd_inputs_are_clamped() {
        let backoff = Backoff::from_millis(1000);
        assert_eq!(backoff.delay(-3, 0.0), ms(1000));
        assert_eq!(backoff.delay(i32::MIN, 0.0), ms(1000));
        assert_eq!(backoff.delay(0, f64::NAN), ms(1000));
        assert_eq!(backoff.delay(0, -1.0), ms(1000));
        assert_eq!(backoff.delay(0, 7.0), ms(1250));
        assert_eq!(Backoff::from_millis(0).delay(10, 0.5), Duration::ZERO);
    }
}

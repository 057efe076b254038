//! The request limit of a source (`rateLimit.requestsPerMinute`): one token bucket per source.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A token bucket that holds at most one minute of requests and refills evenly over the minute,
/// so a quiet source can take a burst of `requestsPerMinute` at once, and a busy one gets a
/// steady `requestsPerMinute / 60` per second.
#[derive(Debug)]
pub struct RateLimiter {
    capacity: f64,
    per_second: f64,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled_at: Instant,
}

impl RateLimiter {
    /// A full bucket of `requests_per_minute` tokens (at least one).
    pub fn per_minute(requests_per_minute: u32, now: Instant) -> Self {
        let capacity = f64::from(requests_per_minute.max(1));
        Self {
            capacity,
            per_second: capacity / 60.0,
            state: Mutex::new(Bucket {
                tokens: capacity,
                refilled_at: now,
            }),
        }
    }

    /// Takes one token at `now`, or says how long until one is there.
    ///
    /// # Errors
    /// The wait until the next token, when the bucket is empty.
    pub fn try_acquire(&self, now: Instant) -> Result<(), Duration> {
        // A poisoned lock only means another request panicked mid-update; the numbers in it are
        // still usable for a limit.
        let mut bucket = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let elapsed = now.saturating_duration_since(bucket.refilled_at);
        bucket.tokens =
            (bucket.tokens + elapsed.as_secs_f64() * self.per_second).min(self.capacity);
        bucket.refilled_at = bucket.refilled_at.max(now);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64(
                (1.0 - bucket.tokens) / self.per_second,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_takes_a_minute_of_requests_then_refuses() {
        let start = Instant::now();
        let limiter = RateLimiter::per_minute(3, start);
        for _ in 0..3 {
            assert_eq!(limiter.try_acquire(start), Ok(()));
        }
        let wait = limiter.try_acquire(start).expect_err("empty");
        // 3 per minute refill one token every 20 s.
        assert!(
            wait > Duration::from_secs(19) && wait <= Duration::from_secs(20),
            "{wait:?}"
        );
    }

    #[test]
    fn tokens_come_back_over_time_up_to_the_capacity() {
        let start = Instant::now();
        let limiter = RateLimiter::per_minute(60, start);
        for _ in 0..60 {
            assert!(limiter.try_acquire(start).is_ok());
        }
        assert!(limiter.try_acquire(start).is_err());
        let later = start + Duration::from_secs(1);
        assert!(limiter.try_acquire(later).is_ok());
        assert!(limiter.try_acquire(later).is_err());
        // A long pause refills to the capacity, not beyond.
        let much_later = later + Duration::from_secs(3600);
        for _ in 0..60 {
            assert!(limiter.try_acquire(much_later).is_ok());
        }
        assert!(limiter.try_acquire(much_later).is_err());
    }
}

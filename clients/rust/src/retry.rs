//! What happens to a row whose handler failed.

use std::time::Duration;

use crate::{HandlerError, Message};

/// The outcome a [`RetryPolicy`] chooses for a failed row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureAction {
    /// Back to pending; the row is claimable again after the delay, with `attempt` raised by one.
    RetryAfter(Duration),
    /// To `dead`: no claim takes it again.
    DeadLetter,
}

/// Decides between a retry and a dead letter. Implemented for any matching closure.
pub trait RetryPolicy: Send + Sync + 'static {
    fn decide(&self, message: &Message, failure: &HandlerError) -> FailureAction;
}

impl<F> RetryPolicy for F
where
    F: Fn(&Message, &HandlerError) -> FailureAction + Send + Sync + 'static,
{
    fn decide(&self, message: &Message, failure: &HandlerError) -> FailureAction {
        self(message, failure)
    }
}

/// Exponential backoff with jitter: retries while `attempt` is below `max_attempts`, waiting
/// `base_delay * 2^attempt` (at most `max_delay`), spread by `jitter` (0.2 = plus or minus 20%)
/// so that rows failing together do not return together.
#[derive(Debug, Clone, PartialEq)]
pub struct DefaultRetryPolicy {
    pub max_attempts: i32,
    pub base_delay: Duration,
    pub max_delay: Duration,
    pub jitter: f64,
}

impl Default for DefaultRetryPolicy {
    /// 5 attempts, 1 second base, 5 minute ceiling, 20% jitter: six deliveries in all, because the
    /// first delivery is attempt 0.
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(300),
            jitter: 0.2,
        }
    }
}

impl DefaultRetryPolicy {
    /// The delay before the retry of a row that failed at `attempt`, before jitter.
    pub fn backoff(&self, attempt: i32) -> Duration {
        let exponent = u32::try_from(attempt.max(0)).unwrap_or(0).min(30);
        self.base_delay
            .saturating_mul(1u32 << exponent)
            .min(self.max_delay)
    }
}

impl RetryPolicy for DefaultRetryPolicy {
    fn decide(&self, message: &Message, _failure: &HandlerError) -> FailureAction {
        if message.attempt >= self.max_attempts {
            return FailureAction::DeadLetter;
        }
        let delay = self.backoff(message.attempt);
        let jitter = self.jitter.clamp(0.0, 1.0);
        // A fresh random UUID is randomness enough for spreading retries; no extra dependency.
        let unit = (uuid::Uuid::new_v4().as_u128() % 1_000_000) as f64 / 1_000_000.0;
        let factor = 1.0 + jitter * (2.0 * unit - 1.0);
        FailureAction::RetryAfter(
            delay
                .mul_f64(factor)
                .min(self.max_delay.mul_f64(1.0 + jitter)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(attempt: i32) -> Message {
        Message {
            id: uuid::Uuid::nil(),
            source: "s".into(),
            idempotency_key: "k".into(),
            aggregate_id: None,
            event_type: None,
            payload: serde_json::Value::Null,
            headers: Default::default(),
            correlation_id: None,
            attempt,
            created_at: chrono::DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn default_policy_doubles_caps_and_dead_letters_after_five() {
        let policy = DefaultRetryPolicy::default();
        assert_eq!(policy.backoff(0), Duration::from_secs(1));
        assert_eq!(policy.backoff(3), Duration::from_secs(8));
        assert_eq!(policy.backoff(20), Duration::from_secs(300));
        let failure = HandlerError::msg("boom");
        for attempt in 0..5 {
            match policy.decide(&message(attempt), &failure) {
                FailureAction::RetryAfter(d) => {
                    let base = policy.backoff(attempt).as_secs_f64();
                    let got = d.as_secs_f64();
                    assert!(
                        got >= base * 0.8 - 1e-9 && got <= base * 1.2 + 1e-9,
                        "{got} vs {base}"
                    );
                }
                FailureAction::DeadLetter => panic!("attempt {attempt} should retry"),
            }
        }
        assert_eq!(
            policy.decide(&message(5), &failure),
            FailureAction::DeadLetter
        );
    }

    #[test]
    fn a_closure_is_a_policy() {
        let policy = |_: &Message, f: &HandlerError| {
            if f.to_string().contains("parse") {
                FailureAction::DeadLetter
            } else {
                FailureAction::RetryAfter(Duration::from_secs(1))
            }
        };
        assert_eq!(
            policy.decide(&message(0), &HandlerError::msg("cannot parse")),
            FailureAction::DeadLetter
        );
    }
}

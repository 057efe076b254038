//! The life cycle of an outbox row and the decision that follows one delivery.
//!
//! The dispatcher claims a row, tries to deliver it, and then asks [`decide`] what to write. The
//! answer is a [`Transition`]; the store carries it out under the claim fence. Keeping the decision
//! here, free of SQL and clocks, lets one property test drive both this function and the real SQL
//! with the same event sequences.

use crate::backoff::Backoff;
use std::fmt;
use std::time::Duration;
use thiserror::Error;

/// The `state` column of an outbox row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutboxState {
    /// Waiting for a claim (new, or a retry whose `scheduled_at` may lie ahead).
    Pending,
    /// Claimed by a worker holding a token and a lease.
    Processing,
    /// Delivered. Final.
    Sent,
    /// Given up on. Final until an operator replays it.
    Dead,
}

/// A `state` value QueueBox does not know.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("unknown outbox state `{0}`")]
pub struct UnknownOutboxState(pub String);

impl OutboxState {
    /// Every state, in life-cycle order.
    pub const ALL: [OutboxState; 4] = [
        OutboxState::Pending,
        OutboxState::Processing,
        OutboxState::Sent,
        OutboxState::Dead,
    ];

    /// The literal stored in the `state` column.
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxState::Pending => "pending",
            OutboxState::Processing => "processing",
            OutboxState::Sent => "sent",
            OutboxState::Dead => "dead",
        }
    }

    /// Reads a `state` column value. The match is exact: the database holds lower-case literals.
    ///
    /// # Errors
    /// [`UnknownOutboxState`] for any other text.
    pub fn parse(value: &str) -> Result<Self, UnknownOutboxState> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str() == value)
            .ok_or_else(|| UnknownOutboxState(value.to_owned()))
    }

    /// True for `sent` and `dead`: only an operator moves a row out of them.
    pub fn is_final(self) -> bool {
        matches!(self, OutboxState::Sent | OutboxState::Dead)
    }
}

impl fmt::Display for OutboxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The retry counters of a claimed row, as read from its columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempts {
    /// `attempt`: failed deliveries so far (0 on the first delivery).
    pub attempt: i32,
    /// `max_attempts`: the row's own dead-letter ceiling.
    pub max_attempts: i32,
}

/// What happened to one claimed row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// The destination accepted the message.
    Delivered,
    /// The publish failed in a way a later attempt may fix (a status, a timeout, a refused
    /// connection). `reason` is already redacted and cut.
    Failed {
        /// Safe text for `last_error`.
        reason: String,
    },
    /// No route pattern matches the topic. Retrying cannot help.
    NoRoute {
        /// The row's topic.
        topic: String,
    },
    /// The route names a destination whose kind no publisher of this binary supports.
    NoPublisher {
        /// The destination name.
        destination: String,
        /// The destination kind, for example `kafka`.
        destination_type: String,
    },
    /// A step before the publish rejected the message for good (a transform with `onError: Dead`).
    Rejected {
        /// Safe text for `last_error`.
        reason: String,
    },
}

/// The write that ends a claim. The store performs it fenced on id, state, token and lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// `state = sent`.
    MarkSent,
    /// `state = pending`, `attempt = next_attempt`, `scheduled_at = now + delay`, `last_error`.
    ScheduleRetry {
        /// The new `attempt` value (the old one plus one).
        next_attempt: i32,
        /// How far ahead of the database clock the next delivery lies.
        delay: Duration,
        /// Safe text for `last_error`.
        last_error: String,
    },
    /// `state = dead`, `last_error = reason`. `attempt` keeps its value.
    MarkDead {
        /// Safe text for `last_error`.
        reason: String,
    },
}

impl Transition {
    /// The state the row ends in.
    pub fn target_state(&self) -> OutboxState {
        match self {
            Transition::MarkSent => OutboxState::Sent,
            Transition::ScheduleRetry { .. } => OutboxState::Pending,
            Transition::MarkDead { .. } => OutboxState::Dead,
        }
    }
}

/// The `last_error` of a row whose topic no route matches.
pub fn no_route_reason(topic: &str) -> String {
    format!("No route matches topic {topic}")
}

/// The `last_error` of a row routed to a destination no publisher supports.
pub fn no_publisher_reason(destination: &str, destination_type: &str) -> String {
    format!("No publisher supports destination {destination} of type {destination_type}")
}

/// Decides the write after one delivery of a claimed row.
///
/// A failure retries while `attempt < max_attempts` and goes dead once `attempt` has reached the
/// ceiling, so a row with `max_attempts = 5` is delivered up to six times (attempts 0 to 5). A row
/// that cannot be routed or published goes dead at once, whatever its attempt. `jitter` is the
/// random fraction in `[0, 1)` that [`Backoff::delay`] takes.
pub fn decide(
    attempts: Attempts,
    outcome: DeliveryOutcome,
    backoff: &Backoff,
    jitter: f64,
) -> Transition {
    match outcome {
        DeliveryOutcome::Delivered => Transition::MarkSent,
        DeliveryOutcome::Failed { reason } => {
            if attempts.attempt < attempts.max_attempts {
                Transition::ScheduleRetry {
                    next_attempt: attempts.attempt.saturating_add(1),
                    delay: backoff.delay(attempts.attempt, jitter),
                    last_error: reason,
                }
            } else {
                Transition::MarkDead { reason }
            }
        }
        DeliveryOutcome::NoRoute { topic } => Transition::MarkDead {
            reason: no_route_reason(&topic),
        },
        DeliveryOutcome::NoPublisher {
            destination,
            destination_type,
        } => Transition::MarkDead {
            reason: no_publisher_reason(&destination, &destination_type),
        },
        DeliveryOutcome::Rejected { reason } => Transition::MarkDead { reason },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed() -> DeliveryOutcome {
        DeliveryOutcome::Failed {
            reason: "HTTP 503".to_owned(),
        }
    }

    /// A row as the store would hold it, driven through claims and decisions.
    #[derive(Debug, Clone)]
    struct Row {
        state: OutboxState,
        attempt: i32,
        max_attempts: i32,
        deliveries: u32,
    }

    impl Row {
        fn new(max_attempts: i32) -> Self {
            Self {
                state: OutboxState::Pending,
                attempt: 0,
                max_attempts,
                deliveries: 0,
            }
        }

        /// Claims and delivers once; returns false when the row is final and cannot be claimed.
        fn deliver(&mut self, outcome: DeliveryOutcome) -> bool {
            if self.state != OutboxState::Pending {
                return false;
            }
            self.state = OutboxState::Processing;
            self.deliveries += 1;
            let transition = decide(
                Attempts {
                    attempt: self.attempt,
                    max_attempts: self.max_attempts,
                },
                outcome,
                &Backoff::from_millis(1000),
                0.5,
            );
            self.state = transition.target_state();
            if let Transition::ScheduleRetry { next_attempt, .. } = transition {
                assert_eq!(next_attempt, self.attempt + 1);
                self.attempt = next_attempt;
            }
            true
        }
    }

    #[test]
    fn states_round_trip_and_unknown_is_refused() {
        for state in OutboxState::ALL {
            assert_eq!(OutboxState::parse(state.as_str()), Ok(state));
            assert_eq!(state.to_string(), state.as_str());
        }
        assert_eq!(
            OutboxState::parse("Sent"),
            Err(UnknownOutboxState("Sent".to_owned()))
        );
        assert!(OutboxState::parse("processed").is_err());
        assert!(OutboxState::Sent.is_final() && OutboxState::Dead.is_final());
        assert!(!OutboxState::Pending.is_final() && !OutboxState::Processing.is_final());
    }

    #[test]
    fn success_marks_sent_at_any_attempt() {
        for attempt in [0, 3, 5, 99] {
            let attempts = Attempts {
                attempt,
                max_attempts: 5,
            };
            let t = decide(
                attempts,
                DeliveryOutcome::Delivered,
                &Backoff::from_millis(10),
                0.0,
            );
            assert_eq!(t, Transition::MarkSent);
        }
    }

    #[test]
    fn failure_below_the_ceiling_retries_with_backoff() {
        let attempts = Attempts {
            attempt: 2,
            max_attempts: 5,
        };
        let t = decide(attempts, failed(), &Backoff::from_millis(1000), 0.0);
        assert_eq!(
            t,
            Transition::ScheduleRetry {
                next_attempt: 3,
                delay: Duration::from_secs(4),
                last_error: "HTTP 503".to_owned(),
            }
        );
    }

    #[test]
    fn failure_at_or_above_the_ceiling_goes_dead() {
        for attempt in [5, 6, i32::MAX] {
            let attempts = Attempts {
                attempt,
                max_attempts: 5,
            };
            let t = decide(attempts, failed(), &Backoff::from_millis(1000), 0.0);
            assert_eq!(
                t,
                Transition::MarkDead {
                    reason: "HTTP 503".to_owned()
                }
            );
        }
    }

    #[test]
    fn unroutable_rows_die_at_once() {
        let fresh = Attempts {
            attempt: 0,
            max_attempts: 5,
        };
        let backoff = Backoff::from_millis(1000);
        let t = decide(
            fresh,
            DeliveryOutcome::NoRoute {
                topic: "order.created".to_owned(),
            },
            &backoff,
            0.0,
        );
        assert_eq!(
            t,
            Transition::MarkDead {
                reason: "No route matches topic order.created".to_owned()
            }
        );
        let t = decide(
            fresh,
            DeliveryOutcome::NoPublisher {
                destination: "events".to_owned(),
                destination_type: "kafka".to_owned(),
            },
            &backoff,
            0.0,
        );
        assert_eq!(t.target_state(), OutboxState::Dead);
        let t = decide(
            fresh,
            DeliveryOutcome::Rejected {
                reason: "transform rejected".to_owned(),
            },
            &backoff,
            0.0,
        );
        assert_eq!(t.target_state(), OutboxState::Dead);
    }

    #[test]
    fn max_attempts_five_allows_six_deliveries() {
        let mut row = Row::new(5);
        while row.deliver(failed()) {}
        assert_eq!(row.state, OutboxState::Dead);
        assert_eq!(row.deliveries, 6);
        assert_eq!(row.attempt, 5);
    }

    /// Every sequence of outcomes over a small alphabet: the row ends sent or dead (or is still
    /// pending when the sequence ran out), never takes more than `max_attempts + 1` deliveries, is
    /// never touched after a final state, and `attempt` counts exactly the retried failures.
    #[test]
    fn property_every_outcome_sequence_respects_the_ceiling() {
        // 0 = delivered, 1 = failed, 2 = no route.
        const ALPHABET: u32 = 3;
        const LENGTH: u32 = 8;
        for max_attempts in 0..=6 {
            for code in 0..ALPHABET.pow(LENGTH) {
                let mut row = Row::new(max_attempts);
                let mut digits = code;
                let mut failures_before_final = 0;
                let mut last_outcome = None;
                for _ in 0..LENGTH {
                    let symbol = digits % ALPHABET;
                    digits /= ALPHABET;
                    let outcome = match symbol {
                        0 => DeliveryOutcome::Delivered,
                        1 => failed(),
                        _ => DeliveryOutcome::NoRoute {
                            topic: "t".to_owned(),
                        },
                    };
                    let was_pending = row.state == OutboxState::Pending;
                    let delivered = row.deliver(outcome);
                    assert_eq!(delivered, was_pending);
                    if delivered {
                        last_outcome = Some(symbol);
                        if symbol == 1 && row.state == OutboxState::Pending {
                            failures_before_final += 1;
                        }
                    }
                }
                let ceiling = u32::try_from(max_attempts).unwrap_or(0) + 1;
                assert!(row.deliveries <= ceiling, "{row:?}");
                assert_eq!(row.attempt, failures_before_final, "{row:?}");
                match row.state {
                    OutboxState::Sent => assert_eq!(last_outcome, Some(0)),
                    OutboxState::Dead => assert!(
                        last_outcome == Some(2)
                            || (last_outcome == Some(1) && row.attempt >= max_attempts)
                    ),
                    OutboxState::Pending => assert!(row.attempt < max_attempts.max(1)),
                    OutboxState::Processing => panic!("left processing: {row:?}"),
                }
            }
        }
    }

    #[test]
    fn retry_delays_grow_and_stay_capped_along_a_failing_run() {
        let backoff = Backoff::from_millis(1000);
        let mut previous = Duration::ZERO;
        for attempt in 0..20 {
            let attempts = Attempts {
                attempt,
                max_attempts: 100,
            };
            let Transition::ScheduleRetry { delay, .. } = decide(attempts, failed(), &backoff, 0.0)
            else {
                panic!("expected a retry");
            };
            assert!(delay >= previous);
            assert!(delay <= crate::backoff::MAX_RETRY_DELAY);
            previous = delay;
        }
    }
}

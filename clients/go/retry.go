package queuebox

import (
	"math/rand/v2"
	"time"
)

// FailureAction is what a RetryPolicy chooses for a row whose handler failed: RetryAfter or
// DeadLetter.
type FailureAction struct {
	dead  bool
	delay time.Duration
}

// RetryAfter returns the row to pending; a claim can take it again after delay, with Attempt
// raised by one. A negative delay counts as zero.
func RetryAfter(delay time.Duration) FailureAction {
	return FailureAction{delay: max(delay, 0)}
}

// DeadLetter moves the row to dead: no claim takes it again until an operator replays it.
func DeadLetter() FailureAction {
	return FailureAction{dead: true}
}

// IsDeadLetter reports whether the action is DeadLetter.
func (a FailureAction) IsDeadLetter() bool { return a.dead }

// Delay is the wait of a RetryAfter action (zero for DeadLetter).
func (a FailureAction) Delay() time.Duration { return a.delay }

// RetryPolicy decides between a retry and a dead letter for a failed row. failure is the
// handler's error (or a panic turned into one); message.Attempt is the failed delivery's attempt.
type RetryPolicy interface {
	Decide(message Message, failure error) FailureAction
}

// RetryPolicyFunc lets a function be a RetryPolicy.
type RetryPolicyFunc func(message Message, failure error) FailureAction

// Decide calls f.
func (f RetryPolicyFunc) Decide(message Message, failure error) FailureAction {
	return f(message, failure)
}

type defaultRetryPolicy struct {
	maxAttempts         int
	baseDelay, maxDelay time.Duration
	jitter              float64
}

// NewDefaultRetryPolicy returns the exponential policy: it retries while Attempt is below
// maxAttempts, waiting baseDelay * 2^Attempt (at most maxDelay), spread by jitter (0.2 means up
// to 20% either way, capped at maxDelay plus the jitter), and dead-letters after that. The
// default of Options is NewDefaultRetryPolicy(5, time.Second, 5*time.Minute, 0.2): six deliveries
// in all, the first being attempt 0. jitter is clamped to [0, 1].
func NewDefaultRetryPolicy(maxAttempts int, baseDelay, maxDelay time.Duration, jitter float64) RetryPolicy {
	return defaultRetryPolicy{
		maxAttempts: maxAttempts,
		baseDelay:   max(baseDelay, 0),
		maxDelay:    max(maxDelay, 0),
		jitter:      min(max(jitter, 0), 1),
	}
}

func (p defaultRetryPolicy) backoff(attempt int) time.Duration {
	delay := p.baseDelay
	for i := 0; i < attempt && delay < p.maxDelay; i++ {
		delay *= 2
	}
	return min(delay, p.maxDelay)
}

func (p defaultRetryPolicy) Decide(message Message, _ error) FailureAction {
	if message.Attempt >= p.maxAttempts {
		return DeadLetter()
	}
	factor := 1 + p.jitter*(2*rand.Float64()-1)
	delay := time.Duration(float64(p.backoff(message.Attempt)) * factor)
	ceiling := time.Duration(float64(p.maxDelay) * (1 + p.jitter))
	return RetryAfter(min(delay, ceiling))
}

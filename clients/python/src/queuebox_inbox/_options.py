"""Worker options and the retry policy."""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ._errors import InboxConfigError
from ._message import InboxMessage
from ._sql import InboxSchema


@dataclass(frozen=True)
class RetryAfter:
    """Back to pending: a claim can take the row again after ``delay`` seconds, attempt + 1."""

    delay: float


@dataclass(frozen=True)
class DeadLetter:
    """To dead: no claim takes the row again until an operator replays it."""


FailureAction = RetryAfter | DeadLetter
"""What a retry policy chooses for a row whose handler failed."""

RetryPolicy = Callable[[InboxMessage, BaseException], FailureAction]
"""Decides between a retry and a dead letter; the exception is what the handler raised."""


def default_retry_policy(
    max_attempts: int = 5,
    base_delay: float = 1.0,
    max_delay: float = 300.0,
    jitter: float = 0.2,
) -> RetryPolicy:
    """The exponential policy: ``base_delay * 2**attempt`` seconds, capped, spread by ``jitter``.

    It retries while the message's ``attempt`` is below ``max_attempts`` (5: six deliveries, the
    first being attempt 0) and dead-letters after that. ``jitter`` (clamped to 0..1) spreads the
    delay either way; the result never exceeds ``max_delay * (1 + jitter)``.
    """
    base = max(0.0, float(base_delay))
    ceiling = max(0.0, float(max_delay))
    spread = min(1.0, max(0.0, float(jitter)))

    def decide(message: InboxMessage, failure: BaseException) -> FailureAction:
        if message.attempt >= max_attempts:
            return DeadLetter()
        backoff = min(base * 2.0 ** min(max(message.attempt, 0), 52), ceiling)
        factor = 1.0 + spread * (2.0 * random.random() - 1.0)
        return RetryAfter(min(backoff * factor, ceiling * (1.0 + spread)))

    return decide


@dataclass(frozen=True)
class InboxOptions:
    """How a worker claims and handles the rows of one pull source. Times are in seconds."""

    source: str
    """The ``consumption: pull`` source whose rows this worker takes. Required."""
    batch_size: int = 10
    """The most rows in one claim (1 to 1000); rows beyond the free handler slots wait, leased."""
    lease: float = 30.0
    """The lease (0.1 s to 24 h), renewed every third of it while a row is held."""
    max_concurrency: int = 1
    """The most handlers running at once."""
    poll_interval: float = 1.0
    """The wait after a claim that found nothing or failed."""
    shutdown_grace: float = 30.0
    """How long a stop waits for running handlers before cancelling them."""
    dialect: str = "postgresql"
    """``"postgresql"``; ``"sqlserver"`` is refused by this build."""
    schema: InboxSchema = field(default_factory=InboxSchema)
    """Names for a mapped table, namespace or columns."""
    retry_policy: RetryPolicy = field(default_factory=default_retry_policy)
    """What a failed row becomes."""
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("queuebox_inbox"))
    """Where the library logs (every field sanitised); silent until the application configures
    logging."""

    def __post_init__(self) -> None:
        if not isinstance(self.source, str) or self.source.strip() == "":
            raise InboxConfigError("queuebox: invalid option: source is required")
        if len(self.source) > 255:
            raise InboxConfigError(
                "queuebox: invalid option: source is longer than the 255 characters of the "
                "source column"
            )
        _whole("batch_size", self.batch_size, 1, 1000)
        _whole("max_concurrency", self.max_concurrency, 1, 100_000)
        _seconds("lease", self.lease, 0.1, 86_400.0)
        _seconds("poll_interval", self.poll_interval, 0.001, 86_400.0)
        _seconds("shutdown_grace", self.shutdown_grace, 0.0, 86_400.0)
        if self.dialect != "postgresql":
            raise InboxConfigError(
                f"queuebox: invalid option: dialect {self.dialect!r} is not supported by this "
                "build (PostgreSQL only; see the README)"
            )
        if not isinstance(self.schema, InboxSchema):
            raise InboxConfigError("queuebox: invalid option: schema must be an InboxSchema")
        if not callable(self.retry_policy):
            raise InboxConfigError("queuebox: invalid option: retry_policy must be callable")

    @property
    def lease_ms(self) -> int:
        return round(self.lease * 1000)


def _whole(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InboxConfigError(
            f"queuebox: invalid option: {name} must be a whole number from {low} to {high}, "
            f"got {value!r}"
        )


def _seconds(name: str, value: object, low: float, high: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise InboxConfigError(
            f"queuebox: invalid option: {name} must be from {low:g} s to {high:g} s, got {value!r}"
        )

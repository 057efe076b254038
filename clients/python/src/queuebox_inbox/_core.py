"""What the synchronous and the asyncio workers share: row decoding, logging, constants."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._message import InboxMessage
from ._options import DeadLetter, FailureAction, InboxOptions, RetryAfter
from ._sanitize import sanitize, sanitize_error

# The claim's transaction only: a claim lost in a crash only hands its rows back, and every later
# commit that depends on it waits for the WAL up to its own record; a generic plan spares planning
# the claim on every call.
CLAIM_SETTINGS = (
    "SELECT set_config('synchronous_commit', 'off', true), "
    "set_config('plan_cache_mode', 'force_generic_plan', true)"
)

CLAIM_LOST_SQLSTATE = "22012"
"""What :func:`complete_or_fail` fails with when the completion changes no row: division by zero."""

SCHEMA_HINT = (
    "queuebox: the inbox table lacks what this library needs (the V10 schema or later, which adds "
    "the headers column, and the mapped names of options.schema): "
)


def complete_or_fail(complete_text: str) -> str:
    """The contract's completion as a statement that fails when it changes no row.

    The contract says: exactly one row changed, commit; none, roll the whole transaction back. The
    worker sends the completion and the COMMIT together in pipeline mode (one round trip instead of
    two), so the answer to "how many rows" must stop the COMMIT by itself: when the completion
    changes no row, the count is 0 and ``1 / 0`` fails the statement (SQLSTATE 22012), the server
    skips the COMMIT queued behind it, and the worker rolls back. The UPDATE inside is the
    contract's statement, unchanged.
    """
    update = complete_text.rstrip().rstrip(";")
    return f"WITH done AS ({update} RETURNING 1) SELECT 1 / count(*) FROM done"


@dataclass(frozen=True)
class Claimed:
    message: InboxMessage
    token: uuid.UUID


def claim_params(options: InboxOptions, want: int) -> dict[str, Any]:
    return {
        "source": options.source,
        "batch": want,
        "lease_ms": options.lease_ms,
        "cand_limit": min(max(3 * options.batch_size, 50), 500),
    }


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _headers(value: object) -> Mapping[str, str]:
    out: dict[str, str] = {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if isinstance(value, dict):
        for name, v in value.items():
            out[str(name)] = v if isinstance(v, str) else json.dumps(v)
    return out


def _uuid(value: object) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def decode(rows: Sequence[Sequence[Any]]) -> list[Claimed]:
    """The contract's RETURNING order: id, claim_token, source, idempotency_key, aggregate_id,
    event_type, payload, headers, attempt, correlation_id, created_at; oldest first."""
    claimed = []
    for r in rows:
        created = r[10] if isinstance(r[10], datetime) else None
        message = InboxMessage(
            id=_uuid(r[0]),
            source=str(r[2]),
            idempotency_key=str(r[3]),
            aggregate_id=_text(r[4]),
            event_type=_text(r[5]),
            payload=r[6],
            headers=_headers(r[7]),
            attempt=int(r[8]),
            correlation_id=_text(r[9]),
            created_at=created,
        )
        claimed.append(Claimed(message=message, token=_uuid(r[1])))
    # RETURNING comes in no particular order; the oldest rows start first.
    claimed.sort(key=lambda c: (c.message.created_at or datetime.min, str(c.message.id)))
    return claimed


def decide(options: InboxOptions, message: InboxMessage, failure: BaseException) -> FailureAction:
    """The policy's answer; a policy that raises or answers nonsense retries after one lease."""
    try:
        action = options.retry_policy(message, failure)
    except Exception as error:  # noqa: BLE001 - a broken policy must not stop the worker
        log(
            options,
            logging.ERROR,
            "the retry policy raised; retrying after one lease",
            id=message.id,
            error=error,
        )
        return RetryAfter(options.lease)
    if isinstance(action, (RetryAfter, DeadLetter)):
        return action
    log(
        options,
        logging.ERROR,
        "the retry policy returned neither RetryAfter nor DeadLetter; retrying after one lease",
        id=message.id,
    )
    return RetryAfter(options.lease)


def failure_params(claimed: Claimed, action: FailureAction, error_text: str) -> dict[str, Any]:
    params: dict[str, Any] = {"id": claimed.message.id, "token": claimed.token, "error": error_text}
    if isinstance(action, RetryAfter):
        delay = action.delay
        params["delay_ms"] = max(0, round(delay * 1000)) if math.isfinite(delay) else 0
    return params


def log(options: InboxOptions, level: int, message: str, **fields: object) -> None:
    """One log line: the message and ``key=value`` fields, every part sanitised."""
    logger = options.logger
    if not logger.isEnabledFor(level):
        return
    parts = [sanitize(message), f"source={sanitize(options.source)}"]
    for key, value in fields.items():
        text = sanitize_error(value) if isinstance(value, BaseException) else sanitize(str(value))
        parts.append(f"{key}={text}")
    # A broken log handler must not stop the worker.
    with contextlib.suppress(Exception):
        logger.log(level, "%s", " ".join(parts))

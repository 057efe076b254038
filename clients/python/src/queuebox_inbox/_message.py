"""The message a handler receives."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class InboxMessage:
    """One claimed inbox row as a handler sees it. The claim token stays inside the worker."""

    id: uuid.UUID
    source: str
    idempotency_key: str
    """With ``source``, the identity of the message: deduplicate external work on the pair."""
    aggregate_id: str | None
    event_type: str | None
    payload: Any
    """The stored JSON body, decoded (dict, list, str, number, bool or None)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """One string per header name; empty when the row has none."""
    attempt: int = 0
    """0 on the first delivery."""
    correlation_id: str | None = None
    created_at: datetime | None = None

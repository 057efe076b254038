"""The outbox writer: one insert of an outbox row inside the caller's own transaction.

QueueBox delivers the row once that transaction commits; if it rolls back there is no row and no
message. Every value the table cannot hold is refused before any SQL runs, with the same text in
every QueueBox client, so the caller's transaction stays usable.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from ._errors import InboxConfigError, InboxError

_MAX_TEXT = 255
_MAX_ATTEMPTS = 2_147_483_647
_MAX_IDENTIFIER = 63
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class OutboxRefusedError(InboxError, ValueError):
    """A value the outbox table cannot hold, raised before any SQL runs.

    ``reason`` is the same text in every QueueBox client; ``str()`` prefixes it with ``queuebox:``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"queuebox: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class OutboxSchema:
    """Table and column names; the defaults are those of QueueBox's migrations.

    Rename what the service's ``database.columnMapping.outbox`` renames. ``namespace`` is the
    PostgreSQL schema that holds the table (``None`` or ``""`` uses the search path).
    """

    namespace: str | None = None
    table: str = "outbox"
    id: str = "id"
    topic: str = "topic"
    key: str = "key"
    aggregate_type: str = "aggregate_type"
    payload: str = "payload"
    headers: str = "headers"
    max_attempts: str = "max_attempts"
    scheduled_at: str = "scheduled_at"


# The column fields in the order every client checks them.
_COLUMNS = (
    "id",
    "topic",
    "key",
    "aggregate_type",
    "payload",
    "headers",
    "max_attempts",
    "scheduled_at",
)


@dataclass(frozen=True)
class OutboxMessage:
    """One outbox row to write. A field left ``None`` takes the column default.

    ``payload`` is any JSON value (``None`` is JSON ``null``), encoded with :func:`json.dumps`;
    ``bytes``, ``bytearray`` or ``memoryview`` hold JSON text that is already encoded: it is
    checked and stored as it is.
    """

    topic: str
    """What routes match, such as ``order.created``."""
    payload: Any
    key: str | None = None
    """Orders the rows of one key (delivered in write order); ``""`` is no key."""
    aggregate_type: str | None = None
    """The kind of entity, for broker addresses; ``""`` is none."""
    headers: Mapping[str, str] | None = None
    """Sent as HTTP or message headers; values are strings."""
    max_attempts: int | None = None
    """Deliveries before the row goes dead: 1 to 2147483647 (the column's default is 5)."""
    scheduled_at: datetime | None = None
    """The earliest delivery, a timezone-aware datetime (default: now)."""
    traceparent: str | None = None
    """The caller's W3C trace context (``00-<trace id>-<span id>-<flags>``), stored as the row's
    ``traceparent`` header, so the delivery continues the caller's trace; a malformed one is
    refused. Pass your current span's (with OpenTelemetry: ``propagate.inject`` into a dict)."""
    tracestate: str | None = None
    """The W3C ``tracestate`` going with ``traceparent``, stored as the ``tracestate`` header."""


HeaderHook = Callable[[dict[str, str]], None]
"""Gets a copy of each message's headers before the checks and may add or change some."""


def _identifier(what: str, name: object) -> str:
    if isinstance(name, str) and len(name) <= _MAX_IDENTIFIER and _IDENTIFIER.fullmatch(name):
        return f'"{name}"'
    shown = json.dumps(str(name), ensure_ascii=False)
    raise InboxConfigError(
        f"queuebox: invalid SQL identifier {shown} for the outbox {what}: use letters, digits "
        f"and underscores, starting with a letter or underscore, at most {_MAX_IDENTIFIER} "
        "characters"
    )


def _check_text(what: str, value: str) -> None:
    if "\x00" in value:
        raise OutboxRefusedError(
            f"the {what} holds the character U+0000, which the outbox cannot store"
        )
    if len(value) > _MAX_TEXT:
        raise OutboxRefusedError(
            f"the {what} is {len(value)} characters long; the outbox stores at most {_MAX_TEXT}"
        )


def _optional_text(what: str, value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise OutboxRefusedError(f"the {what} is not a string")
    _check_text(what, value)
    return value


def _quoted_name(name: str) -> str:
    out = ["'"]
    for c in name:
        code = ord(c)
        if c == "'":
            out.append("\\'")
        elif c == "\\":
            out.append("\\\\")
        elif code <= 0x1F or 0x7F <= code <= 0x9F:
            out.append(f"\\u{code:04x}")
        else:
            out.append(c)
    out.append("'")
    return "".join(out)


def _nul_path(document: object) -> str | None:
    """The JSONPath of the first string or member name holding U+0000 (names in sorted order)."""
    stack: list[tuple[object, str]] = [(document, "$")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return path
        elif isinstance(value, list):
            for i in range(len(value) - 1, -1, -1):
                stack.append((value[i], f"{path}[{i}]"))
        elif isinstance(value, dict):
            names = sorted(value)
            for name in reversed(names):
                member_path = f"{path}[{_quoted_name(name)}]"
                if "\x00" in name:
                    return member_path
                stack.append((value[name], member_path))
    return None


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _payload_text(payload: object) -> str:
    if isinstance(payload, (bytes, bytearray, memoryview)):
        try:
            text = bytes(payload).decode("utf-8")
        except UnicodeDecodeError:
            raise OutboxRefusedError("the payload is not valid JSON: it is not UTF-8") from None
        try:
            json.loads(text, parse_constant=_no_constant)
        except ValueError as error:
            raise OutboxRefusedError(f"the payload is not valid JSON: {error}") from None
    else:
        try:
            text = json.dumps(payload, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise OutboxRefusedError(f"the payload cannot be encoded as JSON: {error}") from None
    # JSON can write U+0000 only as the escape \u0000: without it in the text there is none.
    if "\\u0000" in text:
        path = _nul_path(json.loads(text))
        if path is not None:
            raise OutboxRefusedError(
                f"the payload holds the character U+0000 (\\u0000) at {path}, which the outbox "
                "cannot store"
            )
    return text


class OutboxWriter:
    """Writes outbox rows under one schema. Build it once; it is safe to share between threads.

    The constructor checks every name (it runs no SQL) and raises :class:`InboxConfigError` for a
    bad one. ``header_hook`` gets a copy of each message's headers before the checks and may add
    or change some (a trace context, for example); what it leaves is stored.
    """

    def __init__(
        self, schema: OutboxSchema | None = None, header_hook: HeaderHook | None = None
    ) -> None:
        s = schema if schema is not None else OutboxSchema()
        table = _identifier("table", s.table)
        if s.namespace is not None and s.namespace != "":
            table = f"{_identifier('namespace', s.namespace)}.{table}"
        columns: dict[str, str] = {}
        for index, name_of in enumerate(_COLUMNS):
            name = getattr(s, name_of)
            columns[name_of] = _identifier(f"column {name_of}", name)
            for earlier in _COLUMNS[:index]:
                if getattr(s, earlier) == name:
                    raise InboxConfigError(
                        f"queuebox: the outbox columns {earlier} and {name_of} are both named "
                        f"{json.dumps(name, ensure_ascii=False)}"
                    )
        self._table = table
        self._columns = columns
        self._hook = header_hook

    def _statement(self, message: OutboxMessage) -> tuple[str, list[object]]:
        """The checked INSERT and its values; raises :class:`OutboxRefusedError`."""
        headers = self._headers(message)
        topic = message.topic
        if not isinstance(topic, str):
            raise OutboxRefusedError("the topic is not a string")
        _check_text("topic", topic)
        if topic == "":
            raise OutboxRefusedError("the topic is empty; every outbox row needs one")
        key = _optional_text("key", message.key)
        aggregate_type = _optional_text("aggregate type", message.aggregate_type)
        payload = _payload_text(message.payload)
        for name, value in headers.items():
            if "\x00" in name or "\x00" in value:
                raise OutboxRefusedError(
                    "a header holds the character U+0000, which the outbox cannot store"
                )
        attempts = message.max_attempts
        if attempts is not None and (
            isinstance(attempts, bool)
            or not isinstance(attempts, int)
            or not 1 <= attempts <= _MAX_ATTEMPTS
        ):
            raise OutboxRefusedError(
                f"max attempts is {attempts}; it must be a whole number from 1 to {_MAX_ATTEMPTS}"
            )
        scheduled = message.scheduled_at
        if scheduled is not None and (
            not isinstance(scheduled, datetime) or scheduled.utcoffset() is None
        ):
            raise OutboxRefusedError("the scheduled time is not a timezone-aware datetime")

        c = self._columns
        columns = [c["topic"], c["payload"]]
        values = ["%s", "%s::jsonb"]
        params: list[object] = [topic, payload]

        def add(column: str, cast: str, value: object) -> None:
            columns.append(column)
            values.append(f"%s{cast}")
            params.append(value)

        if key is not None:
            add(c["key"], "::text", key)
        if aggregate_type is not None:
            add(c["aggregate_type"], "::text", aggregate_type)
        if headers:
            add(c["headers"], "::jsonb", json.dumps(headers, ensure_ascii=False))
        if attempts is not None:
            add(c["max_attempts"], "::integer", attempts)
        if scheduled is not None:
            add(c["scheduled_at"], "::timestamptz", scheduled)
        sql = (
            f"INSERT INTO {self._table} ({', '.join(columns)}) VALUES ({', '.join(values)}) "
            f"RETURNING {c['id']}::text"
        )
        return sql, params

    def _headers(self, message: OutboxMessage) -> dict[str, str]:
        headers: object = message.headers
        if headers is not None and not isinstance(headers, Mapping):
            raise OutboxRefusedError("the headers are not an object of string values")
        copy: dict[str, str] = dict(headers) if headers is not None else {}
        _trace_context(copy, message.traceparent, message.tracestate)
        if self._hook is not None:
            self._hook(copy)
        for name, value in copy.items():
            if not isinstance(name, str):
                raise OutboxRefusedError("the headers are not an object of string values")
            if not isinstance(value, str):
                shown = json.dumps(name, ensure_ascii=False)
                raise OutboxRefusedError(f"the header {shown} has a value that is not a string")
        _check_trace_headers(copy)
        return copy

    def write(
        self, target: psycopg.Connection[Any] | psycopg.Cursor[Any], message: OutboxMessage
    ) -> uuid.UUID:
        """Checks ``message`` and inserts it through ``target`` (a connection or cursor inside
        your transaction, or an inbox handler's ``ctx.connection``); returns the new row's id.

        Raises :class:`OutboxRefusedError` before any SQL for a value the table cannot hold.
        """
        sql, params = self._statement(message)
        cur = target.execute(sql, params)
        return _id_of(cur.fetchone())

    async def write_async(
        self,
        target: psycopg.AsyncConnection[Any] | psycopg.AsyncCursor[Any],
        message: OutboxMessage,
    ) -> uuid.UUID:
        """:meth:`write` for an ``AsyncConnection`` or ``AsyncCursor``."""
        sql, params = self._statement(message)
        cur = await target.execute(sql, params)
        return _id_of(await cur.fetchone())


_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-.*)?", re.S)
_TRACESTATE_MEMBER = re.compile(
    r"(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)
_TRACESTATE_MEMBERS = 32
_BAD_TRACEPARENT = (
    "the traceparent is not a W3C trace context: version-traceid-parentid-flags in lowercase "
    "hexadecimal, version not ff, ids not all zeros"
)
_BAD_TRACESTATE = (
    "the tracestate is not a W3C tracestate: at most 32 comma-separated key=value members with "
    "distinct keys"
)
_LONE_TRACESTATE = "a tracestate needs a traceparent"


def _trace_context(headers: dict[str, str], traceparent: object, tracestate: object) -> None:
    """Puts the message's trace context in ``headers``, in place of any header of those names."""
    if traceparent is None or traceparent == "":
        if tracestate is not None and tracestate != "":
            raise OutboxRefusedError(_LONE_TRACESTATE)
        return
    if not isinstance(traceparent, str):
        raise OutboxRefusedError(_BAD_TRACEPARENT)
    if tracestate is not None and not isinstance(tracestate, str):
        raise OutboxRefusedError(_BAD_TRACESTATE)
    for name in [n for n in headers if str(n).lower() in ("traceparent", "tracestate")]:
        del headers[name]
    headers["traceparent"] = traceparent
    if tracestate:
        headers["tracestate"] = tracestate


def _valid_traceparent(value: str) -> bool:
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return False
    version, trace_id, parent_id, rest = match.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return False
    return trace_id.strip("0") != "" and parent_id.strip("0") != ""


def _valid_tracestate(value: str) -> bool:
    members = [m.strip(" \t") for m in value.split(",")]
    members = [m for m in members if m]
    if len(members) > _TRACESTATE_MEMBERS:
        return False
    keys = set()
    for member in members:
        if _TRACESTATE_MEMBER.fullmatch(member) is None:
            return False
        key = member.split("=", 1)[0]
        if key in keys:
            return False
        keys.add(key)
    return True


def _check_trace_headers(headers: Mapping[str, str]) -> None:
    """The row's ``traceparent`` and ``tracestate`` headers (any letter case), from the message,
    the caller's headers or the hook, must be what QueueBox reads as a trace context."""
    parents = [v for n, v in headers.items() if n.lower() == "traceparent"]
    states = [v for n, v in headers.items() if n.lower() == "tracestate"]
    if len(parents) > 1 or any(not _valid_traceparent(v) for v in parents):
        raise OutboxRefusedError(_BAD_TRACEPARENT)
    if len(states) > 1 or any(not _valid_tracestate(v) for v in states):
        raise OutboxRefusedError(_BAD_TRACESTATE)
    if states and not parents:
        raise OutboxRefusedError(_LONE_TRACESTATE)


def _id_of(row: object) -> uuid.UUID:
    if isinstance(row, Mapping):
        row = next(iter(row.values()), None)
    elif isinstance(row, (tuple, list)):
        row = row[0] if row else None
    if row is None:
        raise InboxError("queuebox: the outbox insert returned no id")
    return row if isinstance(row, uuid.UUID) else uuid.UUID(str(row))


_DEFAULT_WRITER = OutboxWriter()


def write_outbox(
    target: psycopg.Connection[Any] | psycopg.Cursor[Any], message: OutboxMessage
) -> uuid.UUID:
    """Writes ``message`` into the ``outbox`` table of QueueBox's migrations; see
    :meth:`OutboxWriter.write`."""
    return _DEFAULT_WRITER.write(target, message)


async def write_outbox_async(
    target: psycopg.AsyncConnection[Any] | psycopg.AsyncCursor[Any], message: OutboxMessage
) -> uuid.UUID:
    """:func:`write_outbox` for an ``AsyncConnection`` or ``AsyncCursor``."""
    return await _DEFAULT_WRITER.write_async(target, message)

"""Both workers' rows' transactions sent through libpq (``_fast.py``), on a real database.

What must not change from psycopg's own path: the handler's writes commit with the completion and
only with it, the handler sees an open psycopg transaction block (``commit()`` refused, a nested
block is a savepoint), a connection with transaction characteristics keeps them, and a completion
whose prepared statement psycopg discarded mid-transaction loses nothing.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
import pytest

from conftest import fresh_database
from queuebox_inbox import (
    AsyncHandler,
    AsyncHandlerContext,
    AsyncInboxWorker,
    Handler,
    HandlerContext,
    InboxMessage,
    InboxOptions,
    InboxWorker,
)
from queuebox_inbox._fast import available

SOURCE = "fast"


def insert_rows(url: str, count: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            """INSERT INTO inbox (source, idempotency_key, event_type, payload, consumption)
               SELECT %s, 'k-' || i, 'test.event', '{}'::jsonb, 'pull'
                 FROM generate_series(1, %s) AS i""",
            [SOURCE, count],
        )


def counts(url: str) -> tuple[int, int]:
    """(rows processed, business rows written)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            """SELECT (SELECT count(*) FROM inbox WHERE state = 'processed'),
                      (SELECT count(*) FROM conformance_writes)"""
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


async def run_until_processed(
    worker: AsyncInboxWorker, handler: AsyncHandler, url: str, count: int, deadline_s: float
) -> None:
    stop = asyncio.Event()
    run = asyncio.ensure_future(worker.run(handler, stop))
    deadline = time.monotonic() + deadline_s
    try:
        while counts(url)[0] < count:
            assert not run.done(), "the worker stopped early"
            assert time.monotonic() < deadline, f"only {counts(url)[0]} of {count} processed"
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(run, 30)


def options(**extra: Any) -> InboxOptions:
    return InboxOptions(source=SOURCE, batch_size=5, max_concurrency=3, poll_interval=0.05, **extra)


def test_this_psycopg_has_what_the_fast_path_needs() -> None:
    # The pinned psycopg must take the fast path, or the tests below test the public one only.
    assert available()


def test_rows_commit_with_their_completion_inside_a_psycopg_block() -> None:
    seen: list[tuple[bool, bool, int]] = []

    async def handler(message: InboxMessage, ctx: AsyncHandlerContext) -> None:
        conn = ctx.connection
        prepared = await (
            await conn.execute(
                "SELECT count(*) FROM pg_prepared_statements WHERE name = 'queuebox_inbox_complete'"
            )
        ).fetchone()
        refused = False
        try:
            await conn.commit()
        except psycopg.ProgrammingError:
            refused = True
        in_block = ctx.transaction.status == psycopg.AsyncTransaction.Status.ACTIVE
        seen.append((refused, in_block, int(prepared[0]) if prepared else -1))
        await conn.execute(
            "INSERT INTO conformance_writes (key) VALUES (%s)", [str(message.idempotency_key)]
        )

    async def main(url: str) -> None:
        worker = AsyncInboxWorker(url, options())
        await run_until_processed(worker, handler, url, 20, 30)

    with fresh_database("qb_fast_py") as url:
        insert_rows(url, 20)
        asyncio.run(main(url))
        assert counts(url) == (20, 20)
    assert len(seen) == 20
    assert all(s == (True, True, 1) for s in seen), seen


def test_a_savepoint_rolled_back_in_the_handler_loses_and_repeats_nothing() -> None:
    # The handler prepares a statement of its own (so psycopg holds one) and rolls a nested block
    # back: psycopg then discards every prepared statement of the connection, the worker's
    # completion among them. That row's completion fails and rolls back; the row comes back after
    # its lease, and the connection sends its completion unnamed from then on.
    calls = 0

    async def handler(message: InboxMessage, ctx: AsyncHandlerContext) -> None:
        nonlocal calls
        calls += 1
        conn = ctx.connection
        await conn.execute("SELECT 1 WHERE %s::text IS NOT NULL", ["x"], prepare=True)
        with pytest.raises(psycopg.errors.UniqueViolation):
            async with conn.transaction():
                await conn.execute("CREATE TEMP TABLE IF NOT EXISTS once (k text PRIMARY KEY)")
                await conn.execute("INSERT INTO once VALUES ('a')")
                await conn.execute("INSERT INTO once VALUES ('a')")
        await conn.execute(
            "INSERT INTO conformance_writes (key) VALUES (%s)", [str(message.idempotency_key)]
        )

    async def main(url: str) -> None:
        worker = AsyncInboxWorker(url, options(lease=1.0))
        await run_until_processed(worker, handler, url, 12, 60)

    with fresh_database("qb_fast_py") as url:
        insert_rows(url, 12)
        asyncio.run(main(url))
        # Every row processed once and written once: the runs whose completion failed wrote
        # nothing that stayed.
        assert counts(url) == (12, 12)
        with psycopg.connect(url, autocommit=True) as conn:
            keys = conn.execute("SELECT count(DISTINCT key) FROM conformance_writes").fetchone()
        assert keys is not None and keys[0] == 12
    # At least one completion met a discarded statement (the first row on each connection).
    assert calls > 12


class RepeatableReadPool:
    """Connections that set an isolation level, which a plain BEGIN would leave out."""

    def __init__(self, url: str) -> None:
        self.url = url

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        conn = await psycopg.AsyncConnection.connect(self.url)
        await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
        try:
            yield conn
        finally:
            await conn.close()


def test_a_connection_with_an_isolation_level_keeps_it() -> None:
    levels: list[str] = []

    async def handler(message: InboxMessage, ctx: AsyncHandlerContext) -> None:
        row = await (await ctx.connection.execute("SHOW transaction_isolation")).fetchone()
        levels.append(str(row[0]) if row else "")
        await ctx.connection.execute(
            "INSERT INTO conformance_writes (key) VALUES (%s)", [str(message.idempotency_key)]
        )

    async def main(url: str) -> None:
        # A short lease: a row whose transaction the isolation level fails returns soon.
        worker = AsyncInboxWorker(RepeatableReadPool(url), options(lease=1.0))
        await run_until_processed(worker, handler, url, 6, 60)

    with fresh_database("qb_fast_py") as url:
        insert_rows(url, 6)
        asyncio.run(main(url))
        assert counts(url) == (6, 6)
    assert levels and all(level == "repeatable read" for level in levels), levels


# The threaded worker: the same three cases.


def run_threaded_until_processed(
    worker: InboxWorker,
    handler: Handler,
    url: str,
    count: int,
    deadline_s: float,
    *,
    thread_name: str | None = None,
) -> None:
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(handler, stop), name=thread_name)
    thread.start()
    deadline = time.monotonic() + deadline_s
    try:
        while counts(url)[0] < count:
            assert thread.is_alive(), "the worker stopped early"
            assert time.monotonic() < deadline, f"only {counts(url)[0]} of {count} processed"
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive(), "the worker did not stop"


def test_threaded_rows_commit_with_their_completion_inside_a_psycopg_block() -> None:
    seen: list[tuple[bool, bool, int]] = []

    def handler(message: InboxMessage, ctx: HandlerContext) -> None:
        conn = ctx.connection
        prepared = conn.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE name = 'queuebox_inbox_complete'"
        ).fetchone()
        refused = False
        try:
            conn.commit()
        except psycopg.ProgrammingError:
            refused = True
        in_block = ctx.transaction.status == psycopg.Transaction.Status.ACTIVE
        seen.append((refused, in_block, int(prepared[0]) if prepared else -1))
        conn.execute(
            "INSERT INTO conformance_writes (key) VALUES (%s)", [str(message.idempotency_key)]
        )

    with fresh_database("qb_fast_py") as url:
        insert_rows(url, 20)
        run_threaded_until_processed(InboxWorker(url, options()), handler, url, 20, 30)
        assert counts(url) == (20, 20)
    assert len(seen) == 20
    assert all(s == (True, True, 1) for s in seen), seen


def test_threaded_a_savepoint_rolled_back_in_the_handler_loses_and_repeats_nothing() -> None:
    calls = 0
    lock = threading.Lock()

    def handler(message: InboxMessage, ctx: HandlerContext) -> None:
        nonlocal calls
        with lock:
            calls += 1
        conn = ctx.connection
        conn.execute("SELECT 1 WHERE %s::text IS NOT NULL", ["x"], prepare=True)
        with pytest.raises(psycopg.errors.UniqueViolation), conn.transaction():
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS once (k text PRIMARY KEY)")
            conn.execute("INSERT INTO once VALUES ('a')")
            conn.execute("INSERT INTO once VALUES ('a')")
        conn.execute(
            "INSERT INTO conformance_writes (key) VALUES (%s)", [str(message.idempotency_key)]
        )

    with fresh_database("qb_fast_py") as url:
        insert_rows(url, 12)
        run_threaded_until_processed(InboxWorker(url, options(lease=1.0)), handler, url, 12, 60)
        assert counts(url) == (12, 12)
        with psycopg.connect(url, autocommit=True) as conn:
            keys = conn.execute("SELECT count(DISTINCT key) FROM conformance_writes").fetchone()
        assert keys is not None and keys[0] == 12
    assert calls > 12


class RepeatableReadThreadPool:
    def __init__(self, url: str) -> None:
        self.url = url

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        conn = psycopg.Connection.connect(self.url)
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        try:
            yield conn
        finally:
            conn.close()


def test_threaded_a_connection_with_an_isolation_level_keeps_it() -> None:
    levels: list[str] = []

    def handler(message: InboxMessage, ctx: HandlerContext) -> None:
        row = ctx.connection.execute("SHOW transaction_isolation").fetchone()
        levels.append(str(row[0]) if row else "")
        ctx.connection.execute(
            "INSERT INTO conformance_writes (key) VALUES (%s)", [str(message.idempotency_key)]
        )

    with fresh_database("qb_fast_py") as url:
        insert_rows(url, 6)
        worker = InboxWorker(RepeatableReadThreadPool(url), options(lease=1.0))
        run_threaded_until_processed(worker, handler, url, 6, 60)
        assert counts(url) == (6, 6)
    assert levels and all(level == "repeatable read" for level in levels), levels

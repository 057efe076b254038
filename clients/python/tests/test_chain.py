"""The next row's BEGIN sent with the current row's completion (``_fast.py``, ``_Chain`` of both
workers).

A consumer of the asyncio worker, or a handler thread of the threaded one, keeps its connection
while rows wait and, when it already holds its next row, puts that row's BEGIN in the round trip
of the current row's completion and COMMIT.
What must hold, on a real database: each row is still its own transaction, committed with its
completion and only with it; a completion that fails takes no next row's work with it; a row taken
ahead and lost before its handler starts leaves the connection idle and is not handled; a block
begun with a completion ends through psycopg like psycopg's own outer block (a failing handler's
retry is recorded). The asyncio worker also begins its next transaction when no row waits but the
worker held rows after its last claim, and waits for the next claim's rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import psycopg
import pytest

from conftest import fresh_database
from queuebox_inbox import (
    AsyncHandlerContext,
    AsyncInboxWorker,
    HandlerContext,
    InboxMessage,
    InboxOptions,
    InboxWorker,
    RetryAfter,
    render_statements,
)
from queuebox_inbox import _aio as aio
from queuebox_inbox._aio import _Chain, _Held, _Run
from queuebox_inbox._core import Claimed, complete_or_fail
from queuebox_inbox._fast import FastTransactions
from queuebox_inbox._worker import _Chain as ThreadChain
from queuebox_inbox._worker import _Held as ThreadHeld
from queuebox_inbox._worker import _Run as ThreadRun
from test_fast import counts, insert_rows, run_threaded_until_processed, run_until_processed

SOURCE = "fast"
# The workers' own fenced completion (it fails when it finds no row).
COMPLETE = complete_or_fail(render_statements().complete.text)


def claim_all(url: str) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Puts every row of the source in processing under a new token: (id, token) by key."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            """UPDATE inbox SET state = 'processing', claim_token = gen_random_uuid(),
                      claimed_at = now(), lease_expires_at = now() + interval '1 minute'
                WHERE source = %s RETURNING id, claim_token, idempotency_key""",
            [SOURCE],
        ).fetchall()
    return [(r[0], r[1]) for r in sorted(rows, key=lambda r: str(r[2]))]


def run_on_rows(count: int, main: Callable[[str], Coroutine[Any, Any, None]]) -> None:
    """Runs ``main`` on a fresh database holding ``count`` pending rows of the source."""
    with fresh_database("qb_chain_py") as url:
        insert_rows(url, count)
        asyncio.run(main(url))


def test_a_completion_carries_the_next_rows_begin_and_each_row_commits_alone() -> None:
    async def main(url: str) -> None:
        (first_id, first_token), (second_id, second_token) = claim_all(url)
        fast = FastTransactions(COMPLETE)
        conn = await psycopg.AsyncConnection.connect(url)
        try:
            block = await fast.begin(conn)
            await conn.execute("INSERT INTO conformance_writes (key) VALUES ('one')")
            first_xid = await xid(conn)
            following = await fast.complete(conn, block, first_id, first_token, begin_next=True)
            assert following is not None
            assert following.status == psycopg.AsyncTransaction.Status.ACTIVE
            # The next row's transaction is open, a new one, and still a psycopg block.
            assert status(conn) == psycopg.pq.TransactionStatus.INTRANS
            assert await xid(conn) != first_xid
            with pytest.raises(psycopg.ProgrammingError):
                await conn.commit()
            # The first row's write and completion are committed; the second's are not yet.
            assert counts(url) == (1, 1)
            await conn.execute("INSERT INTO conformance_writes (key) VALUES ('two')")
            assert counts(url) == (1, 1)
            last = await fast.complete(conn, following, second_id, second_token)
            assert last is None
            assert status(conn) == psycopg.pq.TransactionStatus.IDLE
            assert counts(url) == (2, 2)
        finally:
            await conn.close()

    run_on_rows(2, main)


def test_a_failed_completion_begins_no_next_row() -> None:
    async def main(url: str) -> None:
        (row_id, _token), _ = claim_all(url)
        fast = FastTransactions(COMPLETE)
        conn = await psycopg.AsyncConnection.connect(url)
        try:
            block = await fast.begin(conn)
            await conn.execute("INSERT INTO conformance_writes (key) VALUES ('lost')")
            # A token that is not the row's: the fence refuses it.
            with pytest.raises(psycopg.Error):
                await fast.complete(conn, block, row_id, uuid.uuid4(), begin_next=True)
            assert status(conn) == psycopg.pq.TransactionStatus.INERROR
            await conn.rollback()
            assert counts(url) == (0, 0)
            # The connection goes on: the next row begins anew.
            again = await fast.begin(conn)
            assert again.status == psycopg.AsyncTransaction.Status.ACTIVE
            await again.__aexit__(None, None, None)
            assert status(conn) == psycopg.pq.TransactionStatus.IDLE
        finally:
            await conn.close()

    run_on_rows(2, main)


def status(conn: psycopg.AsyncConnection[Any]) -> psycopg.pq.TransactionStatus:
    return conn.info.transaction_status


async def xid(conn: psycopg.AsyncConnection[Any]) -> int:
    row = await (await conn.execute("SELECT txid_current()")).fetchone()
    assert row is not None
    return int(row[0])


def count_unused(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the blocks the asyncio worker ends without a row (begun ahead, no row came)."""
    ended = [0]
    original = aio._end_unused

    async def counted(conn: psycopg.AsyncConnection[Any], block: psycopg.AsyncTransaction) -> None:
        ended[0] += 1
        await original(conn, block)

    monkeypatch.setattr(aio, "_end_unused", counted)
    return ended


def test_rows_back_to_back_on_one_connection_each_commit_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One handler slot and batches of five: each consumer serves the waiting rows one after the
    # other on one connection, every row but a batch's last begun with its predecessor's
    # completion. The handler of k-3 takes the row's claim away (as a replica whose lease ran
    # out would): that completion fails, k-3's write is rolled back and the row returns after
    # its lease, and the rows behind it on the same connection still commit.
    seen: list[tuple[str, int, int]] = []
    stolen = False
    counted: list[CountingFast] = []
    unused = count_unused(monkeypatch)

    async def handler(message: InboxMessage, ctx: AsyncHandlerContext) -> None:
        nonlocal stolen
        conn = ctx.connection
        seen.append((message.idempotency_key, conn.info.backend_pid, await xid(conn)))
        await conn.execute(
            "INSERT INTO conformance_writes (key) VALUES (%s)", [message.idempotency_key]
        )
        if message.idempotency_key == "k-3" and not stolen:
            stolen = True
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as other:
                await other.execute(
                    "UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = %s", [message.id]
                )

    async def main() -> None:
        options = InboxOptions(
            source=SOURCE, batch_size=5, max_concurrency=1, poll_interval=0.05, lease=1.0
        )
        worker = AsyncInboxWorker(url, options)
        worker._fast = CountingFast(COMPLETE)
        await run_until_processed(worker, handler, url, 10, 60)
        counted.append(worker._fast)

    with fresh_database("qb_chain_py") as url:
        insert_rows(url, 10)
        asyncio.run(main())
        assert counts(url) == (10, 10)
        with psycopg.connect(url, autocommit=True) as conn:
            keys = conn.execute("SELECT count(DISTINCT key) FROM conformance_writes").fetchone()
        assert keys is not None and keys[0] == 10
    assert stolen
    assert [k for k, _, _ in seen].count("k-3") == 2, seen
    # Every handler call ran in a transaction of its own.
    assert len({x for _, _, x in seen}) == len(seen), seen
    # Rows followed each other on one backend: the consumer kept its connection.
    assert any(a[1] == b[1] for a, b in itertools.pairwise(seen)), seen
    # Most rows were begun with their predecessor's completion; every row was begun one way, and
    # every block begun ahead either ran a row or was ended without one.
    fast = counted[0]
    assert fast.chained >= 5, (fast.begun, fast.chained)
    assert fast.begun + fast.chained - unused[0] == len(seen), (fast.begun, fast.chained, seen)


async def prepared_here(conn: psycopg.AsyncConnection[Any]) -> int:
    """How many prepared completions the connection's session holds."""
    row = await (
        await conn.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE name = 'queuebox_inbox_complete'"
        )
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_block_begun_with_a_completion_ends_through_psycopg_like_its_own() -> None:
    # A handler that fails on such a row, or a row taken ahead that does not run, ends the block
    # through psycopg: it must roll back or commit as psycopg's own outer block does, not as a
    # nested one (ROLLBACK TO / RELEASE of a savepoint that was never made, which failed and
    # aborted the transaction).
    async def main(url: str) -> None:
        rows = claim_all(url)
        fast = FastTransactions(COMPLETE)
        conn = await psycopg.AsyncConnection.connect(url)
        try:
            block = await fast.begin(conn)
            following = await fast.complete(conn, block, *rows[0], begin_next=True)
            assert following is not None
            await conn.execute("INSERT INTO conformance_writes (key) VALUES ('rolled back')")
            failure = RuntimeError("the handler failed")
            await following.__aexit__(RuntimeError, failure, None)
            assert status(conn) == psycopg.pq.TransactionStatus.IDLE
            assert counts(url) == (1, 0)
            block = await fast.begin(conn)
            following = await fast.complete(conn, block, *rows[1], begin_next=True)
            assert following is not None
            await following.__aexit__(None, None, None)
            assert status(conn) == psycopg.pq.TransactionStatus.IDLE
            # The completion prepared on the connection is still there for the next row.
            assert await prepared_here(conn) == 1
            block = await fast.begin(conn)
            assert await fast.complete(conn, block, *rows[2]) is None
            assert counts(url) == (3, 0)
        finally:
            await conn.close()

    run_on_rows(3, main)
    with fresh_database("qb_chain_py") as url:
        insert_rows(url, 1)
        (row,) = claim_all(url)
        fast = FastTransactions(COMPLETE)
        with psycopg.connect(url) as conn:
            block = fast.begin_sync(conn)
            following = fast.complete_sync(conn, block, *row, begin_next=True)
            assert following is not None
            conn.execute("INSERT INTO conformance_writes (key) VALUES ('rolled back')")
            following.__exit__(RuntimeError, RuntimeError("the handler failed"), None)
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert counts(url) == (1, 0)


def fails_k3_once(message: InboxMessage, _error: BaseException) -> RetryAfter:
    return RetryAfter(0.0)


# One slot and batches of five, so rows wait and each is begun with its predecessor's completion.
RETRY_ONE_SLOT = InboxOptions(
    source=SOURCE, batch_size=5, max_concurrency=1, poll_interval=0.05, retry_policy=fails_k3_once
)


def test_a_row_begun_with_a_completion_whose_handler_fails_is_retried() -> None:
    # One slot, batches of five: k-3 is begun with k-2's completion and its handler fails once.
    # Its retry must be recorded (attempt 1, the error kept), and its second run must commit.
    failed: list[str] = []
    counted: list[CountingFast] = []

    async def handler(message: InboxMessage, ctx: AsyncHandlerContext) -> None:
        await ctx.connection.execute(
            "INSERT INTO conformance_writes (key) VALUES (%s)", [message.idempotency_key]
        )
        if message.idempotency_key == "k-3" and not failed:
            failed.append(message.idempotency_key)
            raise RuntimeError("the first run of k-3 fails")

    async def main(url: str) -> None:
        worker = AsyncInboxWorker(url, RETRY_ONE_SLOT)
        worker._fast = CountingFast(COMPLETE)
        await run_until_processed(worker, handler, url, 5, 60)
        counted.append(worker._fast)

    with fresh_database("qb_chain_py") as url:
        insert_rows(url, 5)
        asyncio.run(main(url))
        assert_retried_once(url)
    assert failed == ["k-3"]
    assert counted[0].chained >= 3, (counted[0].begun, counted[0].chained)


def assert_retried_once(url: str) -> None:
    """k-3 ran twice (its failure recorded, then processed); every other row once."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT idempotency_key, attempt, last_error FROM inbox ORDER BY idempotency_key"
        ).fetchall()
        writes = conn.execute("SELECT count(*) FROM conformance_writes").fetchone()
    attempts = {key: (attempt, error) for key, attempt, error in rows}
    assert attempts["k-3"][0] == 1, attempts
    assert "the first run of k-3 fails" in (attempts["k-3"][1] or ""), attempts
    assert all(a == 0 for key, (a, _) in attempts.items() if key != "k-3"), attempts
    # The failed run's write rolled back; the five rows each wrote once.
    assert writes is not None and writes[0] == 5


def test_with_no_row_waiting_the_next_rows_begin_goes_with_the_completion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Batches of one and one slot: no row ever waits when a completion is sent, yet while the
    # worker holds rows the next claim is likely to bring one, so the completion carries the
    # next row's BEGIN and the consumer waits for that claim. The last block, begun when the
    # source ran dry, is ended without a row and no transaction stays open.
    seen: list[tuple[str, int, int]] = []
    counted: list[CountingFast] = []
    unused = count_unused(monkeypatch)

    async def handler(message: InboxMessage, ctx: AsyncHandlerContext) -> None:
        conn = ctx.connection
        seen.append((message.idempotency_key, conn.info.backend_pid, await xid(conn)))
        await conn.execute(
            "INSERT INTO conformance_writes (key) VALUES (%s)", [message.idempotency_key]
        )

    async def main(url: str) -> None:
        options = InboxOptions(source=SOURCE, batch_size=1, max_concurrency=1, poll_interval=0.05)
        worker = AsyncInboxWorker(url, options)
        worker._fast = CountingFast(COMPLETE)
        stop = asyncio.Event()
        run = asyncio.ensure_future(worker.run(handler, stop))
        try:
            deadline = time.monotonic() + 60
            # Processed, and the block begun after the last row ended (the source ran dry).
            while counts(url)[0] < 6 or unused[0] < 1:
                assert not run.done(), "the worker stopped early"
                assert time.monotonic() < deadline, (counts(url), unused)
                await asyncio.sleep(0.05)
            assert open_transactions(url) == 0
        finally:
            stop.set()
            await asyncio.wait_for(run, 30)
        counted.append(worker._fast)

    with fresh_database("qb_chain_py") as url:
        insert_rows(url, 6)
        asyncio.run(main(url))
        assert counts(url) == (6, 6)
    fast = counted[0]
    assert len({x for _, _, x in seen}) == len(seen) == 6, seen
    # Every row after the first was begun with the completion before it.
    assert fast.begun == 1, (fast.begun, fast.chained, unused)
    assert fast.chained - unused[0] == 5, (fast.begun, fast.chained, unused)


def open_transactions(url: str) -> int:
    """Sessions of the test database in a transaction, other than the asking one."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            """SELECT count(*) FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid()
                  AND state LIKE 'idle in transaction%'"""
        ).fetchone()
    assert row is not None
    return int(row[0])


class OneConnection:
    """A pool of exactly one connection: a borrower waits until it is given back."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._lock = asyncio.Lock()
        self._conn: psycopg.AsyncConnection[Any] | None = None

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with self._lock:
            if self._conn is None or self._conn.closed:
                self._conn = await psycopg.AsyncConnection.connect(self._url)
            yield self._conn
            if self._conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                await self._conn.rollback()

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()


def test_a_pool_of_one_connection_is_not_held_by_a_block_begun_ahead() -> None:
    # The consumer that begun its next row's transaction holds the only connection, which the
    # claim it waits for needs: it must give up after poll_interval, end its empty transaction
    # and hand the connection back, or the worker would wait forever.
    async def handler(message: InboxMessage, ctx: AsyncHandlerContext) -> None:
        await ctx.connection.execute(
            "INSERT INTO conformance_writes (key) VALUES (%s)", [message.idempotency_key]
        )

    async def main(url: str) -> None:
        pool = OneConnection(url)
        try:
            options = InboxOptions(
                source=SOURCE, batch_size=1, max_concurrency=1, poll_interval=0.05
            )
            await run_until_processed(AsyncInboxWorker(pool, options), handler, url, 4, 60)
        finally:
            await pool.close()

    with fresh_database("qb_chain_py") as url:
        insert_rows(url, 4)
        asyncio.run(main(url))
        assert counts(url) == (4, 4)


class CountingFast(FastTransactions):
    """Counts the rows begun on their own and those begun with a completion."""

    begun = 0
    chained = 0

    async def begin(self, conn: psycopg.AsyncConnection[Any]) -> psycopg.AsyncTransaction:
        self.begun += 1
        return await super().begin(conn)

    async def complete(
        self,
        conn: psycopg.AsyncConnection[Any],
        block: psycopg.AsyncTransaction,
        row_id: uuid.UUID,
        token: uuid.UUID,
        *,
        begin_next: bool = False,
    ) -> psycopg.AsyncTransaction | None:
        following = await super().complete(conn, block, row_id, token, begin_next=begin_next)
        self.chained += following is not None
        return following


def test_a_row_taken_ahead_and_lost_before_its_handler_is_not_handled() -> None:
    calls: list[str] = []

    async def handler(message: InboxMessage, ctx: AsyncHandlerContext) -> None:
        calls.append(message.idempotency_key)

    async def main(url: str) -> None:
        worker = AsyncInboxWorker(url, InboxOptions(source=SOURCE))
        fast = FastTransactions(COMPLETE)
        conn = await psycopg.AsyncConnection.connect(url)
        try:
            message = InboxMessage(
                id=uuid.uuid4(),
                source=SOURCE,
                idempotency_key="k-ahead",
                aggregate_id=None,
                event_type=None,
                payload={},
            )
            held = _Held(claimed=Claimed(message=message, token=uuid.uuid4()), next_renewal=0.0)
            held.lost = True
            run = _Run()
            run.held.add(held)
            run.running.add(held)
            chain = _Chain(begun=await fast.begin(conn))
            await worker._process(conn, run, held, handler, chain)
            assert calls == []
            assert chain.begun is None
            assert status(conn) == psycopg.pq.TransactionStatus.IDLE
            assert not run.held and not run.running
        finally:
            await conn.close()

    with fresh_database("qb_chain_py") as url:
        asyncio.run(main(url))


# The threaded worker: the same two worker cases.


class CountingFastSync(FastTransactions):
    """As CountingFast, for the threaded worker."""

    begun = 0
    chained = 0

    def begin_sync(self, conn: psycopg.Connection[Any]) -> psycopg.Transaction:
        self.begun += 1
        return super().begin_sync(conn)

    def complete_sync(
        self,
        conn: psycopg.Connection[Any],
        block: psycopg.Transaction,
        row_id: uuid.UUID,
        token: uuid.UUID,
        *,
        begin_next: bool = False,
    ) -> psycopg.Transaction | None:
        following = super().complete_sync(conn, block, row_id, token, begin_next=begin_next)
        self.chained += following is not None
        return following


def test_threaded_rows_back_to_back_on_one_connection_each_commit_alone() -> None:
    seen: list[tuple[str, int, int]] = []
    stolen = False

    def handler(message: InboxMessage, ctx: HandlerContext) -> None:
        nonlocal stolen
        conn = ctx.connection
        row = conn.execute("SELECT txid_current()").fetchone()
        assert row is not None
        seen.append((message.idempotency_key, conn.info.backend_pid, int(row[0])))
        conn.execute("INSERT INTO conformance_writes (key) VALUES (%s)", [message.idempotency_key])
        if message.idempotency_key == "k-3" and not stolen:
            stolen = True
            with psycopg.connect(url, autocommit=True) as other:
                other.execute(
                    "UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = %s", [message.id]
                )

    fast = CountingFastSync(COMPLETE)
    with fresh_database("qb_chain_py") as url:
        insert_rows(url, 10)
        options = InboxOptions(
            source=SOURCE, batch_size=5, max_concurrency=1, poll_interval=0.05, lease=1.0
        )
        worker = InboxWorker(url, options)
        worker._fast = fast
        run_threaded_until_processed(worker, handler, url, 10, 60)
        assert counts(url) == (10, 10)
        with psycopg.connect(url, autocommit=True) as conn:
            keys = conn.execute("SELECT count(DISTINCT key) FROM conformance_writes").fetchone()
        assert keys is not None and keys[0] == 10
    assert stolen
    assert [k for k, _, _ in seen].count("k-3") == 2, seen
    assert len({x for _, _, x in seen}) == len(seen), seen
    assert any(a[1] == b[1] for a, b in itertools.pairwise(seen)), seen
    assert fast.chained >= 5, (fast.begun, fast.chained)
    assert fast.begun + fast.chained == len(seen), (fast.begun, fast.chained, seen)


def test_threaded_a_row_taken_ahead_and_lost_before_its_handler_is_not_handled() -> None:
    calls: list[str] = []

    def handler(message: InboxMessage, ctx: HandlerContext) -> None:
        calls.append(message.idempotency_key)

    with fresh_database("qb_chain_py") as url:
        worker = InboxWorker(url, InboxOptions(source=SOURCE))
        fast = FastTransactions(COMPLETE)
        with psycopg.connect(url) as conn:
            message = InboxMessage(
                id=uuid.uuid4(),
                source=SOURCE,
                idempotency_key="k-ahead",
                aggregate_id=None,
                event_type=None,
                payload={},
            )
            held = ThreadHeld(
                claimed=Claimed(message=message, token=uuid.uuid4()), next_renewal=0.0
            )
            held.lost = True
            chain = ThreadChain(begun=fast.begin_sync(conn))
            worker._handle_on(conn, ThreadRun(), held, handler, chain)
            assert calls == []
            assert chain.begun is None
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_threaded_a_row_begun_with_a_completion_whose_handler_fails_is_retried() -> None:
    failed: list[str] = []

    def handler(message: InboxMessage, ctx: HandlerContext) -> None:
        ctx.connection.execute(
            "INSERT INTO conformance_writes (key) VALUES (%s)", [message.idempotency_key]
        )
        if message.idempotency_key == "k-3" and not failed:
            failed.append(message.idempotency_key)
            raise RuntimeError("the first run of k-3 fails")

    fast = CountingFastSync(COMPLETE)
    with fresh_database("qb_chain_py") as url:
        insert_rows(url, 5)
        worker = InboxWorker(url, RETRY_ONE_SLOT)
        worker._fast = fast
        run_threaded_until_processed(worker, handler, url, 5, 60)
        assert_retried_once(url)
    assert failed == ["k-3"]
    assert fast.chained >= 3, (fast.begun, fast.chained)

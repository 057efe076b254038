"""The next row's BEGIN sent with the current row's completion (``_fast.py``, ``_Chain`` of both
workers).

A consumer of the asyncio worker, or a handler thread of the threaded one, keeps its connection
while rows wait and, when it already holds its next row, puts that row's BEGIN in the round trip
of the current row's completion and COMMIT.
What must hold, on a real database: each row is still its own transaction, committed with its
completion and only with it; a completion that fails takes no next row's work with it; a row taken
ahead and lost before its handler starts leaves the connection idle and is not handled.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
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
    render_statements,
)
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

    with fresh_database("qb_chain_py") as url:
        insert_rows(url, 2)
        asyncio.run(main(url))


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

    with fresh_database("qb_chain_py") as url:
        insert_rows(url, 2)
        asyncio.run(main(url))


def status(conn: psycopg.AsyncConnection[Any]) -> psycopg.pq.TransactionStatus:
    return conn.info.transaction_status


async def xid(conn: psycopg.AsyncConnection[Any]) -> int:
    row = await (await conn.execute("SELECT txid_current()")).fetchone()
    assert row is not None
    return int(row[0])


def test_rows_back_to_back_on_one_connection_each_commit_alone() -> None:
    # One handler slot and batches of five: each consumer serves the waiting rows one after the
    # other on one connection, every row but a batch's last begun with its predecessor's
    # completion. The handler of k-3 takes the row's claim away (as a replica whose lease ran
    # out would): that completion fails, k-3's write is rolled back and the row returns after
    # its lease, and the rows behind it on the same connection still commit.
    seen: list[tuple[str, int, int]] = []
    stolen = False
    counted: list[CountingFast] = []

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
    # Most rows were begun with their predecessor's completion; every row was begun one way.
    fast = counted[0]
    assert fast.chained >= 5, (fast.begun, fast.chained)
    assert fast.begun + fast.chained == len(seen), (fast.begun, fast.chained, seen)


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

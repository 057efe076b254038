"""Each row's transaction (BEGIN, then the completion and COMMIT) through libpq, for both workers.

Why: every row costs a transaction of three statements, and on a small machine psycopg's own
Python machinery for them (its generators, its wait loop, its pipeline bookkeeping) cost more CPU
than the database spent on the row: on two cores shared with PostgreSQL that CPU was the limit.
Sending the same three statements through the connection's libpq object (``conn.pgconn``, part of
psycopg's API) cut the client's CPU a row from 396 to 229 µs and raised the throughput by a third
in the same run (bench/journal/2026-12-04.md).

What stays psycopg's: the handler gets the same connection and a real ``Transaction`` (or
``AsyncTransaction``), whose bookkeeping is updated exactly as psycopg's own enter and commit do
(the connection counts open blocks, so ``commit()`` inside the block still raises, and a nested
``conn.transaction()`` still makes a savepoint). That bookkeeping uses two psycopg methods that
are not public; ``available()`` checks for them, and without them the worker takes psycopg's
public path.

The completion is a named statement prepared once per connection. psycopg discards every prepared
statement of a connection (``DEALLOCATE ALL``) after a rollback when it holds prepared statements of
its own, for example after a handler rolled a savepoint back; a completion that then finds its
statement gone fails with SQLSTATE 26000, the transaction is rolled back like any failed
completion, and that connection sends the completion unnamed (parsed each time) from then on.

A completion can also carry the BEGIN of the connection's next row (``begin_next``): a worker that
keeps its connection while rows wait then spends one round trip a row instead of two (worker CPU
a row -7 to -9 % in five alternated pairs, bench/journal/2026-12-04.md).

The exchanges are generators that yield what they wait for (readable or writable socket), one
logic for both workers: the threaded worker drives them with ``select``, the asyncio one with the
event loop, as psycopg itself does.
"""

from __future__ import annotations

import asyncio
import re
import select
import uuid
import weakref
from collections.abc import Generator
from typing import Any, TypeVar

import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

# SQLSTATE of a prepared statement that does not exist (any more) on the connection.
STATEMENT_GONE_SQLSTATE = "26000"

_NAME = b"queuebox_inbox_complete"
_PREPARED, _UNKNOWN, _UNNAMED = "prepared", "unknown", "unnamed"
_OK = pq.ExecStatus.COMMAND_OK
_TUPLES = pq.ExecStatus.TUPLES_OK
_SYNC = pq.ExecStatus.PIPELINE_SYNC
_IDLE = pq.TransactionStatus.IDLE
_PIPELINE_OFF = pq.PipelineStatus.OFF
_Status = psycopg.Transaction.Status
_READ, _WRITE = 1, 2

T = TypeVar("T")
# An exchange: yields _READ or _WRITE while it waits for the socket, returns its outcome.
Exchange = Generator[int, None, T]
AnyConnection = psycopg.Connection[Any] | psycopg.AsyncConnection[Any]
AnyTransaction = psycopg.Transaction | psycopg.AsyncTransaction


def available() -> bool:
    """Whether this psycopg has the transaction bookkeeping the fast path mirrors."""
    return all(
        callable(getattr(tx, name, None))
        for tx in (psycopg.Transaction, psycopg.AsyncTransaction)
        for name in ("_push_savepoint", "_pop_savepoint")
    ) and {"_outer_transaction", "_savepoint_name"} <= set(
        psycopg.Transaction._push_savepoint.__code__.co_names
    )


def libpq_text(statement: str) -> bytes:
    """A statement rendered for psycopg (``%(id)s``, ``%(token)s``) as libpq's ``$1``, ``$2``."""
    text = statement.replace("%(id)s", "$1").replace("%(token)s", "$2")
    if re.search(r"%\(\w+\)s", text):
        raise ValueError("the completion has a parameter other than id and token")
    return text.replace("%%", "%").encode()


def usable(conn: AnyConnection) -> bool:
    """Idle, not in pipeline or autocommit mode, and no transaction characteristics set (a
    plain BEGIN would leave out an isolation level, read only or deferrable): a plain BEGIN
    starts the row's block exactly as psycopg would."""
    pg = conn.pgconn
    return (
        not conn.autocommit
        and conn.isolation_level is None
        and conn.read_only is None
        and conn.deferrable is None
        and pg.transaction_status == _IDLE
        and pg.pipeline_status == _PIPELINE_OFF
    )


class FastTransactions:
    """Begins and commits the rows' transactions of one worker through libpq.

    ``begin_sync`` / ``complete_sync`` for the threaded worker, ``begin`` / ``complete`` for the
    asyncio one; a worker uses one pair.
    """

    def __init__(self, complete: str) -> None:
        self._complete = libpq_text(complete)
        # Each connection's completion, by the backend it talked to (a reconnected connection
        # prepares again): _PREPARED, _UNKNOWN (a rollback since may have discarded it) or _UNNAMED.
        self._prepared: weakref.WeakKeyDictionary[AnyConnection, tuple[int, str]]
        self._prepared = weakref.WeakKeyDictionary()

    def forget(self, conn: AnyConnection) -> None:
        """The worker rolled ``conn`` back: psycopg may have discarded the prepared completion."""
        state = self._prepared.get(conn)
        if state is not None and state[1] == _PREPARED:
            self._prepared[conn] = (state[0], _UNKNOWN)

    async def begin(self, conn: psycopg.AsyncConnection[Any]) -> psycopg.AsyncTransaction:
        """BEGIN, and an ``AsyncTransaction`` in the state psycopg's ``__aenter__`` leaves it."""
        # conn.transaction() would be a context manager around this object; the object itself is
        # what a handler gets either way, and its __aexit__ rolls back as psycopg's would.
        block = psycopg.AsyncTransaction(conn)
        async with conn.lock:
            await _drive_async(self._begin(conn, block), conn.pgconn.socket)
        return block

    def begin_sync(self, conn: psycopg.Connection[Any]) -> psycopg.Transaction:
        """BEGIN, and a ``Transaction`` in the state psycopg's ``__enter__`` leaves it."""
        block = psycopg.Transaction(conn)
        with conn.lock:
            _drive_sync(self._begin(conn, block), conn.pgconn.socket)
        return block

    async def complete(
        self,
        conn: psycopg.AsyncConnection[Any],
        block: psycopg.AsyncTransaction,
        row_id: uuid.UUID,
        token: uuid.UUID,
        *,
        begin_next: bool = False,
    ) -> psycopg.AsyncTransaction | None:
        """The completion and COMMIT in one round trip; ``block`` ends either way.

        With ``begin_next`` the same round trip carries the BEGIN of the connection's next row
        (after its own sync point, so it runs only once the COMMIT is answered), and the next
        row's block is returned in the state ``begin`` leaves it: a worker that already holds
        its next row saves that row's BEGIN round trip. None when it was not asked for, or when
        the BEGIN did not go through after a successful COMMIT (the connection is then closed
        unless it is idle, and the caller begins the next row anew).

        On failure the transaction is left aborted (the caller rolls it back, as after psycopg's
        own pipeline; a BEGIN sent behind the failure failed too) and the completion's error is
        raised.
        """
        following = psycopg.AsyncTransaction(conn) if begin_next else None
        async with conn.lock:
            exchange = self._complete_and_commit(conn, block, _params(row_id, token), following)
            begun = await _drive_async(exchange, conn.pgconn.socket)
        return following if begun else None

    def complete_sync(
        self,
        conn: psycopg.Connection[Any],
        block: psycopg.Transaction,
        row_id: uuid.UUID,
        token: uuid.UUID,
        *,
        begin_next: bool = False,
    ) -> psycopg.Transaction | None:
        """As ``complete``, for the threaded worker."""
        following = psycopg.Transaction(conn) if begin_next else None
        with conn.lock:
            exchange = self._complete_and_commit(conn, block, _params(row_id, token), following)
            begun = _drive_sync(exchange, conn.pgconn.socket)
        return following if begun else None

    def _begin(self, conn: AnyConnection, block: AnyTransaction) -> Exchange[None]:
        yield from self._prepare(conn)
        block.status = _Status.ACTIVE
        # Counts the block on the connection; the connection is idle, so it is an outer block.
        block._push_savepoint()
        pg = conn.pgconn
        try:
            pg.send_query(b"BEGIN")
            yield from _flush(pg)
            result = yield from _one_result(pg)
            if result.status != _OK:
                raise error_from_result(result, encoding=conn.info.encoding)
        except BaseException:
            block._pop_savepoint("rollback")
            block.status = _Status.FAILED
            _close_unless_idle(pg)
            raise

    def _prepare(self, conn: AnyConnection) -> Exchange[None]:
        """Prepares the completion on an idle connection that may not have it."""
        pg = conn.pgconn
        state = self._prepared.get(conn)
        if state is not None and state[0] == pg.backend_pid and state[1] != _UNKNOWN:
            return
        self._prepared.pop(conn, None)
        try:
            if state is not None and state[0] == pg.backend_pid:
                # It may have survived the rollback: drop it first (an error here only says it
                # did not, and leaves the idle connection as it was).
                pg.send_query(b"DEALLOCATE " + _NAME)
                yield from _flush(pg)
                yield from _one_result(pg)
            pg.send_prepare(_NAME, self._complete)
            yield from _flush(pg)
            result = yield from _one_result(pg)
        except BaseException:
            _close_unless_idle(pg)
            raise
        if result.status != _OK:
            raise error_from_result(result, encoding=conn.info.encoding)
        self._prepared[conn] = (pg.backend_pid, _PREPARED)

    def _complete_and_commit(
        self,
        conn: AnyConnection,
        block: AnyTransaction,
        params: list[bytes],
        following: AnyTransaction | None,
    ) -> Exchange[bool]:
        """Returns whether ``following`` (when given) was begun."""
        pg = conn.pgconn
        named = self._prepared.get(conn) == (pg.backend_pid, _PREPARED)
        ended = False
        try:
            pg.enter_pipeline_mode()
            if named:
                pg.send_query_prepared(_NAME, params)
            else:
                pg.send_query_params(self._complete, params)
            pg.send_query_params(b"COMMIT", None)
            pg.pipeline_sync()
            if following is not None:
                # Its own sync point: after a failed completion the server skips to the first
                # sync, so this BEGIN still runs, finds the transaction aborted and fails too.
                pg.send_query_params(b"BEGIN", None)
                pg.pipeline_sync()
            yield from _flush(pg)
            results = yield from _until_sync(pg)
            begin_results = (yield from _until_sync(pg)) if following is not None else []
            pg.exit_pipeline_mode()
            failed = next((r for r in results if r.status not in (_OK, _TUPLES)), None)
            ended = True
            if failed is None and len(results) == 2:
                _end(block, committed=True)
                if following is None:
                    return False
                if len(begin_results) == 1 and begin_results[0].status == _OK:
                    following.status = _Status.ACTIVE
                    _count_as_outer(following)
                    return True
                _close_unless_idle(pg)
                return False
            _end(block, committed=False)
            if failed is None:
                raise psycopg.InternalError(
                    f"queuebox: the completion and COMMIT gave {len(results)} results, not 2"
                )
            error = error_from_result(failed, encoding=conn.info.encoding)
            if error.sqlstate == STATEMENT_GONE_SQLSTATE:
                self._prepared[conn] = (pg.backend_pid, _UNNAMED)
            raise error
        except BaseException:
            if not ended:
                # Cancelled or cut off mid-exchange: whether the COMMIT ran is unknown and the
                # protocol state is not one psycopg can go on from, so the connection is closed
                # (the pool drops it); the row's fence decides what happened.
                _end(block, committed=False)
                pg.finish()
            raise


def _count_as_outer(block: AnyTransaction) -> None:
    """Counts ``block``, whose BEGIN was just answered, on its connection as the outer block that
    psycopg's own enter makes on an idle connection.

    psycopg's ``_push_savepoint`` takes a block for an outer one only when the connection is idle;
    here it is already in the block's transaction, so it would take it for a nested block and end
    it (when a handler fails, or a row taken ahead is not run) with ROLLBACK TO / RELEASE of a
    savepoint that does not exist, which aborts the transaction and loses the failure's record.
    """
    block._push_savepoint()
    block._outer_transaction = True
    block._savepoint_name = ""


def _params(row_id: uuid.UUID, token: uuid.UUID) -> list[bytes]:
    """The completion's parameters ($1 id, $2 token) as libpq text."""
    return [str(row_id).encode(), str(token).encode()]


def _end(block: AnyTransaction, *, committed: bool) -> None:
    """Closes ``block``'s bookkeeping as psycopg's commit or rollback would, with no command."""
    block._pop_savepoint("commit" if committed else "rollback")
    block.status = _Status.COMMITTED if committed else _Status.ROLLED_BACK_WITH_ERROR


def _close_unless_idle(pg: Any) -> None:
    """After an exchange cut off (cancelled, or the socket failed) or a BEGIN that went through
    before a failure: a connection not idle is in no state psycopg can go on from (a command half
    answered, or a transaction nobody owns), so it is closed and the pool drops it."""
    if pg.transaction_status != _IDLE:
        pg.finish()


def _flush(pg: Any) -> Exchange[None]:
    """Sends what libpq buffered (psycopg's connections are non-blocking)."""
    while pg.flush() != 0:
        yield _WRITE


def _one_result(pg: Any) -> Exchange[Any]:
    """The result of one command sent outside pipeline mode."""
    while True:
        pg.consume_input()
        if not pg.is_busy():
            result = pg.get_result()
            while pg.get_result() is not None:
                pass
            if result is None:
                raise psycopg.OperationalError("queuebox: the server sent no result")
            return result
        yield _READ


def _until_sync(pg: Any) -> Exchange[list[Any]]:
    """Every result of a pipeline up to its sync point."""
    results: list[Any] = []
    while True:
        pg.consume_input()
        while not pg.is_busy():
            result = pg.get_result()
            if result is None:
                continue
            if result.status == _SYNC:
                return results
            results.append(result)
        yield _READ


def _block_until(fd: int, wait: int) -> None:
    """Blocks until ``fd`` is readable or writable: poll where it exists (select's descriptor
    limit of 1024 does not apply to it), select elsewhere (Windows)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN if wait == _READ else select.POLLOUT)
        poller.poll()
    elif wait == _READ:
        select.select([fd], [], [])
    else:
        select.select([], [fd], [])


def _drive_sync(exchange: Exchange[T], fd: int) -> T:
    """Runs ``exchange`` on the calling thread, blocking in ``select`` while it waits."""
    try:
        wait = next(exchange)
        while True:
            try:
                _block_until(fd, wait)
            except BaseException as error:
                # Interrupted while waiting: the exchange cleans up (closes the connection).
                exchange.throw(error)
                raise
            wait = exchange.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def _drive_async(exchange: Exchange[T], fd: int) -> T:
    """Runs ``exchange`` on the event loop, suspending while it waits for the socket."""
    loop = asyncio.get_running_loop()
    try:
        wait = next(exchange)
        while True:
            ready: asyncio.Future[None] = loop.create_future()

            def wake(ready: asyncio.Future[None] = ready) -> None:
                if not ready.done():
                    ready.set_result(None)

            watch, unwatch = (
                (loop.add_reader, loop.remove_reader)
                if wait == _READ
                else (loop.add_writer, loop.remove_writer)
            )
            watch(fd, wake)
            try:
                await ready
            except BaseException as error:
                # Cancelled while waiting: the exchange cleans up (closes the connection).
                exchange.throw(error)
                raise
            finally:
                unwatch(fd)
            wait = exchange.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]

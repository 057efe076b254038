"""The asyncio worker: tasks, psycopg ``AsyncConnection``."""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg
from psycopg.rows import tuple_row

from ._core import (
    CLAIM_SETTINGS,
    SCHEMA_HINT,
    Claimed,
    claim_params,
    decide,
    decode,
    failure_params,
    log,
)
from ._errors import InboxError
from ._message import InboxMessage
from ._options import DeadLetter, InboxOptions
from ._sanitize import sanitize_error
from ._sql import render_statements


class AsyncConnectionSource(Protocol):
    """Where the worker takes its connections: a ``psycopg_pool.AsyncConnectionPool`` fits.

    ``connection()`` lends one connection for an ``async with`` block; a connection the worker
    closed inside the block must be dropped, not reused.
    """

    def connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]: ...


@dataclass(frozen=True)
class AsyncHandlerContext:
    """What an asyncio handler gets besides the message.

    Write through ``connection`` (its transaction ``transaction`` is open; never commit or roll
    back: the worker does, with the completion). When the lease is lost or a stop runs out of
    grace, ``cancelled`` is set and the handler's task is cancelled; nothing it wrote is committed.
    """

    connection: psycopg.AsyncConnection[Any]
    transaction: psycopg.AsyncTransaction
    cancelled: asyncio.Event


AsyncHandler = Callable[[InboxMessage, AsyncHandlerContext], Awaitable[None]]
"""The work for one message: raise to fail it (the retry policy decides what follows)."""


class AsyncConninfoPool:
    """A small pool of async psycopg connections opened from a connection string."""

    def __init__(self, conninfo: str, **kwargs: Any) -> None:
        self._conninfo = conninfo
        self._kwargs = kwargs
        self._idle: list[psycopg.AsyncConnection[Any]] = []

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = await psycopg.AsyncConnection.connect(self._conninfo, **self._kwargs)
        ok = False
        try:
            yield conn
            ok = True
        finally:
            await self._give_back(conn, ok)

    async def _give_back(self, conn: psycopg.AsyncConnection[Any], ok: bool) -> None:
        if conn.closed or conn.broken:
            return
        idle = psycopg.pq.TransactionStatus.IDLE
        try:
            if conn.info.transaction_status != idle:
                await conn.rollback()
        except (psycopg.Error, asyncio.CancelledError):
            ok = False
        if not ok and conn.info.transaction_status != idle:
            await conn.close()
            return
        self._idle.append(conn)

    async def close(self) -> None:
        """Closes the idle connections."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()


class _Abandoned(Exception):
    pass


class _ClaimLost(Exception):
    pass


@dataclass(eq=False)
class _Held:
    claimed: Claimed
    next_renewal: float
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    lost: bool = False
    finished: bool = False
    renewing: bool = False
    renewal: asyncio.Task[None] | None = None
    task: asyncio.Task[None] | None = None


@dataclass(eq=False)
class _Run:
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    held: set[_Held] = field(default_factory=set)
    waiting: collections.deque[_Held] = field(default_factory=collections.deque)
    running: set[_Held] = field(default_factory=set)
    consumers: set[asyncio.Task[None]] = field(default_factory=set)
    stopping: bool = False
    stop: asyncio.Event | None = None


class AsyncInboxWorker:
    """Claims and handles the rows of one pull source, on asyncio tasks.

    ``connection`` is a connection string or a pool with ``connection()`` (for example a
    ``psycopg_pool.AsyncConnectionPool``). The constructor checks the options and renders the
    statements; it raises :class:`InboxConfigError` for a setting that cannot work.
    """

    def __init__(self, connection: str | AsyncConnectionSource, options: InboxOptions) -> None:
        if isinstance(connection, str):
            self._own_pool: AsyncConninfoPool | None = AsyncConninfoPool(connection)
            self._source: AsyncConnectionSource = self._own_pool
        elif callable(getattr(connection, "connection", None)):
            self._own_pool = None
            self._source = connection
        else:
            raise InboxError(
                "queuebox: AsyncInboxWorker needs a connection string or a pool with "
                "connection(), for example a psycopg_pool.AsyncConnectionPool"
            )
        if not isinstance(options, InboxOptions):
            raise InboxError("queuebox: AsyncInboxWorker needs InboxOptions")
        self._options = options
        self._sql = render_statements(options.schema)
        self._stop: asyncio.Event | None = None
        self._running = False

    @property
    def options(self) -> InboxOptions:
        return self._options

    def stop(self) -> None:
        """Asks :meth:`run` to stop; call it from the loop's thread (or use the ``stop`` event)."""
        if self._stop is not None:
            self._stop.set()

    async def run(self, handler: AsyncHandler, stop: asyncio.Event | None = None) -> None:
        """Claims and handles rows until :meth:`stop` is called or ``stop`` is set.

        Then it claims nothing more, hands back the claimed rows no handler has started, waits up
        to ``shutdown_grace`` for running handlers and cancels the rest (nothing is written for
        them; their rows keep their attempt and return when the lease runs out). Raises
        :class:`InboxError` before the first claim when the table lacks a column the library
        needs (the V10 schema or later).
        """
        if not callable(handler):
            raise InboxError("queuebox: run needs a handler")
        if self._running:
            raise InboxError("queuebox: this worker is already running")
        self._running = True
        self._stop = stop if stop is not None else asyncio.Event()
        try:
            await self._check_schema()
            await self._loop(handler, self._stop)
        finally:
            if self._own_pool is not None:
                await self._own_pool.close()
            self._running = False

    async def _check_schema(self) -> None:
        try:
            async with self._source.connection() as conn, conn.transaction():
                await conn.execute(self._sql.check.text)
        except psycopg.Error as error:
            raise InboxError(SCHEMA_HINT + sanitize_error(error)) from None

    async def _loop(self, handler: AsyncHandler, stop: asyncio.Event) -> None:
        o = self._options
        run = _Run(stop=stop)
        try:
            while not stop.is_set():
                if len(run.held) > o.max_concurrency:
                    await _wait_changed(run, stop, None)
                    continue
                rows: list[Claimed] = []
                try:
                    rows = await self._claim(o.batch_size)
                except Exception as error:  # noqa: BLE001 - logged, and the loop goes on
                    if not stop.is_set():
                        log(
                            o,
                            logging.WARNING,
                            "inbox claim failed; waiting before the next claim",
                            error=error,
                        )
                now = time.monotonic()
                for claimed in rows:
                    held = _Held(claimed=claimed, next_renewal=now + o.lease / 3)
                    held.renewal = asyncio.create_task(self._keep_lease(run, held))
                    run.held.add(held)
                    run.waiting.append(held)
                while (
                    run.waiting
                    and len(run.consumers) < o.max_concurrency
                    and len(run.consumers) < len(run.waiting) + len(run.running)
                ):
                    task = asyncio.create_task(self._consume(run, handler))
                    run.consumers.add(task)
                    task.add_done_callback(run.consumers.discard)
                if not rows:
                    await _wait_changed(run, stop, o.poll_interval)
        finally:
            run.stopping = True
            # Rows still waiting for a handler slot are handed back at once.
            while run.waiting:
                held = run.waiting.popleft()
                await self._release(held)
                await self._finish(run, held)
            consumers = set(run.consumers)
            if consumers:
                _, pending = await asyncio.wait(consumers, timeout=o.shutdown_grace)
                if pending:
                    log(
                        o,
                        logging.WARNING,
                        "shutdown grace ran out; cancelling running handlers, their rows return "
                        "after the lease",
                        handlers=len(run.running),
                    )
                    for held in list(run.running):
                        self._cancel(held)
                    await asyncio.wait(pending)

    async def _claim(self, want: int) -> list[Claimed]:
        # One round trip in pipeline mode: BEGIN, the settings, the claim and COMMIT go together,
        # and the rows are read once the commit is answered.
        async with self._source.connection() as conn:
            cur = conn.cursor(row_factory=tuple_row)
            async with conn.pipeline(), conn.transaction():
                await conn.execute(CLAIM_SETTINGS, prepare=True)
                await cur.execute(
                    self._sql.claim.text, claim_params(self._options, want), prepare=True
                )
            rows = await cur.fetchall()
        return decode(rows)

    def _cancel(self, held: _Held) -> None:
        held.cancelled.set()
        if held.task is not None:
            held.task.cancel()

    async def _keep_lease(self, run: _Run, held: _Held) -> None:
        # Renews every third of the lease; a renewal that changes no row, or fails, cancels.
        o = self._options
        every = o.lease / 3
        while not held.finished:
            await asyncio.sleep(max(0.0, held.next_renewal - time.monotonic()))
            if held.finished:
                return
            reason = ""
            held.renewing = True
            try:
                async with self._source.connection() as conn:
                    # One round trip: BEGIN, the renewal and COMMIT in pipeline mode.
                    async with conn.pipeline(), conn.transaction():
                        cur = await conn.execute(
                            self._sql.renew.text,
                            {
                                "id": held.claimed.message.id,
                                "token": held.claimed.token,
                                "lease_ms": o.lease_ms,
                            },
                            prepare=True,
                        )
                    if cur.rowcount != 1:
                        reason = "the renewal found no row: another worker owns it"
            except psycopg.Error as error:
                reason = f"the renewal failed: {sanitize_error(error)}"
            finally:
                held.renewing = False
            # Every third of the lease from the claim on, not from the end of the last renewal:
            # a slow renewal does not push the next one later.
            held.next_renewal += every
            if reason and not held.finished:
                held.lost = True
                log(
                    o,
                    logging.WARNING,
                    "inbox lease lost; cancelling the handler, its writes roll back",
                    id=held.claimed.message.id,
                    reason=reason,
                )
                self._cancel(held)
                await _notify(run)
                return

    async def _end_renewal(self, held: _Held) -> None:
        held.finished = True
        renewal = held.renewal
        if renewal is not None and renewal is not asyncio.current_task():
            # A renewal in flight finishes (the row lock would make it wait for our commit and
            # then call the row lost); a renewal that is only sleeping is cancelled.
            if not held.renewing:
                renewal.cancel()
            await asyncio.gather(renewal, return_exceptions=True)

    async def _finish(self, run: _Run, held: _Held) -> None:
        await self._end_renewal(held)
        run.held.discard(held)
        run.running.discard(held)
        await _notify(run)

    async def _consume(self, run: _Run, handler: AsyncHandler) -> None:
        # The stop is checked here too: a slot can free up before the claim loop sees the stop,
        # and the rows still waiting are then handed back by the loop.
        while run.waiting and not run.stopping and not (run.stop is not None and run.stop.is_set()):
            held = run.waiting.popleft()
            if held.lost or held.cancelled.is_set():
                log(
                    self._options,
                    logging.WARNING,
                    "inbox lease lost before the handler started; the row is left to its new owner",
                    id=held.claimed.message.id,
                )
                await self._finish(run, held)
                continue
            run.running.add(held)
            try:
                await self._handle(held, handler)
            except Exception as error:  # noqa: BLE001 - logged; the row returns after its lease
                log(
                    self._options,
                    logging.ERROR,
                    "inbox row processing failed; the row returns after its lease",
                    id=held.claimed.message.id,
                    error=error,
                )
            finally:
                await self._finish(run, held)

    async def _handle(self, held: _Held, handler: AsyncHandler) -> None:
        o = self._options
        claimed = held.claimed
        message = claimed.message
        failure: BaseException | None = None
        try:
            async with self._source.connection() as conn:
                try:
                    async with conn.transaction() as tx:
                        context = AsyncHandlerContext(conn, tx, held.cancelled)
                        held.task = asyncio.create_task(_call(handler, message, context))
                        await asyncio.wait({held.task})
                        task, held.task = held.task, None
                        if task.cancelled() or held.cancelled.is_set():
                            await self._end_renewal(held)
                            raise _Abandoned()
                        error = task.exception()
                        if error is not None:
                            failure = error
                            raise _Failed()
                        await self._end_renewal(held)
                        if held.cancelled.is_set():
                            raise _Abandoned()
                        cur = await conn.execute(
                            self._sql.complete.text,
                            {"id": message.id, "token": claimed.token},
                            prepare=True,
                        )
                        if cur.rowcount != 1:
                            raise _ClaimLost()
                except _Abandoned:
                    log(
                        o,
                        logging.WARNING,
                        "inbox handler cancelled; its writes rolled back and nothing written for "
                        "the row",
                        id=message.id,
                    )
                    return
                except _ClaimLost:
                    log(
                        o,
                        logging.WARNING,
                        "completion found no row: claim lost, handler writes rolled back",
                        id=message.id,
                    )
                    return
                except _Failed:
                    await self._end_renewal(held)
                    if failure is not None and not held.cancelled.is_set():
                        await self._fail(conn, claimed, failure)
                    return
                except psycopg.Error as error:
                    log(
                        o,
                        logging.WARNING,
                        "completion failed; handler writes rolled back, the row returns after "
                        "its lease",
                        id=message.id,
                        error=error,
                    )
                    return
        except psycopg.Error as error:
            log(
                o,
                logging.WARNING,
                "could not use a connection for the handler; the row returns after its lease",
                id=message.id,
                error=error,
            )

    async def _release(self, held: _Held) -> None:
        await self._end_renewal(held)
        try:
            async with self._source.connection() as conn, conn.transaction():
                await conn.execute(
                    self._sql.release.text,
                    {"id": held.claimed.message.id, "token": held.claimed.token},
                    prepare=True,
                )
        except Exception as error:  # noqa: BLE001 - logged
            log(
                self._options,
                logging.WARNING,
                "could not hand an unstarted row back; it returns after its lease",
                id=held.claimed.message.id,
                error=error,
            )

    async def _fail(
        self, conn: psycopg.AsyncConnection[Any], claimed: Claimed, failure: BaseException
    ) -> None:
        o = self._options
        message = claimed.message
        text = sanitize_error(failure)
        action = decide(o, message, failure)
        dead = isinstance(action, DeadLetter)
        fields: dict[str, object] = {
            "id": message.id,
            "attempt": message.attempt,
            "action": "dead letter" if dead else "retry",
            "error": text,
        }
        if message.correlation_id is not None:
            fields["correlation_id"] = message.correlation_id
        statement = self._sql.dead if dead else self._sql.retry
        try:
            async with conn.transaction():
                cur = await conn.execute(
                    statement.text, failure_params(claimed, action, text), prepare=True
                )
        except psycopg.Error as error:
            log(
                o,
                logging.ERROR,
                "recording the handler failure failed; the row returns after its lease",
                database_error=error,
                **fields,
            )
            return
        if cur.rowcount == 1:
            log(o, logging.WARNING, "inbox handler failed", **fields)
        else:
            log(
                o,
                logging.WARNING,
                "claim lost before the failure could be recorded; the new owner has the row",
                **fields,
            )


class _Failed(Exception):
    pass


async def _call(handler: AsyncHandler, message: InboxMessage, context: AsyncHandlerContext) -> None:
    await handler(message, context)


async def _notify(run: _Run) -> None:
    async with run.changed:
        run.changed.notify_all()


async def _wait_changed(run: _Run, stop: asyncio.Event, timeout: float | None) -> None:
    """Waits until a held row finishes, ``stop`` is set, or ``timeout`` seconds pass."""

    async def changed() -> None:
        async with run.changed:
            await run.changed.wait()

    waits = [asyncio.ensure_future(changed()), asyncio.ensure_future(stop.wait())]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
        await asyncio.gather(*waits, return_exceptions=True)

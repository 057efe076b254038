"""The asyncio worker: tasks, psycopg ``AsyncConnection``."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg
from psycopg.rows import tuple_row

from ._core import (
    CLAIM_LOST_SQLSTATE,
    CLAIM_SETTINGS,
    SCHEMA_HINT,
    Claimed,
    claim_params,
    complete_or_fail,
    decide,
    decode,
    failure_params,
    log,
)
from ._errors import InboxError
from ._fast import FastTransactions, usable
from ._fast import available as fast_available
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


_IDLE = psycopg.pq.TransactionStatus.IDLE
_INERROR = psycopg.pq.TransactionStatus.INERROR


class _Abandoned(Exception):
    pass


class _Failed(Exception):
    pass


@dataclass(eq=False)
class _Held:
    claimed: Claimed
    next_renewal: float
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    lost: bool = False
    finished: bool = False
    renewing: bool = False
    # The first renewal is a timer; its task starts only when the timer fires, so a row handled
    # within a third of the lease never gets a task of its own.
    timer: asyncio.TimerHandle | None = None
    renewal: asyncio.Task[None] | None = None
    task: asyncio.Task[None] | None = None


@dataclass(eq=False)
class _Run:
    held: set[_Held] = field(default_factory=set)
    waiting: collections.deque[_Held] = field(default_factory=collections.deque)
    running: set[_Held] = field(default_factory=set)
    consumers: set[asyncio.Task[None]] = field(default_factory=set)
    stopping: bool = False
    stop: asyncio.Event | None = None
    # Set while the claim loop waits; a finished row, a lost lease or the stop resolves it.
    wake: asyncio.Future[None] | None = None
    # The end of the claim under way, or of the next one when a consumer waits for it: resolved
    # once that claim's rows wait (see _Chain).
    claimed: asyncio.Future[None] | None = None
    # Whether rows are likely to come: the worker held rows after its last claim. (A claim can
    # come back empty under a backlog, when other workers locked the rows it picked.)
    backlog: bool = False


@dataclass(eq=False)
class _Chain:
    """A consumer's next row, taken before its current row's completion is sent.

    Why: a consumer keeps its connection while rows wait, and when it already holds its next row
    the BEGIN of that row goes in the same round trip as the current row's completion and COMMIT
    (one round trip a row instead of two). ``begun`` is that row's open transaction block on the
    consumer's connection, or None when the row must be begun anew.

    When no row waits while the worker held rows after its last claim, the consumer begins its
    next transaction all the same and waits for the claims that follow: under a backlog the claim
    runs once the rows held are down to max_concurrency, that is when no row waits, so without
    this most rows (73 % of 50,000 at batch 25, measured) paid the BEGIN's round trip. A consumer
    that finds no row once the worker holds none, or waits longer than poll_interval for a claim
    (a pool too small to lend the claim a connection), ends its empty transaction.
    """

    held: _Held | None = None
    begun: psycopg.AsyncTransaction | None = None


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
        self._complete = complete_or_fail(self._sql.complete.text)
        self._fast = FastTransactions(self._complete) if fast_available() else None
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
        loop = asyncio.get_running_loop()
        watcher = asyncio.create_task(_wake_on(stop, run))
        try:
            while not stop.is_set():
                if len(run.held) > o.max_concurrency:
                    await _wait_changed(run, None)
                    continue
                rows: list[Claimed] = []
                try:
                    try:
                        rows = await self._claim(run, o.batch_size)
                    except Exception as error:  # noqa: BLE001 - logged, and the loop goes on
                        if not stop.is_set():
                            log(
                                o,
                                logging.WARNING,
                                "inbox claim failed; waiting before the next claim",
                                error=error,
                            )
                    every = o.lease / 3
                    now = time.monotonic()
                    for claimed in rows:
                        held = _Held(claimed=claimed, next_renewal=now + every)
                        held.timer = loop.call_later(every, self._start_renewal, run, held)
                        run.held.add(held)
                        run.waiting.append(held)
                    run.backlog = bool(run.held)
                    self._start_consumers(run, handler)
                finally:
                    _claim_over(run)
                if not rows:
                    await _wait_changed(run, o.poll_interval)
        finally:
            run.stopping = True
            watcher.cancel()
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
            await asyncio.gather(watcher, return_exceptions=True)

    def _start_consumers(self, run: _Run, handler: AsyncHandler) -> None:
        """Starts consumers for the waiting rows, up to max_concurrency in all."""
        o = self._options
        while (
            run.waiting
            and len(run.consumers) < o.max_concurrency
            and len(run.consumers) < len(run.waiting) + len(run.running)
        ):
            task = asyncio.create_task(self._consume(run, handler))
            run.consumers.add(task)
            # For a consumer cancelled before its first step, whose own `finally` never runs.
            task.add_done_callback(run.consumers.discard)

    async def _claim(self, run: _Run, want: int) -> list[Claimed]:
        # One round trip: BEGIN, the settings, the claim and COMMIT go together in pipeline
        # mode, and the rows are read once the commit is answered.
        async with self._source.connection() as conn:
            _claim_under_way(run)
            cur = conn.cursor(row_factory=tuple_row)

            async def statements() -> None:
                await conn.execute(CLAIM_SETTINGS, prepare=True)
                await cur.execute(
                    self._sql.claim.text, claim_params(self._options, want), prepare=True
                )

            await _in_one_trip(conn, statements)
            rows = await cur.fetchall()
        return decode(rows)

    def _cancel(self, held: _Held) -> None:
        held.cancelled.set()
        if held.task is not None:
            held.task.cancel()

    def _start_renewal(self, run: _Run, held: _Held) -> None:
        held.timer = None
        if not held.finished:
            held.renewal = asyncio.create_task(self._keep_lease(run, held))

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
                    cur = conn.cursor()

                    async def renew(cur: psycopg.AsyncCursor[Any] = cur) -> None:
                        params = {
                            "id": held.claimed.message.id,
                            "token": held.claimed.token,
                            "lease_ms": o.lease_ms,
                        }
                        await cur.execute(self._sql.renew.text, params, prepare=True)

                    # One round trip: BEGIN, the renewal and COMMIT in pipeline mode.
                    await _in_one_trip(conn, renew)
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
                _notify(run)
                return

    async def _end_renewal(self, held: _Held) -> None:
        held.finished = True
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None
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
        _notify(run)

    async def _consume(self, run: _Run, handler: AsyncHandler) -> None:
        try:
            await self._consume_waiting(run, handler)
        finally:
            # Leave the set in the same step as the decision to take no more rows. A done callback
            # would do it only after the loop ran other ready work: the claim loop, resumed in
            # between, counted this consumer as alive, started none for rows it had just claimed,
            # and then waited for a change that nothing would make (rows held and renewed forever,
            # seen in 4 of 18 50,000-row benchmark runs).
            task = asyncio.current_task()
            if task is not None:
                run.consumers.discard(task)

    async def _take(self, run: _Run) -> _Held | None:
        """The next waiting row, counted as running; None when none waits or the worker stops.

        The stop is checked here too: a slot can free up before the claim loop sees the stop, and
        the rows still waiting are then handed back by the loop.
        """
        while run.waiting and not _stopping(run):
            held = run.waiting.popleft()
            if held.lost or held.cancelled.is_set():
                self._log_lost_before_start(held)
                await self._finish(run, held)
                continue
            run.running.add(held)
            return held
        return None

    def _log_lost_before_start(self, held: _Held) -> None:
        log(
            self._options,
            logging.WARNING,
            "inbox lease lost before the handler started; the row is left to its new owner",
            id=held.claimed.message.id,
        )

    async def _consume_waiting(self, run: _Run, handler: AsyncHandler) -> None:
        chain = _Chain(held=await self._take(run))
        while chain.held is not None:
            await self._serve(run, handler, chain)
            if chain.held is None:
                chain.held = await self._take(run)

    async def _serve(self, run: _Run, handler: AsyncHandler, chain: _Chain) -> None:
        """Handles ``chain.held`` and the rows taken after it on one connection, while rows wait.

        One connection for as long as rows wait: the next row's BEGIN can then travel with the
        current row's completion (see _Chain). A connection closed on the way (a cut exchange)
        is given back with the next row left in ``chain`` for another connection.
        """
        try:
            async with self._source.connection() as conn:
                while chain.held is not None and not conn.closed:
                    current, chain.held = chain.held, None
                    await self._process(conn, run, current, handler, chain)
                    if chain.held is None:
                        chain.held = await self._take_begun(conn, run, chain)
                chain.begun = None
        except psycopg.Error as error:
            # The pool could not lend a connection (or failed to take one back).
            chain.begun = None
            held, chain.held = chain.held, None
            if held is None:
                return
            log(
                self._options,
                logging.WARNING,
                "could not use a connection for the handler; the row returns after its lease",
                id=held.claimed.message.id,
                error=error,
            )
            await self._finish(run, held)

    async def _take_begun(
        self, conn: psycopg.AsyncConnection[Any], run: _Run, chain: _Chain
    ) -> _Held | None:
        """The next row after a completion; with ``chain.begun`` open and no row waiting, the rows
        of the claims under way are waited for, and a block left without a row is ended."""
        held = await self._take(run)
        while held is None and chain.begun is not None and not conn.closed and _claim_due(run):
            claimed = _claim_under_way(run)
            done, _ = await asyncio.wait((claimed,), timeout=self._options.poll_interval)
            if not done:
                break
            held = await self._take(run)
        if held is None and chain.begun is not None:
            begun, chain.begun = chain.begun, None
            if not conn.closed:
                await _end_unused(conn, begun)
        return held

    async def _process(
        self,
        conn: psycopg.AsyncConnection[Any],
        run: _Run,
        held: _Held,
        handler: AsyncHandler,
        chain: _Chain,
    ) -> None:
        """Handles ``held`` (running) on ``conn`` and finishes it; may take the next row."""
        try:
            if held.lost or held.cancelled.is_set():
                # Taken with the previous row's completion, lost before its handler started.
                self._log_lost_before_start(held)
                begun, chain.begun = chain.begun, None
                if begun is not None:
                    await _end_unused(conn, begun)
                return
            await self._handle_on(conn, run, held, handler, chain)
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

    async def _handle_on(
        self,
        conn: psycopg.AsyncConnection[Any],
        run: _Run,
        held: _Held,
        handler: AsyncHandler,
        chain: _Chain,
    ) -> None:
        o = self._options
        claimed = held.claimed
        message = claimed.message
        failure: BaseException | None = None
        try:
            try:
                await self._run_and_complete(conn, run, held, handler, chain)
            except BaseException as error:
                if isinstance(error, _Failed):
                    failure = error.__cause__
                # Every way out but success rolls the connection back, which can make psycopg
                # discard the completion prepared on it.
                if self._fast is not None:
                    self._fast.forget(conn)
                raise
        except _Abandoned:
            log(
                o,
                logging.WARNING,
                "inbox handler cancelled; its writes rolled back and nothing written for the row",
                id=message.id,
            )
        except _Failed:
            await self._end_renewal(held)
            if failure is not None and not held.cancelled.is_set():
                await self._fail(conn, claimed, failure)
        except psycopg.Error as error:
            lost = (
                error.sqlstate == CLAIM_LOST_SQLSTATE and conn.info.transaction_status == _INERROR
            )
            # The completion failed inside the open transaction (the COMMIT behind it was
            # skipped): end the transaction here, so the connection goes back clean.
            if not conn.closed and conn.info.transaction_status != _IDLE:
                with contextlib.suppress(psycopg.Error):
                    await conn.rollback()
            if lost:
                log(
                    o,
                    logging.WARNING,
                    "completion found no row: claim lost, handler writes rolled back",
                    id=message.id,
                )
            else:
                log(
                    o,
                    logging.WARNING,
                    "completion failed; handler writes rolled back, the row returns after its "
                    "lease",
                    id=message.id,
                    error=error,
                )

    async def _run_and_complete(
        self,
        conn: psycopg.AsyncConnection[Any],
        run: _Run,
        held: _Held,
        handler: AsyncHandler,
        chain: _Chain,
    ) -> None:
        """BEGIN (unless ``chain.begun`` is the row's open block), the handler in its own task, then
        the completion and COMMIT in one round trip, with the BEGIN of the next waiting row when
        there is one (taken into ``chain``).

        Raises _Abandoned (cancelled), _Failed from the handler's error, or the psycopg error of
        BEGIN, the completion or the COMMIT; the handler's writes are rolled back in each case.
        """
        claimed = held.claimed
        block: AbstractAsyncContextManager[Any]
        begun, chain.begun = chain.begun, None
        if begun is not None:
            # Only the fast path begins a row ahead.
            fast = self._fast
            tx = begun
            block = tx
        elif self._fast is not None and usable(conn):
            fast = self._fast
            tx = await fast.begin(conn)
            block = tx
        else:
            fast = None
            block = conn.transaction()
            tx = await block.__aenter__()
        handed_over = False
        try:
            context = AsyncHandlerContext(conn, tx, held.cancelled)
            task = asyncio.create_task(_call(handler, claimed.message, context))
            held.task = task
            await asyncio.wait((task,))
            held.task = None
            if task.cancelled() or held.cancelled.is_set():
                await self._end_renewal(held)
                raise _Abandoned()
            error = task.exception()
            if error is not None:
                raise _Failed() from error
            await self._end_renewal(held)
            if held.cancelled.is_set():
                raise _Abandoned()
            if fast is not None:
                chain.held = await self._take(run)
                handed_over = True
                # With no row waiting, the next claim is likely to bring one (see _Chain).
                ahead = chain.held is not None or _claim_due(run)
                chain.begun = await fast.complete(
                    conn, tx, claimed.message.id, claimed.token, begin_next=ahead
                )
                return
            params = {"id": claimed.message.id, "token": claimed.token}
            async with conn.pipeline():
                await conn.execute(self._complete, params, prepare=True)
                # The transaction block ends here: its COMMIT is queued behind the completion
                # and both are answered when the pipeline syncs on leaving this block.
                handed_over = True
                await block.__aexit__(None, None, None)
        except BaseException as error:
            if not handed_over:
                await block.__aexit__(type(error), error, error.__traceback__)
            raise

    async def _release(self, held: _Held) -> None:
        await self._end_renewal(held)
        try:
            async with self._source.connection() as conn:

                async def release() -> None:
                    params = {"id": held.claimed.message.id, "token": held.claimed.token}
                    await conn.execute(self._sql.release.text, params, prepare=True)

                await _in_one_trip(conn, release)
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
        cur = conn.cursor()

        async def record() -> None:
            await cur.execute(statement.text, failure_params(claimed, action, text), prepare=True)

        try:
            # One round trip: a row the statement does not find (claim lost) changes nothing,
            # so the COMMIT can go with it.
            await _in_one_trip(conn, record)
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


async def _in_one_trip(
    conn: psycopg.AsyncConnection[Any], statements: Callable[[], Awaitable[None]]
) -> None:
    """BEGIN, the statements ``statements`` runs, and COMMIT, in one round trip.

    Pipeline mode with explicit BEGIN and COMMIT, on the connection in autocommit mode for the
    moment (psycopg's own transaction start would wait for the BEGIN's answer first). When any
    statement fails, the server skips the rest, and the transaction is rolled back here.
    """
    restore = not conn.autocommit
    if restore:
        await conn.set_autocommit(True)
    try:
        async with conn.pipeline():
            await conn.execute("BEGIN")
            await statements()
            await conn.execute("COMMIT")
    except BaseException:
        if not conn.closed and conn.info.transaction_status != _IDLE:
            with contextlib.suppress(psycopg.Error):
                await conn.rollback()
        raise
    finally:
        if restore and not conn.closed:
            with contextlib.suppress(psycopg.Error):
                await conn.set_autocommit(False)


async def _end_unused(conn: psycopg.AsyncConnection[Any], block: psycopg.AsyncTransaction) -> None:
    """Ends a block begun for a row that will not run: it holds no writes, so it commits."""
    try:
        await block.__aexit__(None, None, None)
    except psycopg.Error:
        if not conn.closed and conn.info.transaction_status != _IDLE:
            with contextlib.suppress(psycopg.Error):
                await conn.rollback()


async def _call(handler: AsyncHandler, message: InboxMessage, context: AsyncHandlerContext) -> None:
    await handler(message, context)


def _claim_due(run: _Run) -> bool:
    """Whether a claim under way, or the next one, is likely to bring rows."""
    return run.backlog and not _stopping(run)


def _stopping(run: _Run) -> bool:
    return run.stopping or (run.stop is not None and run.stop.is_set())


def _claim_under_way(run: _Run) -> asyncio.Future[None]:
    """The future that the end of the claim under way (or of the next one) resolves."""
    if run.claimed is None:
        run.claimed = asyncio.get_running_loop().create_future()
    return run.claimed


def _claim_over(run: _Run) -> None:
    """The claim under way ended and its rows wait: wakes the consumers waiting for them."""
    claimed, run.claimed = run.claimed, None
    if claimed is not None and not claimed.done():
        claimed.set_result(None)


def _notify(run: _Run) -> None:
    wake = run.wake
    if wake is not None and not wake.done():
        wake.set_result(None)


async def _wake_on(stop: asyncio.Event, run: _Run) -> None:
    await stop.wait()
    _notify(run)


async def _wait_changed(run: _Run, timeout: float | None) -> None:
    """Waits until a held row finishes, a lease is lost, the stop is set, or ``timeout`` passes."""
    loop = asyncio.get_running_loop()
    wake: asyncio.Future[None] = loop.create_future()
    run.wake = wake
    timer = loop.call_later(timeout, _notify, run) if timeout is not None else None
    try:
        await wake
    finally:
        run.wake = None
        if timer is not None:
            timer.cancel()

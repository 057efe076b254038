"""The synchronous worker: threads, psycopg ``Connection``."""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
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

_IDLE = psycopg.pq.TransactionStatus.IDLE


class ConnectionSource(Protocol):
    """Where the worker takes its connections: a ``psycopg_pool.ConnectionPool`` has this shape.

    ``connection()`` lends one connection for a ``with`` block; a connection the worker closed
    inside the block must be dropped, not reused.
    """

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...


@dataclass(frozen=True)
class HandlerContext:
    """What a handler gets besides the message.

    Write through ``connection`` (its transaction ``transaction`` is open; never commit or roll
    back: the worker does, with the completion). ``cancelled`` is set when the lease is lost or a
    stop runs out of grace; the worker then also cancels the query running on ``connection``.
    Return (or raise) soon after it is set: nothing the handler wrote is committed.
    """

    connection: psycopg.Connection[Any]
    transaction: psycopg.Transaction
    cancelled: threading.Event


Handler = Callable[[InboxMessage, HandlerContext], None]
"""The work for one message: raise to fail it (the retry policy decides what follows)."""


class ConninfoPool:
    """A small pool of psycopg connections opened from a connection string.

    The worker uses one when it is given a string; pass a ``psycopg_pool.ConnectionPool``
    instead to share the application's pool.
    """

    def __init__(self, conninfo: str, **kwargs: Any) -> None:
        self._conninfo = conninfo
        self._kwargs = kwargs
        self._idle: list[psycopg.Connection[Any]] = []
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = psycopg.connect(self._conninfo, **self._kwargs)
        ok = False
        try:
            yield conn
            ok = True
        finally:
            self._give_back(conn, ok)

    def _give_back(self, conn: psycopg.Connection[Any], ok: bool) -> None:
        if conn.closed or conn.broken:
            return
        try:
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.rollback()
        except psycopg.Error:
            ok = False
        if not ok and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.close()
            return
        with self._lock:
            self._idle.append(conn)

    def close(self) -> None:
        """Closes the idle connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class _Abandoned(Exception):
    pass


class _ClaimLost(Exception):
    pass


@dataclass(eq=False)
class _Held:
    claimed: Claimed
    next_renewal: float
    cancelled: threading.Event = field(default_factory=threading.Event)
    lost: bool = False
    finished: bool = False
    renewing: bool = False
    connection: psycopg.Connection[Any] | None = None


@dataclass(eq=False)
class _Run:
    """The state the claim loop, the handler slots and the renewal thread share, under ``lock``.

    Two conditions on the one lock, so that a row's end does not wake the renewal thread:
    ``cond`` tells of room for a claim (rows held down to ``max_concurrency``) and of renewals
    over (the claim loop, the shutdown and a handler ending its row's renewal wait on it),
    ``renew_due`` of rows added and of the renewal thread's stop (only the renewal thread waits
    on it).
    """

    lock: threading.RLock = field(default_factory=threading.RLock)
    cond: threading.Condition = field(init=False)
    renew_due: threading.Condition = field(init=False)
    held: set[_Held] = field(default_factory=set)
    # The claimed rows no handler slot has taken yet, in claim order.
    waiting: collections.deque[_Held] = field(default_factory=collections.deque)
    running: set[_Held] = field(default_factory=set)
    # Handler slots at work on the pool (at most max_concurrency): each takes waiting rows one
    # after another and ends when none waits.
    serving: int = 0
    stopping: bool = False
    renewer_stop: bool = False
    stop: threading.Event | None = None

    def __post_init__(self) -> None:
        self.cond = threading.Condition(self.lock)
        self.renew_due = threading.Condition(self.lock)


@dataclass(eq=False)
class _Chain:
    """A handler thread's next row, taken before its current row's completion is sent.

    Why: the thread keeps its connection while rows wait, and when it already holds its next row
    the BEGIN of that row goes in the same round trip as the current row's completion and COMMIT
    (one round trip a row instead of two). ``begun`` is that row's open transaction block on the
    thread's connection, or None when the row must be begun anew.
    """

    held: _Held | None = None
    begun: psycopg.Transaction | None = None


class InboxWorker:
    """Claims and handles the rows of one pull source, on threads.

    ``connection`` is a connection string or a pool with ``connection()`` (for example a
    ``psycopg_pool.ConnectionPool``). The constructor checks the options and renders the
    statements; it raises :class:`InboxConfigError` for a setting that cannot work.
    """

    def __init__(self, connection: str | ConnectionSource, options: InboxOptions) -> None:
        if isinstance(connection, str):
            self._own_pool: ConninfoPool | None = ConninfoPool(connection)
            self._source: ConnectionSource = self._own_pool
        elif callable(getattr(connection, "connection", None)):
            self._own_pool = None
            self._source = connection
        else:
            raise InboxError(
                "queuebox: InboxWorker needs a connection string or a pool with connection(), "
                "for example a psycopg_pool.ConnectionPool"
            )
        if not isinstance(options, InboxOptions):
            raise InboxError("queuebox: InboxWorker needs InboxOptions")
        self._options = options
        self._sql = render_statements(options.schema)
        self._fast = (
            FastTransactions(complete_or_fail(self._sql.complete.text))
            if fast_available()
            else None
        )
        self._stop = threading.Event()
        self._running = False
        self._lock = threading.Lock()

    @property
    def options(self) -> InboxOptions:
        return self._options

    def stop(self) -> None:
        """Asks :meth:`run` to stop (from any thread or a signal handler); it returns later."""
        self._stop.set()

    def run(self, handler: Handler, stop: threading.Event | None = None) -> None:
        """Claims and handles rows until :meth:`stop` is called or ``stop`` is set.

        Then it claims nothing more, hands back the claimed rows no handler has started, waits up
        to ``shutdown_grace`` for running handlers and cancels the rest (nothing is written for
        them; their rows keep their attempt and return when the lease runs out), and returns once
        every handler has returned. Raises :class:`InboxError` before the first claim when the
        table lacks a column the library needs (the V10 schema or later).
        """
        if not callable(handler):
            raise InboxError("queuebox: run needs a handler")
        with self._lock:
            if self._running:
                raise InboxError("queuebox: this worker is already running")
            self._running = True
            self._stop.clear()
        try:
            self._check_schema()
            self._loop(handler, stop)
        finally:
            if self._own_pool is not None:
                self._own_pool.close()
            with self._lock:
                self._running = False

    def _stopped(self, stop: threading.Event | None) -> bool:
        return self._stop.is_set() or (stop is not None and stop.is_set())

    def _wait(self, seconds: float, stop: threading.Event | None) -> None:
        until = time.monotonic() + seconds
        while not self._stopped(stop):
            left = until - time.monotonic()
            if left <= 0:
                return
            self._stop.wait(min(left, 0.05) if stop is not None else left)

    def _check_schema(self) -> None:
        try:
            with self._source.connection() as conn, conn.transaction():
                conn.execute(self._sql.check.text)
        except psycopg.Error as error:
            raise InboxError(SCHEMA_HINT + sanitize_error(error)) from None

    def _loop(self, handler: Handler, stop: threading.Event | None) -> None:
        o = self._options
        run = _Run(stop=stop)
        renewer = threading.Thread(
            target=self._renew_loop, args=(run,), daemon=True, name="queuebox-renewal"
        )
        renewer.start()
        pool = ThreadPoolExecutor(
            max_workers=o.max_concurrency, thread_name_prefix="queuebox-handler"
        )
        try:
            while not self._stopped(stop):
                # Room for a whole batch: the rows held (waiting or running) are down to
                # max_concurrency.
                with run.cond:
                    if len(run.held) > o.max_concurrency:
                        run.cond.wait(0.05)
                        continue
                rows: list[Claimed] = []
                try:
                    rows = self._claim(o.batch_size)
                except Exception as error:  # noqa: BLE001 - logged, and the loop goes on
                    if not self._stopped(stop):
                        log(
                            o,
                            logging.WARNING,
                            "inbox claim failed; waiting before the next claim",
                            error=error,
                        )
                if rows:
                    now = time.monotonic()
                    every = o.lease / 3
                    batch = [_Held(claimed=c, next_renewal=now + every) for c in rows]
                    with run.cond:
                        run.held.update(batch)
                        run.waiting.extend(batch)
                        # A slot already at work takes waiting rows as its handler finishes: a
                        # new slot starts only for rows beyond those (one pool task a slot, not
                        # one a row, so a row chained onto a slot wakes no other thread).
                        spawn = max(0, min(len(run.waiting), o.max_concurrency - run.serving))
                        run.serving += spawn
                        run.renew_due.notify()
                    for _ in range(spawn):
                        pool.submit(self._handler_slot, run, handler)
                else:
                    self._wait(o.poll_interval, stop)
        finally:
            with run.cond:
                run.stopping = True
                # Rows no handler slot has taken are handed back at once; the slots take no more.
                unstarted = list(run.waiting)
                run.waiting.clear()
            for held in unstarted:
                self._not_started(run, held)
            with run.cond:
                over = not run.cond.wait_for(lambda: not run.held, timeout=o.shutdown_grace)
                if over:
                    log(
                        o,
                        logging.WARNING,
                        "shutdown grace ran out; cancelling running handlers, their rows return "
                        "after the lease",
                        handlers=len(run.running),
                    )
                    for held in run.running:
                        self._cancel(held)
            pool.shutdown(wait=True)
            with run.cond:
                run.renewer_stop = True
                run.renew_due.notify_all()
            renewer.join()

    def _claim(self, want: int) -> list[Claimed]:
        # One round trip in pipeline mode: BEGIN, the settings, the claim and COMMIT go together,
        # and the rows are read once the commit is answered.
        with self._source.connection() as conn:
            cur = conn.cursor(row_factory=tuple_row)

            def statements() -> None:
                conn.execute(CLAIM_SETTINGS, prepare=True)
                cur.execute(self._sql.claim.text, claim_params(self._options, want), prepare=True)

            _in_one_trip(conn, statements)
            rows = cur.fetchall()
        return decode(rows)

    def _cancel(self, held: _Held) -> None:
        held.cancelled.set()
        conn = held.connection
        if conn is not None:
            # The handler was told; a cancel request that fails changes nothing more.
            with contextlib.suppress(Exception):
                conn.cancel_safe(timeout=5.0)

    def _renew_loop(self, run: _Run) -> None:
        o = self._options
        every = o.lease / 3
        while True:
            with run.cond:
                while True:
                    if run.renewer_stop:
                        return
                    now = time.monotonic()
                    live = [
                        h
                        for h in run.held
                        if not h.finished and not h.renewing and not h.cancelled.is_set()
                    ]
                    due = [h for h in live if h.next_renewal <= now]
                    if due:
                        for h in due:
                            h.renewing = True
                        break
                    nxt = min((h.next_renewal for h in live), default=None)
                    # A row that ends only makes the next renewal later: waking at the old time
                    # and looking again is enough, so only new rows and the stop notify this.
                    run.renew_due.wait(None if nxt is None else nxt - now)
            lost: list[tuple[_Held, str]] = []
            try:
                with self._source.connection() as conn:
                    for h in due:
                        params = {
                            "id": h.claimed.message.id,
                            "token": h.claimed.token,
                            "lease_ms": o.lease_ms,
                        }
                        cur = conn.cursor()
                        try:
                            # One round trip: BEGIN, the renewal and COMMIT in pipeline mode.
                            _in_one_trip(
                                conn, functools.partial(_execute, cur, self._sql.renew.text, params)
                            )
                            changed = cur.rowcount
                        except psycopg.Error as error:
                            lost.append((h, f"the renewal failed: {sanitize_error(error)}"))
                            if conn.closed or conn.broken:
                                raise
                            continue
                        # Every third of the lease from the claim on, not from the end of
                        # the last renewal: a slow renewal does not push the next one later.
                        h.next_renewal += every
                        if changed != 1:
                            lost.append((h, "the renewal found no row: another worker owns it"))
            except Exception as error:  # noqa: BLE001 - every row not renewed is lost
                done = {h for h, _ in lost}
                lost.extend(
                    (h, f"the renewal failed: {sanitize_error(error)}")
                    for h in due
                    if h not in done
                )
            for h, reason in lost:
                with run.cond:
                    h.lost = True
                if not h.finished:
                    log(
                        o,
                        logging.WARNING,
                        "inbox lease lost; cancelling the handler, its writes roll back",
                        id=h.claimed.message.id,
                        reason=reason,
                    )
                    self._cancel(h)
            with run.cond:
                for h in due:
                    h.renewing = False
                run.cond.notify_all()

    def _finish(self, run: _Run, held: _Held) -> None:
        with run.cond:
            held.finished = True
            held.connection = None
            run.held.discard(held)
            run.running.discard(held)
            # Only two waits care about rows ending: the claim loop's, for room for a batch,
            # and the shutdown's, for none held. Notifying above the room would wake the claim
            # loop once a row for nothing.
            if len(run.held) <= self._options.max_concurrency:
                run.cond.notify_all()

    def _end_renewal(self, run: _Run, held: _Held) -> None:
        with run.cond:
            held.finished = True
            run.cond.wait_for(lambda: not held.renewing)

    def _handler_slot(self, run: _Run, handler: Handler) -> None:
        """One handler slot: takes the waiting rows one after another (each row with the rows
        chained after it on one connection) and ends when none waits or the worker stops."""
        counted = True
        try:
            while True:
                with run.cond:
                    held = self._take_first(run)
                    if held is None:
                        # Under the lock the claim loop counts slots with: a row added after
                        # this look starts a new slot.
                        run.serving -= 1
                        counted = False
                        return
                    start = held in run.running
                if start:
                    self._serve(run, handler, _Chain(held=held))
                else:
                    self._not_started(run, held)
        finally:
            if counted:
                with run.cond:
                    run.serving -= 1

    def _take_first(self, run: _Run) -> _Held | None:
        """The first waiting row, taken (the caller holds the lock); counted as running when it
        may start. None when no row waits or the worker is stopping (the stop hands the waiting
        rows back)."""
        if self._nothing_to_take(run):
            return None
        held = run.waiting.popleft()
        if not held.lost and not held.cancelled.is_set():
            run.running.add(held)
        return held

    def _nothing_to_take(self, run: _Run) -> bool:
        # The stop is checked here too: a slot can free up before the claim loop sees the stop,
        # and a row not yet started must not start then (the stop hands the waiting rows back).
        return not run.waiting or run.stopping or self._stopped(run.stop)

    def _not_started(self, run: _Run, held: _Held) -> None:
        """A taken row that will not reach a handler: a lost one is left to its new owner, any
        other is handed back to the claims."""
        try:
            if held.lost:
                log(
                    self._options,
                    logging.WARNING,
                    "inbox lease lost before the handler started; the row is left to its new owner",
                    id=held.claimed.message.id,
                )
            else:
                self._release(held)
        finally:
            self._finish(run, held)

    def _take_next(self, run: _Run) -> _Held | None:
        """The first waiting row when it may start now, taken and counted as running, else None.

        A row that may not start (lease lost, cancelled, or the worker stopping) is left to the
        slot's own loop, which logs or hands it back (or to the stop).
        """
        with run.cond:
            if self._nothing_to_take(run):
                return None
            held = run.waiting[0]
            if held.lost or held.cancelled.is_set():
                return None
            run.waiting.popleft()
            run.running.add(held)
            return held

    def _serve(self, run: _Run, handler: Handler, chain: _Chain) -> None:
        """Handles ``chain.held`` and the rows taken after it on one connection, finishing each.

        A connection closed on the way (a cut exchange) is given back and the next row taken
        with it goes on with another.
        """
        while chain.held is not None:
            try:
                with self._source.connection() as conn:
                    while chain.held is not None and not conn.closed:
                        current, chain.held = chain.held, None
                        try:
                            self._handle_on(conn, run, current, handler, chain)
                        except Exception as error:  # noqa: BLE001 - logged; returns after its lease
                            log(
                                self._options,
                                logging.ERROR,
                                "inbox row processing failed; the row returns after its lease",
                                id=current.claimed.message.id,
                                error=error,
                            )
                        finally:
                            self._finish(run, current)
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
                self._finish(run, held)

    def _handle_on(
        self,
        conn: psycopg.Connection[Any],
        run: _Run,
        held: _Held,
        handler: Handler,
        chain: _Chain,
    ) -> None:
        """Runs ``held``'s handler and completion on ``conn``; may take the next row into
        ``chain`` (see _Chain). Its caller finishes the row."""
        o = self._options
        claimed = held.claimed
        message = claimed.message
        begun, chain.begun = chain.begun, None
        if held.lost or held.cancelled.is_set():
            # Taken with the previous row's completion, lost before its handler started.
            log(
                o,
                logging.WARNING,
                "inbox lease lost before the handler started; the row is left to its new owner",
                id=message.id,
            )
            if begun is not None:
                _end_unused(conn, begun)
            return
        failure: Exception | None = None
        with run.cond:
            held.connection = conn
        try:
            with self._row_transaction(conn, begun) as (tx, fast):
                try:
                    handler(message, HandlerContext(conn, tx, held.cancelled))
                except Exception as error:
                    failure = error
                    raise
                self._end_renewal(run, held)
                if held.cancelled.is_set():
                    raise _Abandoned()
                with run.cond:
                    held.connection = None
                if fast is not None:
                    # The completion and COMMIT in one round trip, with the next waiting row's
                    # BEGIN when this thread takes it over; the block ends here.
                    chain.held = self._take_next(run)
                    try:
                        chain.begun = fast.complete_sync(
                            conn,
                            tx,
                            message.id,
                            claimed.token,
                            begin_next=chain.held is not None,
                        )
                    except psycopg.Error as error:
                        if error.sqlstate == CLAIM_LOST_SQLSTATE:
                            raise _ClaimLost() from error
                        raise
                else:
                    changed = conn.execute(
                        self._sql.complete.text,
                        {"id": message.id, "token": claimed.token},
                        prepare=True,
                    ).rowcount
                    if changed != 1:
                        raise _ClaimLost()
        except _Abandoned:
            log(
                o,
                logging.WARNING,
                "inbox handler cancelled; its writes rolled back and nothing written for the row",
                id=message.id,
            )
        except _ClaimLost:
            log(
                o,
                logging.WARNING,
                "completion found no row: claim lost, handler writes rolled back",
                id=message.id,
            )
        except Exception as error:  # noqa: BLE001 - the handler's failure or the completion's
            if failure is None:
                log(
                    o,
                    logging.WARNING,
                    "completion failed; handler writes rolled back, the row returns after its "
                    "lease",
                    id=message.id,
                    error=error,
                )
                return
            self._end_renewal(run, held)
            with run.cond:
                held.connection = None
            if held.cancelled.is_set():
                log(
                    o,
                    logging.WARNING,
                    "inbox handler cancelled; its writes rolled back and nothing written for the "
                    "row",
                    id=message.id,
                    error=error,
                )
                return
            self._fail(conn, claimed, failure)

    @contextmanager
    def _row_transaction(
        self, conn: psycopg.Connection[Any], begun: psycopg.Transaction | None
    ) -> Iterator[tuple[psycopg.Transaction, FastTransactions | None]]:
        """The row's transaction block: ``begun`` when the previous row's completion began it,
        else through libpq when the connection allows it (then the body ends the block with
        ``complete_sync``), else psycopg's own block, which commits at the end of the body. Any
        exception rolls the transaction back and goes on."""
        fast = self._fast
        # Only the fast path begins a row ahead: without it ``begun`` is always None.
        if fast is None or (begun is None and not usable(conn)):
            with conn.transaction() as tx:
                yield tx, None
            return
        tx = begun if begun is not None else fast.begin_sync(conn)
        try:
            yield tx, fast
        except BaseException as error:
            # Every way out but success rolls the connection back, which can make psycopg
            # discard the completion prepared on it.
            fast.forget(conn)
            if tx.status == psycopg.Transaction.Status.ACTIVE:
                tx.__exit__(type(error), error, error.__traceback__)
            elif not conn.closed and conn.info.transaction_status != _IDLE:
                with contextlib.suppress(psycopg.Error):
                    conn.rollback()
            raise

    def _release(self, held: _Held) -> None:
        # A row that never reached a handler goes back to the claims: pending again, same
        # attempt, fenced on the token. When this fails the row still returns, after its lease.
        try:
            with self._source.connection() as conn:
                params = {"id": held.claimed.message.id, "token": held.claimed.token}
                _in_one_trip(conn, lambda: _execute(conn.cursor(), self._sql.release.text, params))
        except Exception as error:  # noqa: BLE001 - logged
            log(
                self._options,
                logging.WARNING,
                "could not hand an unstarted row back; it returns after its lease",
                id=held.claimed.message.id,
                error=error,
            )

    def _fail(self, conn: psycopg.Connection[Any], claimed: Claimed, failure: Exception) -> None:
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
        try:
            # One round trip: a row the statement does not find (claim lost) changes nothing,
            # so the COMMIT can go with it.
            _in_one_trip(
                conn, lambda: _execute(cur, statement.text, failure_params(claimed, action, text))
            )
            changed = cur.rowcount
        except psycopg.Error as error:
            log(
                o,
                logging.ERROR,
                "recording the handler failure failed; the row returns after its lease",
                database_error=error,
                **fields,
            )
            return
        if changed == 1:
            log(o, logging.WARNING, "inbox handler failed", **fields)
        else:
            log(
                o,
                logging.WARNING,
                "claim lost before the failure could be recorded; the new owner has the row",
                **fields,
            )


def _end_unused(conn: psycopg.Connection[Any], block: psycopg.Transaction) -> None:
    """Ends a block begun for a row that will not run: it holds no writes, so it commits."""
    try:
        block.__exit__(None, None, None)
    except psycopg.Error:
        if not conn.closed and conn.info.transaction_status != _IDLE:
            with contextlib.suppress(psycopg.Error):
                conn.rollback()


def _execute(cur: psycopg.Cursor[Any], text: str, params: dict[str, Any]) -> None:
    cur.execute(text, params, prepare=True)


def _in_one_trip(conn: psycopg.Connection[Any], statements: Callable[[], None]) -> None:
    """BEGIN, the statements ``statements`` runs, and COMMIT, in one round trip.

    Pipeline mode with explicit BEGIN and COMMIT, on the connection in autocommit mode for the
    moment (psycopg's own transaction start would wait for the BEGIN's answer first). When any
    statement fails, the server skips the rest, and the transaction is rolled back here.
    """
    restore = not conn.autocommit
    if restore:
        conn.autocommit = True
    try:
        with conn.pipeline():
            conn.execute("BEGIN")
            statements()
            conn.execute("COMMIT")
    except BaseException:
        if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
        raise
    finally:
        if restore and not conn.closed:
            with contextlib.suppress(psycopg.Error):
                conn.autocommit = False

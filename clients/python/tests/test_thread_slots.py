"""How the threaded worker wakes its threads (``_worker.py``: ``_handler_slot``, ``_Run``).

A claimed row goes to a handler slot: a pool task that takes the waiting rows one after another
on one connection. A new slot starts only for rows that the slots at work will not take, so a row
chained onto a running slot costs no pool task and wakes no other thread; and the end of a row
does not wake the renewal thread, which only new rows (and the stop) notify. On two cores shared
with the database, every needless wake is a GIL hand-off paid for each row.
What must hold, on a real database: every row is handled once, pool tasks are bounded by the
slots each claim may start (not by its rows), the renewal thread wakes per claim and not per row,
and a stop still hands back the rows no slot took.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ClassVar

import psycopg
import pytest

from conftest import fresh_database
from queuebox_inbox import HandlerContext, InboxMessage, InboxOptions, InboxWorker, _worker
from queuebox_inbox._core import Claimed
from test_fast import counts, insert_rows, run_threaded_until_processed

SOURCE = "fast"
ROWS = 30
CONCURRENCY = 2


class CountingPool(ThreadPoolExecutor):
    submitted: ClassVar[int] = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        type(self).submitted += 1
        return super().submit(fn, *args, **kwargs)


class CountingCondition(threading.Condition):
    """Counts the waits of each thread by name (the renewal thread is ``queuebox-renewal``)."""

    waits: ClassVar[Counter[str]] = Counter()
    # The waits that ended with a notify rather than their timeout.
    woken: ClassVar[Counter[str]] = Counter()

    def wait(self, timeout: float | None = None) -> bool:
        name = threading.current_thread().name
        CountingCondition.waits[name] += 1
        notified = super().wait(timeout)
        CountingCondition.woken[name] += notified
        return notified


def write(message: InboxMessage, ctx: HandlerContext) -> None:
    ctx.connection.execute(
        "INSERT INTO conformance_writes (key) VALUES (%s)", [message.idempotency_key]
    )


def counting_claims(worker: InboxWorker) -> list[int]:
    """Wraps the worker's claim; the returned list gets the size of each claim with rows."""
    sizes: list[int] = []
    claim = worker._claim

    def counted(want: int) -> list[Claimed]:
        rows = claim(want)
        if rows:
            sizes.append(len(rows))
        return rows

    worker._claim = counted  # type: ignore[method-assign]
    return sizes


def test_a_claim_starts_at_most_the_free_handler_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_worker, "ThreadPoolExecutor", CountingPool)
    CountingPool.submitted = 0
    with fresh_database("qb_slots_py") as url:
        insert_rows(url, ROWS)
        options = InboxOptions(
            source=SOURCE, batch_size=10, max_concurrency=CONCURRENCY, poll_interval=0.05
        )
        worker = InboxWorker(url, options)
        claims = counting_claims(worker)
        run_threaded_until_processed(worker, write, url, ROWS, 60)
        assert counts(url) == (ROWS, ROWS)
    assert sum(claims) == ROWS, claims
    # One pool task a row would be ROWS tasks; a claim may start no more slots than there are.
    assert CountingPool.submitted <= CONCURRENCY * len(claims), (CountingPool.submitted, claims)
    assert CountingPool.submitted < ROWS, (CountingPool.submitted, claims)


def test_the_renewal_thread_wakes_per_claim_not_per_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threading, "Condition", CountingCondition)
    CountingCondition.waits.clear()
    with fresh_database("qb_slots_py") as url:
        insert_rows(url, ROWS)
        # A lease long enough that no renewal falls due while the rows run.
        options = InboxOptions(
            source=SOURCE, batch_size=5, max_concurrency=CONCURRENCY, poll_interval=0.05, lease=60
        )
        worker = InboxWorker(url, options)
        claims = counting_claims(worker)
        run_threaded_until_processed(worker, write, url, ROWS, 60)
        assert counts(url) == (ROWS, ROWS)
    renewal_waits = CountingCondition.waits["queuebox-renewal"]
    # Once at the start, once after each claim with rows, once more for the stop.
    assert 1 <= renewal_waits <= len(claims) + 2, (renewal_waits, claims)


def test_the_claim_loop_is_woken_for_room_not_for_every_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(threading, "Condition", CountingCondition)
    CountingCondition.waits.clear()
    CountingCondition.woken.clear()
    rows = 60
    with fresh_database("qb_slots_py") as url:
        insert_rows(url, rows)
        # A batch far above the handler slots: after each claim the loop waits while 19 rows
        # end before there is room for the next one.
        options = InboxOptions(source=SOURCE, batch_size=20, max_concurrency=1, poll_interval=0.05)
        worker = InboxWorker(url, options)
        claims = counting_claims(worker)
        # The claim loop runs in the thread that calls run().
        run_threaded_until_processed(worker, write, url, rows, 60, thread_name="claim-loop")
        assert counts(url) == (rows, rows)
    woken = CountingCondition.woken["claim-loop"]
    # Once a claim when its rows are down to the free slot (and the stop's last look); a wake
    # for every row that ends would be about 19 a claim.
    assert woken <= 2 * len(claims) + 2, (woken, claims)


def test_a_stop_hands_back_the_rows_no_slot_took() -> None:
    started = threading.Event()
    release = threading.Event()
    handled: list[str] = []

    def slow(message: InboxMessage, ctx: HandlerContext) -> None:
        handled.append(message.idempotency_key)
        started.set()
        release.wait(30)

    with fresh_database("qb_slots_py") as url:
        insert_rows(url, 10)
        options = InboxOptions(
            source=SOURCE, batch_size=10, max_concurrency=1, poll_interval=0.05, lease=60
        )
        worker = InboxWorker(url, options)
        stop = threading.Event()
        thread = threading.Thread(target=worker.run, args=(slow, stop))
        thread.start()
        try:
            assert started.wait(30), "no handler started"
            stop.set()
            release.set()
        finally:
            stop.set()
            release.set()
            thread.join(30)
        assert not thread.is_alive(), "the worker did not stop"
        with psycopg.connect(url, autocommit=True) as conn:
            states: dict[str, int] = dict(
                conn.execute("SELECT state, count(*) FROM inbox GROUP BY state").fetchall()
            )
            released = conn.execute(
                """SELECT count(*) FROM inbox
                    WHERE state = 'pending' AND claim_token IS NULL AND lease_expires_at IS NULL"""
            ).fetchone()
    # The one row that ran completed; the nine waiting ones are pending again at once, not held
    # under the 60 s lease.
    assert len(handled) == 1, handled
    assert states == {"processed": 1, "pending": 9}, states
    assert released is not None and released[0] == 9

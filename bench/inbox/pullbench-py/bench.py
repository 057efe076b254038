"""Pull-claim throughput of the Python pull client (clients/python), the counterpart of pullbench
(Rust) and pullbench-ts: WORKERS workers on one source in one Python process (or spread over
--procs processes, the way a Python service scales past one core), a no-op handler, run until
EXPECT rows were handled (or TIMEOUT seconds). Needs the package installed in the
Python that runs this file (run-pull-clients.sh uses the venv of scripts/test.sh).

Prints the lines of pullbench: `handled=N rate=R first_ms=F wall_ms=W processed=P left=L
timed_out=B`, rate = (N-1) / (time of the N-th handler call - time of the 1st), then `cpu
worker_cpu_ms=.. pg_cpu_ms=.. worker_us_per_row=.. pg_us_per_row=..`.

    python bench.py --url URL --source S --expect N [--workers 4] [--batch 10]
        [--concurrency 1] [--timeout 120]
        [--mode asyncio|threads|bare-asyncio|bare-threads|raw-asyncio|chain-asyncio]
        [--procs 1]

With --procs N the WORKERS are split evenly over N forked processes that share one counter; the
rate spans the first to the last handler call of any process (one monotonic clock), the worker CPU
is that of all of them.

The bare modes are the yardstick for the workers: plain psycopg running the same exchanges a worker
runs for a row (the claim as BEGIN, settings, claim and COMMIT in one pipeline; per row BEGIN, then
the fenced completion and COMMIT in one pipeline), with none of the worker's machinery (no lease
renewal, no handler task, no pool, no retry or shutdown logic). Each bare worker claims a batch,
spreads it over its --concurrency connections, waits for all of them and claims again. What the
bare client leaves below the ceiling is psycopg's own cost on these cores, not the worker's.

raw-asyncio is the bare asyncio client with each row's transaction sent the way the workers send
it since 2026-12-04 (queuebox_inbox._fast: BEGIN, then the prepared completion and COMMIT in one
pipeline, through the connection's libpq object): the bound of that path, so the gap between it
and a worker is what the worker's own machinery costs. chain-asyncio is raw-asyncio with each
row's completion carrying the BEGIN of the connection's next row, as AsyncInboxWorker's consumers
send it when their next row waits: one round trip a row.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import resource
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import psycopg
from psycopg.rows import tuple_row

from queuebox_inbox import (
    AsyncHandlerContext,
    AsyncInboxWorker,
    HandlerContext,
    InboxMessage,
    InboxOptions,
    InboxWorker,
    render_statements,
)
from queuebox_inbox._fast import FastTransactions

# The same per-transaction settings and the same fenced completion as the workers send.
CLAIM_SETTINGS = (
    "SELECT set_config('synchronous_commit', 'off', true), "
    "set_config('plan_cache_mode', 'force_generic_plan', true)"
)
SQL = render_statements()
COMPLETE = (
    "WITH done AS (" + SQL.complete.text.rstrip().rstrip(";") + " RETURNING 1) "
    "SELECT 1 / count(*) FROM done"
)


def claim_params(a: argparse.Namespace) -> dict[str, Any]:
    return {
        "source": a.source,
        "batch": a.batch,
        "lease_ms": 30_000,
        "cand_limit": min(max(3 * a.batch, 50), 500),
    }


def ticks(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            text = f.read()
    except OSError:
        return 0
    fields = text[text.rfind(")") + 1 :].split()
    return int(fields[11]) + int(fields[12])


class Counter(Protocol):
    expect: int

    @property
    def handled(self) -> int: ...

    @property
    def first(self) -> float: ...

    @property
    def last(self) -> float: ...

    def hit(self) -> None: ...


class Count:
    """The handler calls of one process."""

    def __init__(self, expect: int) -> None:
        self.expect = expect
        self.handled = 0
        self.first = 0.0
        self.last = 0.0
        self.lock = threading.Lock()

    def hit(self) -> None:
        with self.lock:
            self.handled += 1
            now = time.monotonic()
            if self.handled == 1:
                self.first = now
            if self.handled == self.expect:
                self.last = now


class SharedCount:
    """The handler calls of every process of a --procs run (CLOCK_MONOTONIC is system-wide)."""

    def __init__(self, expect: int, ctx: Any) -> None:
        self.expect = expect
        self._handled = ctx.Value("q", 0)
        self._first = ctx.Value("d", 0.0, lock=False)
        self._last = ctx.Value("d", 0.0, lock=False)

    @property
    def handled(self) -> int:
        return int(self._handled.value)

    @property
    def first(self) -> float:
        return float(self._first.value)

    @property
    def last(self) -> float:
        return float(self._last.value)

    def hit(self) -> None:
        with self._handled.get_lock():
            self._handled.value += 1
            n = self._handled.value
            now = time.monotonic()
            if n == 1:
                self._first.value = now
            if n == self.expect:
                self._last.value = now


def wait_finished(count: Counter, timeout: float) -> bool:
    """Waits until every expected row was handled; False when the timeout came first."""
    deadline = time.monotonic() + timeout
    while count.handled < count.expect:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


# What a run does once the rows are handled, before its workers stop: reads the CPU ticks of the
# database's backends (returns them, or 0 where another process reads them).
AtEnd = Callable[[], int]


async def end_async(
    a: argparse.Namespace,
    count: Counter,
    at_end: AtEnd,
    stop: asyncio.Event,
    runs: Sequence[asyncio.Future[None]],
) -> tuple[bool, int]:
    """Waits for the rows, reads the database's CPU, stops the workers: (timed out, pg ticks)."""
    timed_out = not await asyncio.to_thread(wait_finished, count, a.timeout)
    pg = await asyncio.to_thread(at_end)
    stop.set()
    await asyncio.gather(*runs)
    return timed_out, pg


def end_threads(
    a: argparse.Namespace,
    count: Counter,
    at_end: AtEnd,
    stop: threading.Event,
    threads: Sequence[threading.Thread],
) -> tuple[bool, int]:
    """Starts the threads, then as end_async."""
    for t in threads:
        t.start()
    timed_out = not wait_finished(count, a.timeout)
    pg = at_end()
    stop.set()
    for t in threads:
        t.join()
    return timed_out, pg


def options(a: argparse.Namespace) -> InboxOptions:
    return InboxOptions(
        source=a.source,
        batch_size=a.batch,
        max_concurrency=a.concurrency,
        poll_interval=0.1,
        shutdown_grace=10.0,
    )


def pg_ticks(url: str) -> int:
    """CPU ticks of every backend of the database (read while the workers are connected)."""
    with psycopg.connect(url, autocommit=True) as conn:
        pids: list[Any] = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        ).fetchall()
    return sum(ticks(str(r[0])) for r in pids)


def run_asyncio(a: argparse.Namespace, count: Counter, at_end: AtEnd) -> tuple[bool, int]:
    async def main() -> tuple[bool, int]:
        stop = asyncio.Event()

        async def handle(message: InboxMessage, ctx: AsyncHandlerContext) -> None:
            count.hit()

        workers = [AsyncInboxWorker(a.url, options(a)) for _ in range(a.workers)]
        runs = [asyncio.ensure_future(w.run(handle, stop)) for w in workers]
        return await end_async(a, count, at_end, stop, runs)

    return asyncio.run(main())


def run_threads(a: argparse.Namespace, count: Counter, at_end: AtEnd) -> tuple[bool, int]:
    stop = threading.Event()

    def handle(message: InboxMessage, ctx: HandlerContext) -> None:
        count.hit()

    workers = [InboxWorker(a.url, options(a)) for _ in range(a.workers)]
    threads = [threading.Thread(target=w.run, args=(handle, stop)) for w in workers]
    return end_threads(a, count, at_end, stop, threads)


def run_bare_asyncio(a: argparse.Namespace, count: Counter, at_end: AtEnd) -> tuple[bool, int]:
    async def complete(conn: psycopg.AsyncConnection[Any], rows: list[Any]) -> None:
        for row in rows:
            block = conn.transaction()
            await block.__aenter__()
            count.hit()  # the no-op handler
            async with conn.pipeline():
                await conn.execute(COMPLETE, {"id": row[0], "token": row[1]}, prepare=True)
                await block.__aexit__(None, None, None)

    return run_async_claims(a, count, at_end, complete)


def run_raw_asyncio(a: argparse.Namespace, count: Counter, at_end: AtEnd) -> tuple[bool, int]:
    fast = FastTransactions(COMPLETE)

    async def complete(conn: psycopg.AsyncConnection[Any], rows: list[Any]) -> None:
        for row in rows:
            tx = await fast.begin(conn)
            count.hit()  # the no-op handler
            await fast.complete(conn, tx, row[0], row[1])

    return run_async_claims(a, count, at_end, complete)


def run_chain_asyncio(a: argparse.Namespace, count: Counter, at_end: AtEnd) -> tuple[bool, int]:
    fast = FastTransactions(COMPLETE)

    async def complete(conn: psycopg.AsyncConnection[Any], rows: list[Any]) -> None:
        if not rows:
            return
        tx = await fast.begin(conn)
        for i, row in enumerate(rows):
            count.hit()  # the no-op handler
            last = i == len(rows) - 1
            following = await fast.complete(conn, tx, row[0], row[1], begin_next=not last)
            if following is None:
                if not last:
                    tx = await fast.begin(conn)
            else:
                tx = following

    return run_async_claims(a, count, at_end, complete)


def run_async_claims(
    a: argparse.Namespace,
    count: Counter,
    at_end: AtEnd,
    complete: Callable[[psycopg.AsyncConnection[Any], list[Any]], Awaitable[None]],
) -> tuple[bool, int]:
    """The bare asyncio claim loop; ``complete`` handles a connection's share of each batch."""

    async def claim(conn: psycopg.AsyncConnection[Any]) -> list[Any]:
        cur = conn.cursor(row_factory=tuple_row)
        async with conn.pipeline():
            await conn.execute("BEGIN")
            await conn.execute(CLAIM_SETTINGS, prepare=True)
            await cur.execute(SQL.claim.text, claim_params(a), prepare=True)
            await conn.execute("COMMIT")
        return await cur.fetchall()

    async def worker(stop: asyncio.Event) -> None:
        claimer = await psycopg.AsyncConnection.connect(a.url, autocommit=True)
        conns = [await psycopg.AsyncConnection.connect(a.url) for _ in range(a.concurrency)]
        try:
            while not stop.is_set():
                rows = await claim(claimer)
                if not rows:
                    await asyncio.sleep(0.1)
                    continue
                n = len(conns)
                await asyncio.gather(*(complete(c, rows[i::n]) for i, c in enumerate(conns)))
        finally:
            for c in [claimer, *conns]:
                await c.close()

    async def main() -> tuple[bool, int]:
        stop = asyncio.Event()
        runs = [asyncio.ensure_future(worker(stop)) for _ in range(a.workers)]
        return await end_async(a, count, at_end, stop, runs)

    return asyncio.run(main())


def run_bare_threads(a: argparse.Namespace, count: Counter, at_end: AtEnd) -> tuple[bool, int]:
    def claim(conn: psycopg.Connection[Any]) -> list[Any]:
        cur = conn.cursor(row_factory=tuple_row)
        with conn.pipeline():
            conn.execute("BEGIN")
            conn.execute(CLAIM_SETTINGS, prepare=True)
            cur.execute(SQL.claim.text, claim_params(a), prepare=True)
            conn.execute("COMMIT")
        return cur.fetchall()

    def complete(conn: psycopg.Connection[Any], rows: list[Any]) -> None:
        for row in rows:
            with conn.transaction():
                count.hit()  # the no-op handler
                conn.execute(SQL.complete.text, {"id": row[0], "token": row[1]}, prepare=True)

    stop = threading.Event()

    def worker() -> None:
        claimer = psycopg.connect(a.url, autocommit=True)
        conns = [psycopg.connect(a.url) for _ in range(a.concurrency)]
        with ThreadPoolExecutor(max_workers=a.concurrency) as pool:
            try:
                while not stop.is_set():
                    rows = claim(claimer)
                    if not rows:
                        time.sleep(0.1)
                        continue
                    n = len(conns)
                    for f in [pool.submit(complete, c, rows[i::n]) for i, c in enumerate(conns)]:
                        f.result()
            finally:
                for c in [claimer, *conns]:
                    c.close()

    threads = [threading.Thread(target=worker) for _ in range(a.workers)]
    return end_threads(a, count, at_end, stop, threads)


Runner = Callable[[argparse.Namespace, Counter, AtEnd], tuple[bool, int]]


def run_procs(a: argparse.Namespace, run: Runner) -> tuple[Counter, bool, int, int]:
    """Runs ``run`` in --procs forked processes with workers / procs workers each."""
    ctx = multiprocessing.get_context("fork")
    count = SharedCount(a.expect, ctx)
    barrier = ctx.Barrier(a.procs)
    results = ctx.Queue()
    share = argparse.Namespace(**{**vars(a), "workers": a.workers // a.procs})

    def child(index: int) -> None:
        def at_end() -> int:
            # Every process is still connected here: process 0 reads all the backends once.
            try:
                barrier.wait(timeout=60)
                pg = pg_ticks(a.url) if index == 0 else 0
                barrier.wait(timeout=60)
            except threading.BrokenBarrierError:
                return 0
            return pg

        results.put(run(share, count, at_end))

    procs = [ctx.Process(target=child, args=(i,)) for i in range(a.procs)]
    for proc in procs:
        proc.start()
    outcomes = [results.get() for _ in procs]
    for proc in procs:
        proc.join()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker_ticks = round((usage.ru_utime + usage.ru_stime) * os.sysconf("SC_CLK_TCK"))
    timed_out = any(t for t, _ in outcomes)
    return count, timed_out, sum(pg for _, pg in outcomes), worker_ticks


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", default="postgres://queuebox:queuebox@127.0.0.1:5432/queuebox")
    p.add_argument("--source", default="bench")
    p.add_argument("--expect", type=int, default=50_000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--batch", type=int, default=10)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument(
        "--mode",
        choices=(
            "asyncio",
            "threads",
            "bare-asyncio",
            "bare-threads",
            "raw-asyncio",
            "chain-asyncio",
        ),
        default="asyncio",
    )
    p.add_argument("--procs", type=int, default=1)
    a = p.parse_args()
    if a.procs < 1 or a.workers % a.procs != 0:
        p.error(f"--workers {a.workers} must split evenly over --procs {a.procs}")
    modes = {
        "asyncio": run_asyncio,
        "threads": run_threads,
        "bare-asyncio": run_bare_asyncio,
        "bare-threads": run_bare_threads,
        "raw-asyncio": run_raw_asyncio,
        "chain-asyncio": run_chain_asyncio,
    }
    run = modes[a.mode]
    started = time.monotonic()
    count: Counter
    if a.procs == 1:
        count = Count(a.expect)
        timed_out, pg_cpu_ticks = run(a, count, lambda: pg_ticks(a.url))
        worker_ticks = ticks("self")
    else:
        count, timed_out, pg_cpu_ticks, worker_ticks = run_procs(a, run)
    wall = time.monotonic() - started
    last = count.last if not timed_out else time.monotonic()
    counted = count.expect if not timed_out else count.handled
    span = last - count.first
    rate = (counted - 1) / span if span > 0 else 0.0
    with psycopg.connect(a.url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'processed'),"
            " count(*) FILTER (WHERE state <> 'processed') FROM inbox WHERE source = %s",
            [a.source],
        ).fetchone()
    processed, left = row if row is not None else (0, 0)
    print(
        f"handled={count.handled} rate={rate:.0f} first_ms={round((count.first - started) * 1000)}"
        f" wall_ms={round(wall * 1000)} processed={processed} left={left}"
        f" timed_out={'true' if timed_out else 'false'}"
    )
    hz = os.sysconf("SC_CLK_TCK")
    wms, pms = worker_ticks * 1000 // hz, pg_cpu_ticks * 1000 // hz

    def per_row(ms: int) -> str:
        return f"{ms * 1000 / count.handled:.0f}" if count.handled else "0"

    print(
        f"cpu worker_cpu_ms={wms} pg_cpu_ms={pms} worker_us_per_row={per_row(wms)}"
        f" pg_us_per_row={per_row(pms)}"
    )


if __name__ == "__main__":
    main()

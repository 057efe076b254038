"""Pull-claim throughput of the Python pull client (clients/python), the counterpart of pullbench
(Rust) and pullbench-ts: WORKERS workers on one source in one Python process, a no-op handler,
run until EXPECT rows were handled (or TIMEOUT seconds). Needs the package installed in the
Python that runs this file (run-pull-clients.sh uses the venv of scripts/test.sh).

Prints the lines of pullbench: `handled=N rate=R first_ms=F wall_ms=W processed=P left=L
timed_out=B`, rate = (N-1) / (time of the N-th handler call - time of the 1st), then `cpu
worker_cpu_ms=.. pg_cpu_ms=.. worker_us_per_row=.. pg_us_per_row=..`.

    python bench.py --url URL --source S --expect N [--workers 4] [--batch 10]
        [--concurrency 1] [--timeout 120] [--mode asyncio|threads]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
import time
from typing import Any

import psycopg

from queuebox_inbox import (
    AsyncHandlerContext,
    AsyncInboxWorker,
    HandlerContext,
    InboxMessage,
    InboxOptions,
    InboxWorker,
)


def ticks(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            text = f.read()
    except OSError:
        return 0
    fields = text[text.rfind(")") + 1 :].split()
    return int(fields[11]) + int(fields[12])


class Count:
    def __init__(self, expect: int) -> None:
        self.expect = expect
        self.handled = 0
        self.first = 0.0
        self.last = 0.0
        self.lock = threading.Lock()

    def hit(self) -> bool:
        """Counts one handler call; True on the expected last one."""
        with self.lock:
            self.handled += 1
            now = time.monotonic()
            if self.handled == 1:
                self.first = now
            if self.handled == self.expect:
                self.last = now
                return True
        return False


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


def run_asyncio(a: argparse.Namespace, count: Count) -> tuple[bool, int]:
    async def main() -> tuple[bool, int]:
        stop = asyncio.Event()
        done = asyncio.Event()

        async def handle(message: InboxMessage, ctx: AsyncHandlerContext) -> None:
            if count.hit():
                done.set()

        workers = [AsyncInboxWorker(a.url, options(a)) for _ in range(a.workers)]
        runs = [asyncio.ensure_future(w.run(handle, stop)) for w in workers]
        try:
            await asyncio.wait_for(done.wait(), a.timeout)
            timed_out = False
        except asyncio.TimeoutError:
            timed_out = True
        pg = await asyncio.to_thread(pg_ticks, a.url)
        stop.set()
        await asyncio.gather(*runs)
        return timed_out, pg

    return asyncio.run(main())


def run_threads(a: argparse.Namespace, count: Count) -> tuple[bool, int]:
    stop = threading.Event()
    done = threading.Event()

    def handle(message: InboxMessage, ctx: HandlerContext) -> None:
        if count.hit():
            done.set()

    workers = [InboxWorker(a.url, options(a)) for _ in range(a.workers)]
    threads = [threading.Thread(target=w.run, args=(handle, stop)) for w in workers]
    for t in threads:
        t.start()
    timed_out = not done.wait(a.timeout)
    pg = pg_ticks(a.url)
    stop.set()
    for t in threads:
        t.join()
    return timed_out, pg


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", default="postgres://queuebox:queuebox@127.0.0.1:5432/queuebox")
    p.add_argument("--source", default="bench")
    p.add_argument("--expect", type=int, default=50_000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--batch", type=int, default=10)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--mode", choices=("asyncio", "threads"), default="asyncio")
    a = p.parse_args()
    count = Count(a.expect)
    started = time.monotonic()
    timed_out, pg_cpu_ticks = (run_asyncio if a.mode == "asyncio" else run_threads)(a, count)
    wall = time.monotonic() - started
    last = count.last if not timed_out else time.monotonic()
    counted = count.expect if not timed_out else count.handled
    span = last - count.first
    rate = (counted - 1) / span if span > 0 else 0.0
    worker_ticks = ticks("self")
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

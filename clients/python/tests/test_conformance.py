"""The conformance runner: every scenario of clients/conformance/scenarios.json against a fresh
PostgreSQL database (QB_TEST_PG_URL), through the package's public API, once with the
synchronous worker and once with the asyncio worker."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

import psycopg
import pytest

from conftest import REPO, fresh_database
from queuebox_inbox import (
    AsyncHandlerContext,
    AsyncInboxWorker,
    ConninfoPool,
    DeadLetter,
    HandlerContext,
    InboxMessage,
    InboxOptions,
    InboxSchema,
    RetryAfter,
    RetryPolicy,
    default_retry_policy,
    sanitize,
    sanitize_error,
)
from queuebox_inbox import InboxWorker as SyncInboxWorker

RUNNER = "python"
SUITE: dict[str, Any] = json.loads(
    (REPO / "clients" / "conformance" / "scenarios.json").read_text(encoding="utf-8")
)
TIMEOUT = SUITE["defaults"]["timeout_ms"] / 1000
Scenario = dict[str, Any]


def poll_until(seconds: float, check: Callable[[], bool], what: Callable[[], str]) -> None:
    until = time.monotonic() + seconds
    last: Exception | None = None
    while True:
        try:
            if check():
                return
        except Exception as error:
            last = error
        if time.monotonic() > until:
            raise AssertionError(
                f"timed out after {seconds} s waiting for {what()} (last error: {last})"
            )
        time.sleep(0.02)


class Db:
    """Statements of the driver and of the handler steps, each on a connection of its own."""

    def __init__(self, url: str) -> None:
        self.pool = ConninfoPool(url, autocommit=True)

    @staticmethod
    def _psycopg(sql: str, message_id: str) -> tuple[str, list[str] | None]:
        # The scenarios write the message id as $1; psycopg takes %s (and %% for a literal %).
        if "$1" not in sql:
            return sql, None
        return sql.replace("%", "%%").replace("$1", "%s"), [message_id] * sql.count("$1")

    def text(self, sql: str, message_id: str = "") -> str:
        query, params = self._psycopg(sql, message_id)
        with self.pool.connection() as conn:
            row = conn.execute(query, params).fetchone()
        if row is None or row[0] is None:
            return "<null>"
        value = row[0]
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    def run(self, sql: str, message_id: str = "") -> None:
        query, params = self._psycopg(sql, message_id)
        with self.pool.connection() as conn:
            conn.execute(query, params)


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[str] = []
        self.logs: list[str] = []
        self.by_key: dict[str, int] = {}
        self.by_agg: dict[str, int] = {}
        self.logger = logging.getLogger(f"queuebox_inbox.test.{secrets.token_hex(6)}")
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)
        recorder = self

        class Capture(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                with recorder.lock:
                    recorder.logs.append(f"{record.levelname} {record.getMessage()}")

        self.logger.addHandler(Capture())

    def add(self, event: str) -> None:
        with self.lock:
            self.events.append(event)

    def has(self, event: str) -> bool:
        with self.lock:
            return event in self.events

    def enter(self, m: InboxMessage) -> None:
        with self.lock:
            self.events.append(f"start:{m.idempotency_key}")
            k = self.by_key.get(m.idempotency_key, 0) + 1
            self.by_key[m.idempotency_key] = k
            if k > 1:
                self.events.append(f"overlap:key:{m.idempotency_key}")
            if m.aggregate_id is not None:
                a = self.by_agg.get(m.aggregate_id, 0) + 1
                self.by_agg[m.aggregate_id] = a
                if a > 1:
                    self.events.append(f"overlap:aggregate:{m.aggregate_id}")

    def leave(self, m: InboxMessage) -> None:
        with self.lock:
            self.events.append(f"end:{m.idempotency_key}")
            self.by_key[m.idempotency_key] -= 1
            if m.aggregate_id is not None:
                self.by_agg[m.aggregate_id] -= 1


def retry_policy(r: dict[str, Any]) -> RetryPolicy:
    return default_retry_policy(
        max_attempts=r["max_attempts"],
        base_delay=r["base_delay_ms"] / 1000,
        max_delay=r["max_delay_ms"] / 1000,
        jitter=r["jitter"],
    )


def build_options(sc: Scenario, logger: logging.Logger) -> InboxOptions:
    w = {**SUITE["defaults"]["worker"], **sc.get("worker", {})}
    extra: dict[str, Any] = {}
    if "retry" in w:
        extra["retry_policy"] = retry_policy(w["retry"])
    if "schema" in w:
        extra["schema"] = InboxSchema(**w["schema"])
    return InboxOptions(
        source=SUITE["defaults"]["source"],
        batch_size=w["batch_size"],
        lease=w["lease_ms"] / 1000,
        max_concurrency=w["max_concurrency"],
        poll_interval=w["poll_interval_ms"] / 1000,
        shutdown_grace=w["shutdown_grace_ms"] / 1000,
        logger=logger,
        **extra,
    )


def insert_rows(db: Db, sc: Scenario) -> list[str]:
    rows = list(sc.get("rows", []))
    g = sc.get("generate")
    if g:
        for i in range(1, g["count"] + 1):
            rows.append(
                {
                    "key": f"{g['key_prefix']}{i}",
                    "aggregate": f"g-{i % g['aggregates']}" if g["aggregates"] > 0 else None,
                    "age_ms": (g["count"] - i + 1) * 10,
                }
            )
    with db.pool.connection() as conn:
        for row in rows:
            conn.execute(
                """INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload,
                     headers, consumption, correlation_id, created_at, scheduled_at)
                   VALUES (%(source)s::text, %(key)s::text, %(agg)s::text, 'test.event',
                     jsonb_build_object('key', %(key)s::text), '{"x-test": "1"}', 'pull',
                     'corr-' || %(key)s::text, now() - %(age)s::bigint * interval '1 millisecond',
                     now() - %(age)s::bigint * interval '1 millisecond')""",
                {
                    "source": SUITE["defaults"]["source"],
                    "key": row["key"],
                    "agg": row.get("aggregate"),
                    "age": row.get("age_ms", 1000),
                },
            )
    return [r["key"] for r in rows]


def describe(m: InboxMessage, id_matches: bool) -> str:
    def text(v: str | None) -> str:
        return "-" if v is None else v

    payload_key = m.payload.get("key") if isinstance(m.payload, dict) else "unparsable"
    return (
        f"id_matches={'true' if id_matches else 'false'} source={m.source} "
        f"key={m.idempotency_key} aggregate={text(m.aggregate_id)} "
        f"event_type={text(m.event_type)} payload_key={payload_key} "
        f"header_x_test={m.headers.get('x-test')} attempt={m.attempt} "
        f"correlation={text(m.correlation_id)}"
    )


def plain_step(
    db: Db,
    rec: Recorder,
    st: dict[str, Any],
    m: InboxMessage,
    cancelled: threading.Event | asyncio.Event,
) -> None:
    """A handler step that needs no handler transaction (run on a thread for the async worker)."""
    key, mid = m.idempotency_key, str(m.id)
    do = st["do"]
    if do == "sql":
        if "record" in st:
            rec.add(f"{st['record']}:{key}={db.text(st['sql'], mid)}")
        else:
            db.run(st["sql"], mid)
    elif do == "mark":
        rec.add(f"{st['event']}:{key}")
    elif do == "await_sql":
        poll_until(TIMEOUT, lambda: db.text(st["sql"], mid) == "true", lambda: str(st["sql"]))
        if "record" in st:
            rec.add(f"{st['record']}:{key}")
    elif do == "watch_sql":
        low: int | None = None
        prev: int | None = None
        rises = 0
        until = time.monotonic() + st["for_ms"] / 1000
        while time.monotonic() < until:
            if cancelled.is_set():
                raise RuntimeError("cancelled while watching")
            v = int(db.text(st["sql"], mid))
            low = v if low is None or v < low else low
            if prev is not None and v > prev + 100:
                rises += 1
            prev = v
            time.sleep(0.02)
        rec.add(f"{st['record']}.min:{key}={low}")
        rec.add(f"{st['record']}.rises:{key}={rises}")
    elif do == "record_message":
        owner = db.text("SELECT idempotency_key FROM inbox WHERE id = $1::uuid", mid)
        rec.add(f"message:{key}={describe(m, owner == key)}")
    elif do == "check_token_hidden":
        token = db.text("SELECT claim_token::text FROM inbox WHERE id = $1::uuid", mid)
        shown = repr(m) + repr({f.name: getattr(m, f.name) for f in dataclasses.fields(m)})
        named = any("token" in f.name.lower() for f in dataclasses.fields(m)) or any(
            "token" in a.lower() for a in dir(m)
        )
        visible = token == "<null>" or token in shown or named
        rec.add(f"{'token_visible' if visible else 'token_hidden'}:{key}")
    elif do == "fail":
        raise RuntimeError(st["error"] * max(st.get("repeat", 1), 1))
    else:
        raise AssertionError(f"unknown handler step {do}")


def steps_for(sc: Scenario, key: str) -> list[dict[str, Any]]:
    handlers = sc.get("handlers", {})
    steps: list[dict[str, Any]] = handlers.get(key, handlers.get("*", []))
    return steps


def sync_handler(
    db: Db, sc: Scenario, rec: Recorder
) -> Callable[[InboxMessage, HandlerContext], None]:
    def handle(m: InboxMessage, ctx: HandlerContext) -> None:
        key = m.idempotency_key
        rec.enter(m)
        try:
            for st in steps_for(sc, key):
                if st["do"] == "write":
                    ctx.connection.execute(
                        "INSERT INTO conformance_writes (key) VALUES (%s)", [key]
                    )
                elif st["do"] == "await_cancel":
                    cancelled = ctx.cancelled.wait(TIMEOUT)
                    rec.add(f"{'cancelled' if cancelled else 'not_cancelled'}:{key}")
                    raise RuntimeError("cancelled" if cancelled else "never cancelled")
                else:
                    plain_step(db, rec, st, m, ctx.cancelled)
        finally:
            rec.leave(m)

    return handle


def async_handler(
    db: Db, sc: Scenario, rec: Recorder
) -> Callable[[InboxMessage, AsyncHandlerContext], Coroutine[Any, Any, None]]:
    async def handle(m: InboxMessage, ctx: AsyncHandlerContext) -> None:
        key = m.idempotency_key
        rec.enter(m)
        try:
            for st in steps_for(sc, key):
                if st["do"] == "write":
                    await ctx.connection.execute(
                        "INSERT INTO conformance_writes (key) VALUES (%s)", [key]
                    )
                elif st["do"] == "await_cancel":
                    try:
                        await asyncio.wait_for(ctx.cancelled.wait(), TIMEOUT)
                    except asyncio.CancelledError:
                        rec.add(f"cancelled:{key}")
                        raise
                    except asyncio.TimeoutError:
                        rec.add(f"not_cancelled:{key}")
                        raise
                    rec.add(f"cancelled:{key}")
                    raise RuntimeError("cancelled")
                else:
                    await asyncio.to_thread(plain_step, db, rec, st, m, ctx.cancelled)
        finally:
            rec.leave(m)

    return handle


class Running:
    """One started worker of either kind, driven from the test's thread."""

    def __init__(self, stop: Callable[[], None], done: Future[None]) -> None:
        self.stop = stop
        self.done = done


class Kind:
    """How the runner builds and drives one kind of worker."""

    name = ""

    def start(
        self, url: str, options: InboxOptions, db: Db, sc: Scenario, rec: Recorder
    ) -> Running:
        raise NotImplementedError

    def close(self) -> None:
        pass


class SyncKind(Kind):
    name = "sync"

    def start(
        self, url: str, options: InboxOptions, db: Db, sc: Scenario, rec: Recorder
    ) -> Running:
        worker = SyncInboxWorker(url, options)
        done: Future[None] = Future()

        def target() -> None:
            try:
                worker.run(sync_handler(db, sc, rec))
                done.set_result(None)
            except BaseException as error:
                done.set_exception(error)

        threading.Thread(target=target, daemon=True).start()
        return Running(worker.stop, done)


class AsyncKind(Kind):
    name = "asyncio"

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def start(
        self, url: str, options: InboxOptions, db: Db, sc: Scenario, rec: Recorder
    ) -> Running:
        worker = AsyncInboxWorker(url, options)

        async def make_event() -> asyncio.Event:
            return asyncio.Event()

        stop = asyncio.run_coroutine_threadsafe(make_event(), self.loop).result()
        done = asyncio.run_coroutine_threadsafe(
            worker.run(async_handler(db, sc, rec), stop), self.loop
        )

        def stop_it() -> None:
            self.loop.call_soon_threadsafe(stop.set)

        return Running(stop_it, done)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def run_worker_scenario(sc: Scenario, kind: Kind) -> None:
    with fresh_database("qb_conf_py") as url:
        db = Db(url)
        try:
            for sql in sc.get("sql_before", []):
                db.run(sql)
            keys = insert_rows(db, sc)
            for sql in sc.get("sql_after_rows", []):
                db.run(sql)
            rec = Recorder()
            drive(sc, kind, url, db, rec)
            check(db, sc, rec, keys)
        finally:
            db.pool.close()


def drive(sc: Scenario, kind: Kind, url: str, db: Db, rec: Recorder) -> None:
    workers: list[Running] = []

    def stop_all() -> None:
        for w in workers:
            w.stop()

    def wait_all() -> None:
        for w in workers:
            w.done.result(TIMEOUT)
        workers.clear()

    try:
        for st in sc["run"]:
            do = st["do"]
            if do == "start":
                for _ in range(max(sc.get("workers", 1), 1)):
                    want = st.get("expect_error_contains")
                    if want is None:
                        workers.append(kind.start(url, build_options(sc, rec.logger), db, sc, rec))
                        continue
                    error: BaseException | None = None
                    try:
                        running = kind.start(url, build_options(sc, rec.logger), db, sc, rec)
                        try:
                            running.done.result(TIMEOUT)
                        finally:
                            running.stop()
                    except BaseException as e:
                        error = e
                    assert error is not None, f"want an error containing {want!r}, got none"
                    assert want.lower() in str(error).lower(), f"want {want!r} in {error}"
            elif do == "wait_sql":
                poll_until(
                    TIMEOUT,
                    lambda: db.text(st["sql"]) == "true",
                    lambda: f"{st['sql']}\nevents: {rec.events}\nlogs: {rec.logs}",
                )
            elif do == "wait_event":
                poll_until(
                    TIMEOUT,
                    lambda: rec.has(st["event"]),
                    lambda: f"the event {st['event']}\nevents: {rec.events}",
                )
            elif do == "sql":
                db.run(st["sql"])
            elif do == "stop":
                stop_all()
                wait_all()
            elif do == "stop_async":
                stop_all()
            elif do == "wait_stopped":
                wait_all()
            else:
                raise AssertionError(f"unknown run step {do}")
        stop_all()
        wait_all()
    finally:
        stop_all()
        for w in workers:
            try:
                w.done.result(TIMEOUT)
            except BaseException:
                pass


def check(db: Db, sc: Scenario, rec: Recorder, keys: list[str]) -> None:
    e = sc.get("expect", {})
    events = list(rec.events)
    checked = 0
    for ev in e.get("events", []):
        checked += 1
        assert events.count(ev) > 0, f"missing event {ev}\nevents: {events}\nlogs: {rec.logs}"
    for ev in e.get("events_absent", []):
        checked += 1
        assert events.count(ev) == 0, f"unexpected event {ev}"
    for prefix in e.get("events_absent_prefix", []):
        checked += 1
        assert [x for x in events if x.startswith(prefix)] == [], f"events starting with {prefix}"
    for ev, want in e.get("event_counts", {}).items():
        checked += 1
        assert events.count(ev) == want, f"event {ev}: {events.count(ev)} times, want {want}"
    if "each_key_started" in e:
        checked += 1
        for k in keys:
            assert events.count(f"start:{k}") == e["each_key_started"], f"row {k} handled"
    if "order" in e:
        checked += 1
        positions = [events.index(ev) if ev in events else -1 for ev in e["order"]]
        for i, p in enumerate(positions):
            assert p >= 0 and (i == 0 or p > positions[i - 1]), (
                f"event {e['order'][i]} missing or out of order\nevents: {events}"
            )
    for n in e.get("numbers", []):
        checked += 1
        found = next((x for x in events if x.startswith(f"{n['event']}=")), None)
        assert found is not None, f"no number recorded for {n['event']}\nevents: {events}"
        value = int(found[len(n["event"]) + 1 :])
        assert value >= n["at_least"], f"{n['event']} = {value}, want at least {n['at_least']}"
    for c in e.get("sql", []):
        checked += 1
        got = db.text(c["sql"])
        if "equals" in c:
            assert got == c["equals"], f"{c['sql']}\ngot {got}\nlogs: {rec.logs}"
        for want in c.get("contains", []):
            assert want in got, f"{c['sql']}\ngot {got}, which lacks {want}"
        for no in c.get("not_contains", []):
            assert no not in got, f"{c['sql']}\ngot {got}, which holds {no}"
    if "logs" in e:
        checked += 1
        if e["logs"].get("not_empty"):
            assert rec.logs, "the logger received nothing"
        for line in rec.logs:
            for no in e["logs"].get("not_contains", []):
                assert no not in line, f"a log line holds {no}: {line}"
    refusal = any("expect_error_contains" in st for st in sc["run"])
    assert checked > 0 or refusal, "the scenario checks nothing"


def run_policy_scenario(sc: Scenario) -> None:
    for p in sc["policies"]:
        policy = default_retry_policy() if p["policy"] == "default" else retry_policy(p["policy"])
        for c in p["cases"]:
            seen: set[float] = set()
            message = InboxMessage(
                id=__import__("uuid").uuid4(),
                source="s",
                idempotency_key="k",
                aggregate_id=None,
                event_type=None,
                payload=None,
                attempt=c["attempt"],
            )
            for _ in range(sc["samples"]):
                action = policy(message, RuntimeError("boom"))
                if c.get("dead"):
                    assert isinstance(action, DeadLetter), f"{p['policy']} attempt {c['attempt']}"
                    continue
                assert isinstance(action, RetryAfter), f"{p['policy']} attempt {c['attempt']}"
                ms = action.delay * 1000
                assert c["min_ms"] - 1 <= ms <= c["max_ms"] + 1, (
                    f"{p['policy']} attempt {c['attempt']}: {ms} ms outside "
                    f"[{c['min_ms']}, {c['max_ms']}]"
                )
                seen.add(ms)
            if not c.get("dead") and c["max_ms"] > c["min_ms"]:
                assert len(seen) >= 2, "the jitter does not spread"


def run_sanitize_scenario(sc: Scenario) -> None:
    assert sc["cases"]
    for c in sc["cases"]:
        assert sanitize(c["input"]) == c["output"], f"sanitize({c['input']!r})"
    for c in sc["cuts"]:
        got = sanitize(c["repeat"] * c["times"])
        assert got == c["output_repeat"] * c["output_times"]
        assert len(got.encode()) <= c["max_bytes"]
    assert sanitize_error(RuntimeError(sc["cases"][0]["input"])) == sc["cases"][0]["output"]


@pytest.fixture(scope="module")
def async_kind() -> Any:
    kind = AsyncKind()
    yield kind
    kind.close()


def _params() -> list[Any]:
    out = []
    for sc in SUITE["scenarios"]:
        reason = sc.get("skip", {}).get(RUNNER)
        kinds = ["sync", "asyncio"] if "kind" not in sc else ["-"]
        for k in kinds:
            marks = (
                [pytest.mark.skip(reason=f"skipped by the scenario data: {reason}")]
                if reason is not None
                else []
            )
            out.append(pytest.param(sc, k, id=f"{sc['id']}[{k}]", marks=marks))
    return out


@pytest.mark.parametrize(("sc", "kind_name"), _params())
def test_scenario(sc: Scenario, kind_name: str, async_kind: AsyncKind) -> None:
    kind = sc.get("kind")
    if kind == "retry_policy":
        run_policy_scenario(sc)
    elif kind == "sanitize":
        run_sanitize_scenario(sc)
    elif kind is None:
        run_worker_scenario(sc, SyncKind() if kind_name == "sync" else async_kind)
    else:
        raise AssertionError(f"unknown scenario kind {kind}")


def test_scenarios_name_only_known_clients() -> None:
    for sc in SUITE["scenarios"]:
        for client in sc.get("skip", {}):
            assert client in {"rust", "go", "typescript", "python"}, f"{sc['id']}: {client}"


def test_psycopg_is_the_driver() -> None:
    assert psycopg.__version__ >= "3.2"

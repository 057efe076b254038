"""The outbox-writer conformance runner: every scenario of
clients/conformance/writer-scenarios.json against a fresh PostgreSQL database (QB_TEST_PG_URL),
through the package's public API; the scenarios with "binary" start the real queuebox binary and
receive its deliveries on a local HTTP server. Each transaction runs once with the synchronous
writer (psycopg Connection) and the asyncio form is checked on the same data by
test_async_writer_matches."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from conftest import REPO, admin_url, fresh_database
from queuebox_inbox import (
    InboxConfigError,
    OutboxMessage,
    OutboxRefusedError,
    OutboxSchema,
    OutboxWriter,
)

RUNNER = "python"
SUITE: dict[str, Any] = json.loads(
    (REPO / "clients" / "conformance" / "writer-scenarios.json").read_text(encoding="utf-8")
)
TIMEOUT = SUITE["defaults"]["timeout_ms"] / 1000
Scenario = dict[str, Any]


def text_field(value: Any) -> Any:
    """A text field, or {"repeat": t, "times": n}."""
    if isinstance(value, dict) and "repeat" in value:
        return value["repeat"] * value["times"]
    return value


def build_writer(spec: dict[str, Any]) -> OutboxWriter:
    schema = OutboxSchema(**{k: text_field(v) for k, v in spec.get("schema", {}).items()})
    adds = spec.get("header_hook_adds")
    if adds is None:
        return OutboxWriter(schema)

    def hook(headers: dict[str, str]) -> None:
        headers.update(adds)

    return OutboxWriter(schema, header_hook=hook)


def message_of(w: dict[str, Any]) -> OutboxMessage:
    fields: dict[str, Any] = {"topic": text_field(w["topic"])}
    if "payload_text" in w:
        fields["payload"] = str(text_field(w["payload_text"])).encode("utf-8")
    else:
        fields["payload"] = w["payload"]
    for name in ("key", "aggregate_type", "headers", "max_attempts", "traceparent", "tracestate"):
        if name in w:
            fields[name] = text_field(w[name])
    if "scheduled_in_ms" in w:
        fields["scheduled_at"] = datetime.now(timezone.utc) + timedelta(
            milliseconds=w["scheduled_in_ms"]
        )
    return OutboxMessage(**fields)


def table_of(spec: dict[str, Any]) -> tuple[str, str]:
    s = spec.get("schema", {})
    table = f'"{s.get("table", "outbox")}"'
    if s.get("namespace"):
        table = f'"{s["namespace"]}".{table}'
    return table, f'"{s.get("id", "id")}"'


def text_of(conn: psycopg.Connection[Any], sql: str) -> str:
    row = conn.execute(sql).fetchone()
    if row is None or row[0] is None:
        return "<null>"
    if isinstance(row[0], bool):
        return "true" if row[0] else "false"
    return str(row[0])


def binary_path() -> Path:
    tried = []
    for candidate in (
        os.environ.get("QB_BIN", ""),
        os.path.join(os.environ.get("CARGO_TARGET_DIR", ""), "debug", "queuebox")
        if os.environ.get("CARGO_TARGET_DIR")
        else "",
        str(REPO / "target" / "debug" / "queuebox"),
    ):
        if candidate:
            tried.append(candidate)
            if os.access(candidate, os.X_OK):
                return Path(candidate)
    raise AssertionError(
        f"no queuebox binary (tried {', '.join(tried)}): build it with `cargo build -p queuebox`"
    )


class Receiver:
    """An HTTP server that answers 200 and records each request's headers and body."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handle(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver.lock:
                    receiver.requests.append((headers, body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handle)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def database_url(conninfo: str) -> str:
    parts = urlsplit(admin_url())
    return urlunsplit(parts._replace(path="/" + str(conninfo_to_dict(conninfo)["dbname"])))


def run_binary(sc: Scenario, conninfo: str, committed: list[uuid.UUID]) -> None:
    binary = binary_path()
    receiver = Receiver()
    try:
        lines = [
            "server:",
            f"  httpPort: {free_port()}",
            "database:",
            f"  url: {json.dumps(database_url(conninfo))}",
            "  migrate: false",
        ]
        lines += [f"  {line}" for line in sc["binary"].get("database", [])]
        lines += [
            "outbox:",
            "  pollIntervalMs: 50",
            "destinations:",
            "  hook:",
            "    type: http",
            f"    baseUrl: {receiver.url}",
            "    path: /events",
            "routes:",
            '  - topicPattern: "**"',
            "    destination: hook",
        ]
        with tempfile.TemporaryDirectory() as folder:
            config = Path(folder) / "queuebox.yml"
            config.write_text("\n".join(lines) + "\n", encoding="utf-8")
            log = Path(folder) / "stderr.log"
            with log.open("wb") as err:
                proc = subprocess.Popen(
                    [str(binary)],
                    env={
                        "PATH": os.environ.get("PATH", ""),
                        "HOME": os.environ.get("HOME", ""),
                        "QUEUEBOX_CONFIG_FILE": str(config),
                    },
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                )
                deliveries = sc.get("expect", {}).get("deliveries") or {}
                settled = deliveries.get("settled_sql", "SELECT true")
                done = False
                until = time.monotonic() + TIMEOUT
                try:
                    with psycopg.connect(conninfo, autocommit=True) as conn:
                        while time.monotonic() < until and proc.poll() is None:
                            if text_of(conn, settled) == "true":
                                done = True
                                break
                            time.sleep(0.05)
                        rows = (
                            conn.execute("SELECT state, attempt, last_error FROM outbox").fetchall()
                            if not done
                            else []
                        )
                finally:
                    proc.terminate()
                    try:
                        proc.wait(20)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
            assert done, (
                f"{settled} never held\noutbox rows: {rows}\nrequests: {len(receiver.requests)}"
                f"\nqueuebox stderr:\n{log.read_text()[-4000:]}"
            )
        with receiver.lock:
            got = list(receiver.requests)
    finally:
        receiver.close()
    if not deliveries:
        return
    ids = {str(i) for i in committed}
    by_key: dict[str, list[tuple[dict[str, str], bytes]]] = {}
    for headers, body in got:
        assert headers.get("x-message-id") in ids, (
            f"a delivery carries X-Message-Id {headers.get('x-message-id')!r}, which no committed "
            "write returned"
        )
        by_key.setdefault(headers.get("x-message-key", ""), []).append((headers, body))
    unexpected = set(by_key) - set(deliveries["by_key"])
    assert not unexpected, f"deliveries for the unexpected keys {sorted(unexpected)}"
    for key, want in deliveries["by_key"].items():
        have = by_key.get(key, [])
        assert len(have) == len(want), f"key {key}: {len(have)} deliveries, expected {len(want)}"
        for i, (w, (headers, body)) in enumerate(zip(want, have, strict=False)):
            assert headers.get("x-topic") == w["topic"], f"key {key} delivery {i}: {headers}"
            assert json.loads(body) == w["body"], f"key {key} delivery {i}: body {body!r}"
            for name, value in w.get("headers", {}).items():
                assert headers.get(name.lower()) == value, (
                    f"key {key} delivery {i}: header {name} = {headers.get(name.lower())!r}"
                )


def run_scenario(sc: Scenario) -> None:
    with fresh_database("qb_writer_py") as conninfo:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            for sql in sc.get("sql_before", []):
                conn.execute(sql)
        spec = sc.get("writer", {})
        writer = build_writer(spec)
        table, id_column = table_of(spec)
        committed: list[uuid.UUID] = []
        for tx in sc.get("transactions", []):
            written: list[uuid.UUID] = []
            with psycopg.connect(conninfo) as conn:
                if "business_key" in tx:
                    conn.execute(
                        "INSERT INTO conformance_writes (key) VALUES (%s)", [tx["business_key"]]
                    )
                for w in tx["writes"]:
                    if "error" in w:
                        with pytest.raises(OutboxRefusedError) as refused:
                            writer.write(conn, message_of(w))
                        assert w["error"] in str(refused.value), (
                            f"want {w['error']!r} in {str(refused.value)!r}"
                        )
                        continue
                    written.append(writer.write(conn, message_of(w)))
                if tx.get("end", "commit") == "rollback":
                    conn.rollback()
                else:
                    conn.commit()
                    committed.extend(written)
                for row_id in written:
                    n = conn.execute(
                        f"SELECT count(*) FROM {table} WHERE {id_column} = %s", [row_id]
                    ).fetchone()
                    want = 0 if tx.get("end") == "rollback" else 1
                    assert n == (want,), f"row {row_id}: {n}, want {want}"
                conn.rollback()
        if "binary" in sc:
            run_binary(sc, conninfo, committed)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            checked = 0
            for c in sc.get("expect", {}).get("sql", []):
                checked += 1
                got = text_of(conn, c["sql"])
                assert got == c["equals"], f"{c['sql']}\ngot {got}"
        assert checked or "binary" in sc, "the scenario checks nothing"


def run_schema_refusal(sc: Scenario) -> None:
    assert sc["cases"]
    for case in sc["cases"]:
        with pytest.raises(InboxConfigError) as refused:
            build_writer({"schema": case["schema"]})
        assert case["error"] in str(refused.value), f"want {case['error']!r} in {refused.value}"


def _params() -> list[Any]:
    out = []
    for sc in SUITE["scenarios"]:
        reason = sc.get("skip", {}).get(RUNNER)
        marks = (
            [pytest.mark.skip(reason=f"skipped by the scenario data: {reason}")]
            if reason is not None
            else []
        )
        out.append(pytest.param(sc, id=sc["id"], marks=marks))
    return out


@pytest.mark.parametrize("sc", _params())
def test_writer_scenario(sc: Scenario) -> None:
    kind = sc.get("kind")
    if kind == "schema_refusal":
        run_schema_refusal(sc)
    elif kind is None:
        run_scenario(sc)
    else:
        raise AssertionError(f"unknown scenario kind {kind}")


def test_async_writer_writes_in_the_callers_transaction() -> None:
    """write_async: the same checks and insert on an AsyncConnection (commit keeps the row,
    rollback leaves none, a refusal leaves the transaction usable)."""

    async def main(conninfo: str) -> None:
        writer = OutboxWriter()
        async with await psycopg.AsyncConnection.connect(conninfo) as conn:
            with pytest.raises(OutboxRefusedError, match="the topic is empty"):
                await writer.write_async(conn, OutboxMessage(topic="", payload={}))
            kept = await writer.write_async(conn, OutboxMessage(topic="a.t", payload=[1]))
            await conn.commit()
            gone = await writer.write_async(conn, OutboxMessage(topic="b.t", payload=b'"x"'))
            await conn.rollback()
            cur = await conn.execute("SELECT id, payload::text FROM outbox")
            assert await cur.fetchall() == [(kept, "[1]")]
            assert gone != kept

    with fresh_database("qb_writer_py") as conninfo:
        asyncio.run(main(conninfo))

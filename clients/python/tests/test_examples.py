"""The README's example programs run as documented: each consumes the rows of the pull source
``orders`` with its business write committed with the completion, and stops on SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from conftest import fresh_database

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _wait(url: str, sql: str, seconds: float, proc: subprocess.Popen[str]) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        with psycopg.connect(url, autocommit=True) as conn:
            try:
                row = conn.execute(sql).fetchone()
            except psycopg.errors.UndefinedTable:
                row = None
        if row is not None and row[0]:
            return
        assert proc.poll() is None, f"the example exited early: {proc.communicate()}"
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {sql}")


@pytest.mark.parametrize(
    ("script", "table"),
    [
        ("psycopg_example.py", "shipments"),
        ("sqlalchemy_example.py", "invoices"),
    ],
)
def test_example_consumes_and_stops(script: str, table: str) -> None:
    with fresh_database("qb_example_py") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                """INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload,
                     consumption)
                   SELECT 'orders', 'k-' || i, 'o-' || (i % 3), 'order.created',
                          jsonb_build_object('order_id', 'o-' || i), 'pull'
                     FROM generate_series(1, 12) AS i"""
            )
        proc = subprocess.Popen(
            [sys.executable, str(EXAMPLES / script)],
            env={**os.environ, "QB_DATABASE_URL": url},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            _wait(url, "SELECT count(*) = 12 FROM inbox WHERE state = 'processed'", 30, proc)
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, out
        assert "stopped" in out, out
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                f"SELECT count(*), count(*) FILTER (WHERE order_id = 'o-' || "
                f"substr(idempotency_key, 3)) FROM {table}"
            ).fetchone()
        assert row == (12, 12), f"{table}: {row}\n{out}"

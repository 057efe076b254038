"""Shared helpers of the tests: the repository root and a fresh database per test."""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

REPO = Path(__file__).resolve().parents[3]


def admin_url() -> str:
    url = os.environ.get("QB_TEST_PG_URL", "")
    if not url:
        raise RuntimeError(
            "QB_TEST_PG_URL is not set: start PostgreSQL and export it with "
            '`eval "$(bash scripts/services.sh)"` from the repository root'
        )
    return url


def migrations() -> list[str]:
    folder = REPO / "migrations" / "postgres"
    files = [p for p in folder.iterdir() if re.fullmatch(r"V\d+__.*\.sql", p.name)]
    files.sort(key=lambda p: int(p.name[1:].split("__")[0]))
    assert files, "no migrations found"
    return [p.read_text(encoding="utf-8") for p in files]


@contextmanager
def fresh_database(prefix: str) -> Iterator[str]:
    """A new database with QueueBox's migrations and ``conformance_writes``; yields its URL."""
    name = f"{prefix}_{secrets.token_hex(8)}"
    url = admin_url()
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    target = make_conninfo(url, dbname=name)
    try:
        with psycopg.connect(target, autocommit=True) as conn:
            for sql in migrations():
                conn.execute(sql.encode())
            conn.execute("CREATE TABLE conformance_writes (key TEXT NOT NULL)")
        yield target
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

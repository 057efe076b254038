"""The package runs the contract's own statements: the files under
src/queuebox_inbox/sql/postgresql must be byte-for-byte those of examples/pull/sql/postgresql,
and rendering must rename every mapped name and nothing else."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from conftest import REPO
from queuebox_inbox import InboxConfigError, InboxOptions, InboxSchema, render_statements
from queuebox_inbox._sql import STATEMENTS

CONTRACT = REPO / "examples" / "pull" / "sql" / "postgresql"


def test_shipped_sql_is_the_contract() -> None:
    shipped = resources.files("queuebox_inbox").joinpath("sql").joinpath("postgresql")
    names = sorted(p.name for p in shipped.iterdir() if p.name.endswith(".sql"))
    assert names == sorted(f"{n}.sql" for n in STATEMENTS), (
        f"src/queuebox_inbox/sql/postgresql holds {names}, want the statements this library runs"
    )
    for name in names:
        original = (CONTRACT / name).read_bytes()
        assert shipped.joinpath(name).read_bytes() == original, (
            f"clients/python/src/queuebox_inbox/sql/postgresql/{name} differs from "
            f"examples/pull/sql/postgresql/{name}: copy the contract file over it"
        )


def test_rendering_renames_the_mapped_names_and_names_the_parameters() -> None:
    sql = render_statements(
        InboxSchema(namespace="app", table="qb_inbox", id="msg_id", state="Status")
    )
    assert sql.claim.names == ("source", "cand_limit", "batch", "lease_ms")
    assert sql.retry.names == ("delay_ms", "error", "id", "token")
    for st in (sql.claim, sql.renew, sql.complete, sql.retry, sql.dead, sql.release):
        assert '"app"."qb_inbox"' in st.text and '"Status"' in st.text, st.text
        assert ":id" not in st.text and "--" not in st.text, st.text
        assert not re.search(r"\binbox\b", st.text.replace('"qb_inbox"', "")), st.text
        assert not re.search(r"\.state\b", st.text), st.text
    assert '"msg_id"' in sql.check.text and "WHERE false" in sql.check.text


def test_default_rendering_quotes_the_migrations_names() -> None:
    sql = render_statements()
    assert 'UPDATE "inbox"' in sql.complete.text
    assert "%(id)s" in sql.complete.text and "%(token)s" in sql.complete.text


@pytest.mark.parametrize(
    ("change", "want"),
    [
        ({"table": "inbox; DROP TABLE inbox"}, "invalid SQL identifier"),
        ({"namespace": "app-x"}, "invalid SQL identifier"),
        ({"id": "x" * 64}, "invalid SQL identifier"),
        ({"payload": "headers"}, "both name the column"),
        ({"id": "agg"}, "already use for something else"),
        ({"table": "walk"}, "already use for something else"),
    ],
)
def test_schema_refuses_names_that_cannot_work(change: dict[str, str], want: str) -> None:
    with pytest.raises(InboxConfigError, match=want):
        render_statements(InboxSchema(**change))


@pytest.mark.parametrize(
    ("options", "want"),
    [
        ({"source": ""}, "source is required"),
        ({"source": "s" * 256}, "255 characters"),
        ({"source": "s", "lease": 0.05}, "lease"),
        ({"source": "s", "batch_size": 0}, "batch_size"),
        ({"source": "s", "batch_size": 1001}, "batch_size"),
        ({"source": "s", "max_concurrency": 0}, "max_concurrency"),
        ({"source": "s", "poll_interval": 0}, "poll_interval"),
        ({"source": "s", "shutdown_grace": -1}, "shutdown_grace"),
        ({"source": "s", "dialect": "sqlserver"}, "not supported"),
    ],
)
def test_options_refuse_settings_that_cannot_work(options: dict[str, object], want: str) -> None:
    with pytest.raises(InboxConfigError, match=want):
        InboxOptions(**options)  # type: ignore[arg-type]

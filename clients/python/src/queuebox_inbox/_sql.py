"""The statements of the pull SQL contract, renamed for a mapped schema.

The files under ``sql/postgresql`` are byte-for-byte copies of the contract's
``examples/pull/sql/postgresql`` (``tests/test_contract.py`` compares them). Each is rendered
once per worker: every table and column word is replaced by its double-quoted mapped name,
comments are dropped and ``:name`` parameters become psycopg's ``%(name)s``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from importlib import resources

from ._errors import InboxConfigError

STATEMENTS = ("claim", "renew", "complete", "retry", "dead", "release")
"""The contract files this library runs, without their ``.sql``."""

_CONTRACT_TABLE = "inbox"
_MAX_IDENTIFIER = 63
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class InboxSchema:
    """The table and column names the worker uses; the defaults are QueueBox's migrations'.

    ``namespace`` is the PostgreSQL schema that holds the table (``None`` uses the search path).
    Every name must be a plain identifier: letters, digits and underscores, starting with a letter
    or an underscore, at most 63 characters. Names are double-quoted, so their case is kept.
    """

    namespace: str | None = None
    table: str = "inbox"
    id: str = "id"
    source: str = "source"
    idempotency_key: str = "idempotency_key"
    aggregate_id: str = "aggregate_id"
    event_type: str = "event_type"
    payload: str = "payload"
    headers: str = "headers"
    state: str = "state"
    consumption: str = "consumption"
    attempt: str = "attempt"
    last_error: str = "last_error"
    scheduled_at: str = "scheduled_at"
    created_at: str = "created_at"
    processed_at: str = "processed_at"
    claimed_at: str = "claimed_at"
    claim_token: str = "claim_token"
    lease_expires_at: str = "lease_expires_at"
    correlation_id: str = "correlation_id"


# The column fields of InboxSchema; each field's name is the contract's column word.
_COLUMNS = tuple(f.name for f in fields(InboxSchema) if f.name not in ("namespace", "table"))


@dataclass(frozen=True)
class Statement:
    """One rendered statement: psycopg text with ``%(name)s`` placeholders."""

    text: str
    names: tuple[str, ...]
    """The parameter names in the order they first appear."""


@dataclass(frozen=True)
class Statements:
    """The statements a worker runs."""

    claim: Statement
    renew: Statement
    complete: Statement
    retry: Statement
    dead: Statement
    release: Statement
    check: Statement
    """Reads no row but names every column the worker uses: fails on a schema older than V10."""


def contract_sql() -> dict[str, str]:
    """The contract files shipped with the package, by statement name."""
    base = resources.files("queuebox_inbox").joinpath("sql").joinpath("postgresql")
    return {name: base.joinpath(f"{name}.sql").read_text(encoding="utf-8") for name in STATEMENTS}


_CONTRACT = contract_sql()


def _word_start(c: str) -> bool:
    return c.isascii() and (c.isalpha() or c == "_")


def _word_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


def _scan(sql: str, emit: Callable[[str, str], str]) -> str:
    """Walks SQL text; ``emit(kind, text)`` replaces each bare word and each ``:name``.

    Quoted text is copied, ``::`` casts kept, ``--`` comments dropped, ``%`` doubled for psycopg.
    """
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        nxt = sql[i + 1] if i + 1 < n else ""
        if c in "'\"":
            j = i + 1
            while j < n and sql[j] != c:
                j += 1
            j = min(j + 1, n)
            out.append(sql[i:j].replace("%", "%%"))
            i = j
        elif c == "-" and nxt == "-":
            while i < n and sql[i] != "\n":
                i += 1
        elif c == ":" and nxt == ":":
            out.append("::")
            i += 2
        elif c == ":" and (nxt == "_" or ("a" <= nxt <= "z")):
            j = i + 1
            while j < n and _word_char(sql[j]):
                j += 1
            out.append(emit("param", sql[i + 1 : j]))
            i = j
        elif _word_start(c) or c.isdigit():
            j = i
            while j < n and _word_char(sql[j]):
                j += 1
            word = sql[i:j]
            out.append(emit("word", word) if _word_start(c) else word)
            i = j
        elif c == "%":
            out.append("%%")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _render(sql: str, names: Mapping[str, str]) -> Statement:
    params: list[str] = []

    def emit(kind: str, word: str) -> str:
        if kind == "param":
            if word not in params:
                params.append(word)
            return f"%({word})s"
        return names.get(word.lower(), word)

    return Statement(text=_scan(sql, emit).strip(), names=tuple(params))


def _check_identifier(field: str, name: object) -> str:
    if not isinstance(name, str) or len(name) > _MAX_IDENTIFIER or not _IDENTIFIER.fullmatch(name):
        raise InboxConfigError(
            f"queuebox: invalid SQL identifier {name!r} for schema.{field}: use letters, digits "
            "and underscores, starting with a letter or underscore, at most "
            f"{_MAX_IDENTIFIER} characters"
        )
    return name


def _other_words() -> frozenset[str]:
    words: set[str] = set()
    contract_words = {_CONTRACT_TABLE, *_COLUMNS}

    def collect(kind: str, word: str) -> str:
        if kind == "word" and word.lower() not in contract_words:
            words.add(word.lower())
        return word

    for text in _CONTRACT.values():
        _scan(text, collect)
    return frozenset(words)


_OTHER_WORDS = _other_words()


def render_statements(schema: InboxSchema | None = None) -> Statements:
    """The contract's statements for ``schema``.

    Every name is checked against the identifier rule and double-quoted; two fields naming one
    column, or a name the statements already use for something else (an alias, a keyword), are
    refused with :class:`InboxConfigError`.
    """
    s = schema if schema is not None else InboxSchema()
    table = f'"{_check_identifier("table", s.table)}"'
    if s.namespace is not None and s.namespace != "":
        table = f'"{_check_identifier("namespace", s.namespace)}".{table}'
    names: dict[str, str] = {_CONTRACT_TABLE: table}
    used: dict[str, str] = {}
    for field in _COLUMNS:
        name = _check_identifier(field, getattr(s, field))
        other = used.get(name.lower())
        if other is not None:
            raise InboxConfigError(
                f"queuebox: schema.{other} and schema.{field} both name the column {name!r}"
            )
        used[name.lower()] = field
        names[field] = f'"{name}"'
        if name.lower() != field and name.lower() in _OTHER_WORDS:
            raise InboxConfigError(
                f"queuebox: schema.{field} {name!r} is a name the SQL statements already use for "
                "something else; rename the column or choose another mapping"
            )
    if s.table.lower() != _CONTRACT_TABLE and s.table.lower() in _OTHER_WORDS:
        raise InboxConfigError(
            f"queuebox: schema.table {s.table!r} is a name the SQL statements already use for "
            "something else"
        )
    columns = ", ".join(names[field] for field in _COLUMNS)
    rendered = {name: _render(_CONTRACT[name], names) for name in STATEMENTS}
    return Statements(
        claim=rendered["claim"],
        renew=rendered["renew"],
        complete=rendered["complete"],
        retry=rendered["retry"],
        dead=rendered["dead"],
        release=rendered["release"],
        check=Statement(text=f"SELECT {columns} FROM {table} WHERE false", names=()),
    )

"""SQLAlchemy ORM: a worker whose handler adds ORM objects in the worker's transaction.

    QB_DATABASE_URL=postgresql://queuebox:queuebox@127.0.0.1:5432/queuebox \
        python examples/sqlalchemy_example.py

The worker borrows its connections from the SQLAlchemy engine's pool (``EngineConnections``).
For each message the handler opens a ``Session`` on the very connection the worker gave it; the
session works in a savepoint inside the worker's transaction, so ``session.commit()`` only
releases the savepoint and the rows commit with the completion, or roll back with it.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from sqlalchemy import Engine, String, create_engine
from sqlalchemy.engine import Connection
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from sqlalchemy.pool import PoolProxiedConnection

from queuebox_inbox import HandlerContext, InboxMessage, InboxOptions, InboxWorker


class Base(DeclarativeBase):
    pass


class Invoice(Base):
    __tablename__ = "invoices"
    source: Mapped[str] = mapped_column(String, primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String, primary_key=True)
    order_id: Mapped[str | None] = mapped_column(String)


class EngineConnections:
    """Lends the worker psycopg connections from a SQLAlchemy engine's pool."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lent: dict[int, PoolProxiedConnection] = {}

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        raw = self.engine.raw_connection()
        conn: psycopg.Connection[Any] = raw.driver_connection  # type: ignore[assignment]
        self._lent[id(conn)] = raw
        try:
            yield conn
        finally:
            del self._lent[id(conn)]
            if conn.closed:
                raw.invalidate()
            raw.close()

    @contextmanager
    def session(self, ctx: HandlerContext) -> Iterator[Session]:
        """A Session in a savepoint of the handler's transaction, on the handler's connection."""
        sa_connection = Connection(self.engine, connection=self._lent[id(ctx.connection)])
        sa_connection.begin()  # the worker's transaction, as SQLAlchemy sees it; never ended here
        with Session(bind=sa_connection, join_transaction_mode="create_savepoint") as session:
            yield session


def make_handler(connections: EngineConnections) -> Any:
    def handle(message: InboxMessage, ctx: HandlerContext) -> None:
        order = message.payload.get("order_id") if isinstance(message.payload, dict) else None
        with connections.session(ctx) as session:
            session.merge(
                Invoice(
                    source=message.source, idempotency_key=message.idempotency_key, order_id=order
                )
            )
            session.commit()  # releases the savepoint; the worker commits the transaction

    return handle


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    url = os.environ["QB_DATABASE_URL"]
    # Any libpq connection string works through creator (a URL or key=value pairs).
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(url))
    Base.metadata.create_all(engine)
    connections = EngineConnections(engine)
    worker = InboxWorker(connections, InboxOptions(source="orders", max_concurrency=4))
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: worker.stop())
    logging.info("consuming the pull source orders; Ctrl-C stops")
    worker.run(make_handler(connections))
    engine.dispose()
    logging.info("stopped")


if __name__ == "__main__":
    main()

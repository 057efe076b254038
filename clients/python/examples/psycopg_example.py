"""Plain psycopg: a worker that records a shipment for each order event of the pull source
``orders``, in the same transaction that marks the message processed.

    QB_DATABASE_URL=postgresql://queuebox:queuebox@127.0.0.1:5432/queuebox \
        python examples/psycopg_example.py

The database needs QueueBox's migrations (``queuebox migrate``) and a ``consumption: pull``
source named ``orders``. Stop it with Ctrl-C or SIGTERM: running handlers get their grace.
"""

from __future__ import annotations

import logging
import os
import signal

import psycopg

from queuebox_inbox import HandlerContext, InboxMessage, InboxOptions, InboxWorker


def handle(message: InboxMessage, ctx: HandlerContext) -> None:
    # Every write goes through ctx.connection: it commits with the completion, or not at all.
    # A redelivery (at least once) hits the unique key and changes nothing.
    order = message.payload.get("order_id") if isinstance(message.payload, dict) else None
    ctx.connection.execute(
        "INSERT INTO shipments (source, idempotency_key, order_id) VALUES (%s, %s, %s)"
        " ON CONFLICT (source, idempotency_key) DO NOTHING",
        (message.source, message.idempotency_key, order),
    )


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    url = os.environ["QB_DATABASE_URL"]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS shipments (source text NOT NULL,"
            " idempotency_key text NOT NULL, order_id text,"
            " PRIMARY KEY (source, idempotency_key))"
        )
    worker = InboxWorker(url, InboxOptions(source="orders", max_concurrency=4, batch_size=20))
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: worker.stop())
    logging.info("consuming the pull source orders; Ctrl-C stops")
    worker.run(handle)
    logging.info("stopped")


if __name__ == "__main__":
    main()

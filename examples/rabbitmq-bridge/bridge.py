#!/usr/bin/env python3
"""The RabbitMQ side of the bridge example (needs `pika`: pip install pika).

    python3 bridge.py setup      declare the exchanges, queues and bindings of queuebox.yml
    python3 bridge.py send N     publish N orders to exchange shop.incoming (each twice: a redelivery)
    python3 bridge.py receive N  wait for N messages on processed-orders and print them
"""
import json
import os
import sys
import time

import pika

URL = os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")


def channel():
    connection = pika.BlockingConnection(pika.URLParameters(URL))
    return connection, connection.channel()


def setup():
    connection, ch = channel()
    ch.exchange_declare("shop.incoming", "topic", durable=True)
    ch.queue_declare("incoming-orders", durable=True)
    ch.queue_bind("incoming-orders", "shop.incoming", "#")
    # The destination exchange is declared by QueueBox too; declaring it here lets the binding
    # exist before the first delivery, so no message comes back unroutable.
    ch.exchange_declare("shop.orders", "topic", durable=True)
    ch.queue_declare("processed-orders", durable=True)
    ch.queue_bind("processed-orders", "shop.orders", "orders.#")
    connection.close()
    print("declared shop.incoming -> incoming-orders and shop.orders -> processed-orders")


def send(count):
    connection, ch = channel()
    ch.confirm_delivery()
    for n in range(count):
        order = {
            "orderId": f"o-{n}",
            "customerId": f"c-{n % 3}",
            "type": "created",
            "region": "eu" if n % 2 else "us",
        }
        body = json.dumps(order).encode()
        for _ in range(2):
            ch.basic_publish(
                "shop.incoming",
                "order",
                body,
                pika.BasicProperties(delivery_mode=2, content_type="application/json"),
            )
    connection.close()
    print(f"published {count} orders, each twice")


def receive(count, timeout_s=30):
    connection, ch = channel()
    got = 0
    deadline = time.monotonic() + timeout_s
    while got < count and time.monotonic() < deadline:
        method, properties, body = ch.basic_get("processed-orders", auto_ack=True)
        if method is None:
            time.sleep(0.2)
            continue
        got += 1
        headers = properties.headers or {}
        print(
            f"{method.routing_key}  message-id={properties.message_id}  "
            f"x-idempotency-key={headers.get('x-idempotency-key')}  {body.decode()}"
        )
    connection.close()
    if got < count:
        sys.exit(f"received {got} of {count} within {timeout_s}s")


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    if command == "setup":
        setup()
    elif command == "send":
        send(n)
    elif command == "receive":
        receive(n)
    else:
        sys.exit(__doc__)

#!/usr/bin/env python3
"""The NATS side of the bridge example (needs `nats-py`: pip install nats-py).

    python3 bridge.py setup      create the streams SHOP_INCOMING and SHOP_ORDERS
    python3 bridge.py send N     publish N orders to shop.incoming.created (each twice: a redelivery)
    python3 bridge.py receive N  wait for N messages on SHOP_ORDERS and print them
"""
import asyncio
import json
import os
import sys

import nats
from nats.js.api import StreamConfig

URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")


async def setup():
    nc = await nats.connect(URL)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="SHOP_INCOMING", subjects=["shop.incoming.>"]))
    await js.add_stream(StreamConfig(name="SHOP_ORDERS", subjects=["shop.orders.>"]))
    await nc.close()
    print("created streams SHOP_INCOMING (shop.incoming.>) and SHOP_ORDERS (shop.orders.>)")


async def send(count):
    nc = await nats.connect(URL)
    js = nc.jetstream()
    for n in range(count):
        order = {"orderId": f"o-{n}", "customerId": f"c-{n % 3}", "type": "created"}
        for _ in range(2):
            # No Nats-Msg-Id here, so JetStream keeps both copies; the inbox drops the second by
            # its idempotency key ($.orderId).
            await js.publish("shop.incoming.created", json.dumps(order).encode())
    await nc.close()
    print(f"published {count} orders, each twice")


async def receive(count, timeout_s=30):
    nc = await nats.connect(URL)
    js = nc.jetstream()
    sub = await js.pull_subscribe("shop.orders.>", durable="bridge-reader", stream="SHOP_ORDERS")
    got = 0
    deadline = asyncio.get_running_loop().time() + timeout_s
    while got < count and asyncio.get_running_loop().time() < deadline:
        try:
            messages = await sub.fetch(count - got, timeout=1)
        except nats.errors.TimeoutError:
            continue
        for msg in messages:
            got += 1
            headers = msg.headers or {}
            print(
                f"{msg.subject}  Nats-Msg-Id={headers.get('Nats-Msg-Id')}  "
                f"x-idempotency-key={headers.get('x-idempotency-key')}  {msg.data.decode()}"
            )
            await msg.ack()
    await nc.close()
    if got < count:
        sys.exit(f"received {got} of {count} within {timeout_s}s")


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    if command == "setup":
        asyncio.run(setup())
    elif command == "send":
        asyncio.run(send(n))
    elif command == "receive":
        asyncio.run(receive(n))
    else:
        sys.exit(__doc__)

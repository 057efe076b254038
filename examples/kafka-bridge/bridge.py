#!/usr/bin/env python3
"""The Kafka side of the bridge example (needs `confluent-kafka`: pip install confluent-kafka).

    python3 bridge.py setup          create the two topics of queuebox.yml (3 partitions each)
    python3 bridge.py send N         produce N orders to the incoming topic, each twice (a
                                     redelivery), plus one record whose body is not JSON
    python3 bridge.py receive N      wait for N records on the processed topic and print them;
                                     fails when fewer arrive within the timeout
    python3 bridge.py offsets GROUP  print the end offsets of both topics and what GROUP committed
                                     on the incoming one
    python3 bridge.py teardown       delete both topics and the consumer group `queuebox-orders`

Environment: KAFKA_BOOTSTRAP (127.0.0.1:9092), KAFKA_IN_TOPIC (orders-incoming),
KAFKA_OUT_TOPIC (orders-processed), KAFKA_GROUP (queuebox-orders), RECEIVE_TIMEOUT_S (30).
"""
import json
import os
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")
IN_TOPIC = os.environ.get("KAFKA_IN_TOPIC", "orders-incoming")
OUT_TOPIC = os.environ.get("KAFKA_OUT_TOPIC", "orders-processed")
GROUP = os.environ.get("KAFKA_GROUP", "queuebox-orders")
PARTITIONS = 3


def admin():
    return AdminClient({"bootstrap.servers": BOOTSTRAP})


def setup():
    # QueueBox never creates topics: the source's topic and the destination's topic exist first.
    client = admin()
    futures = client.create_topics(
        [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1) for topic in (IN_TOPIC, OUT_TOPIC)],
        operation_timeout=30,
    )
    for topic, future in futures.items():
        try:
            future.result()
            print(f"created topic {topic} ({PARTITIONS} partitions)")
        except KafkaException as error:
            if error.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise
            print(f"topic {topic} exists")


def send(count):
    # The producer QueueBox's destination also uses: acknowledged by every in-sync replica.
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True})
    for n in range(count):
        order = {"orderId": f"o-{n}", "customerId": f"c-{n % 2}", "type": "created", "total": 10 * (n + 1)}
        for _ in range(2):
            # The record key puts one customer's orders in one partition, in order.
            producer.produce(IN_TOPIC, json.dumps(order).encode(), key=order["customerId"])
    # No consumer can read this body: QueueBox keeps it as a `dead` inbox row and moves past it.
    producer.produce(IN_TOPIC, b"this is not JSON", key=b"c-bad")
    left = producer.flush(30)
    if left:
        sys.exit(f"{left} records were not acknowledged")
    print(f"produced {count} orders to {IN_TOPIC}, each twice, and one record that is not JSON")


def receive(count):
    # Reads every partition from its start without joining a group, so nothing is committed.
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "bridge-receiver", "enable.auto.commit": False})
    metadata = consumer.list_topics(OUT_TOPIC, timeout=10)
    consumer.assign([TopicPartition(OUT_TOPIC, p, OFFSET_BEGINNING) for p in metadata.topics[OUT_TOPIC].partitions])
    deadline = time.monotonic() + float(os.environ.get("RECEIVE_TIMEOUT_S", "30"))
    got = 0
    try:
        while got < count and time.monotonic() < deadline:
            record = consumer.poll(0.2)
            if record is None:
                continue
            if record.error():
                raise KafkaException(record.error())
            got += 1
            headers = {name: (value or b"").decode() for name, value in record.headers() or []}
            key = record.key().decode() if record.key() is not None else None
            print(
                f"partition={record.partition()} key={key} x-message-id={headers.get('x-message-id')} "
                f"x-topic={headers.get('x-topic')} x-idempotency-key={headers.get('x-idempotency-key')} "
                f"x-bridge={headers.get('x-bridge')} {record.value().decode()}"
            )
    finally:
        consumer.close()
    if got < count:
        sys.exit(f"received {got} of {count} records from {OUT_TOPIC}")


def offsets(group):
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "enable.auto.commit": False})
    try:
        ends = {}
        for topic in (IN_TOPIC, OUT_TOPIC):
            metadata = consumer.list_topics(topic, timeout=10)
            partitions = [TopicPartition(topic, p) for p in metadata.topics[topic].partitions]
            ends[topic] = sum(consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in partitions)
            if topic == IN_TOPIC:
                committed = sum(max(tp.offset, 0) for tp in consumer.committed(partitions, timeout=10))
    finally:
        consumer.close()
    print(f"in_end={ends[IN_TOPIC]} committed={committed} out_end={ends[OUT_TOPIC]}")


def teardown():
    client = admin()
    for topic, future in client.delete_topics([IN_TOPIC, OUT_TOPIC], operation_timeout=30).items():
        try:
            future.result()
        except KafkaException as error:
            print(f"topic {topic}: {error}", file=sys.stderr)
    for group, future in client.delete_consumer_groups([GROUP], request_timeout=30).items():
        try:
            future.result()
        except KafkaException as error:
            print(f"group {group}: {error}", file=sys.stderr)
    print(f"deleted {IN_TOPIC}, {OUT_TOPIC} and the group {GROUP}")


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    argument = sys.argv[2] if len(sys.argv) > 2 else None
    if command == "setup":
        setup()
    elif command == "send":
        send(int(argument or 3))
    elif command == "receive":
        receive(int(argument or 3))
    elif command == "offsets":
        offsets(argument or GROUP)
    elif command == "teardown":
        teardown()
    else:
        sys.exit(__doc__)

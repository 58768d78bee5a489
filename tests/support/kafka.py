"""A real Kafka broker's topics through confluent-kafka: create a topic, produce records to given partitions (each
acknowledged by the broker), read a partition's offset range back, and a partition's low and high watermarks."""

from __future__ import annotations

import time
from collections.abc import Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

TIMEOUT = 30.0
# what a partition's leader answers for a moment after a start (confluent-kafka does not flag them retriable)
LEADER_MOVING = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    client = admin_client(bootstrap)  # kept until the answer: a client destroyed early fails its futures
    (future,) = client.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values()
    future.result(timeout=TIMEOUT)


def delete_topic(bootstrap: str, topic: str) -> None:
    """Deletes the topic, if it is there (the tests' topics on the shared broker)."""
    client = admin_client(bootstrap)
    (future,) = client.delete_topics([topic]).values()
    try:
        future.result(timeout=TIMEOUT)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    """Grows the topic to ``total`` partitions."""
    client = admin_client(bootstrap)
    (future,) = client.create_partitions([NewPartitions(topic, total)]).values()
    future.result(timeout=TIMEOUT)


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    """What the topic's retention does: the partition's records below offset ``before`` are deleted and its first
    offset moves up to it (Kafka's DeleteRecords)."""
    client = admin_client(bootstrap)
    (future,) = client.delete_records([TopicPartition(topic, partition, before)]).values()
    future.result(timeout=TIMEOUT)


def partitions_of(bootstrap: str, topic: str, count: int) -> list[int]:
    """The topic's partitions once the broker lists ``count`` of them (its metadata follows the controller's a
    moment after a change), or as it lists them after TIMEOUT seconds."""
    client = admin_client(bootstrap)
    deadline = time.monotonic() + TIMEOUT
    while True:
        found = sorted(client.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions)
        if len(found) == count or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, records: Sequence[tuple[int, str]]) -> list[tuple[int, int, str]]:
    """Sends each (partition, value), waits for every acknowledgement (acks=all), and returns (partition, offset,
    value) of each record as the broker acknowledged it; raises if the broker refused one."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    acked: list[tuple[int, int, str]] = []
    errors: list[str] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            acked.append((message.partition(), message.offset(), message.value().decode()))

    for partition, value in records:
        producer.produce(topic, value.encode(), partition=partition, on_delivery=delivered)
    left = producer.flush(TIMEOUT)
    assert not errors and left == 0, f"{topic}: {left} records unacknowledged, errors {errors[:3]}"
    return acked


def read_range(bootstrap: str, topic: str, partition: int, start: int, end: int) -> list[tuple[int, str]]:
    """(offset, value) of the records of one partition from ``start`` to ``end`` (exclusive), read by offset with
    no consumer group position (assign, not subscribe)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txdag-tests", "enable.auto.commit": False,
                         "auto.offset.reset": "error"})
    out: list[tuple[int, str]] = []
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + TIMEOUT
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline and start < end:
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, f"{topic}/{partition}: {message.error()}"
            if message.offset() < end:
                out.append((message.offset(), message.value().decode()))
    finally:
        consumer.close()
    return out


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    """The offsets consumer group ``group`` has committed for each partition (-1001: none), as
    kafka-consumer-groups.sh --describe shows them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=TIMEOUT)
        return [tp.offset for tp in sorted(found, key=lambda tp: tp.partition)]
    finally:
        consumer.close()


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """The partition's (low, high) watermarks: its first offset, and the offset its next record will get. Asked
    again while the broker answers with a retriable error (a broker just started may not lead its partitions yet:
    NOT_LEADER_FOR_PARTITION), for up to TIMEOUT seconds."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txdag-tests"})
    deadline = time.monotonic() + TIMEOUT
    try:
        while True:
            try:
                return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT)
            except KafkaException as exc:
                error = exc.args[0]
                if not (error.retriable() or error.code() in LEADER_MOVING) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()

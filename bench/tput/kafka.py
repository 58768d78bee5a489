"""P1 over Kafka (--kafka): the run's own topic on the broker of scripts/kafka.sh, created with a few partitions,
the backlog produced into it round-robin (each record acknowledged by the broker), and the topic and the copy's
consumer group deleted afterwards (the broker is shared: it keeps nothing of the run)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from tput.services import BenchError

TIMEOUT = 60.0


def admin(bootstrap: str):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def load(bootstrap: str, topic: str, partitions: int, tweets: Sequence[str]) -> float:
    """Creates ``topic`` (which must not exist) and sends tweet ``i`` to partition ``i % partitions``, so that
    every partition holds as many (give or take one); returns the seconds the producing took."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)  # kept until the answer: a client destroyed early fails its futures
    (created,) = client.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values()
    created.result(timeout=TIMEOUT)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 20})
    errors: list[str] = []

    def delivered(error, message) -> None:  # type: ignore[no-untyped-def]
        if error is not None:
            errors.append(str(error))

    started = time.perf_counter()
    for i, tweet in enumerate(tweets):
        while True:
            try:
                producer.produce(topic, tweet.encode(), partition=i % partitions, on_delivery=delivered)
                break
            except BufferError:  # the producer's queue is full: let it send
                producer.poll(0.5)
    left = producer.flush(TIMEOUT)
    if left or errors:
        raise BenchError(f"Kafka topic {topic!r} at {bootstrap}: {left} of {len(tweets):,} tweets unacknowledged, "
                         f"errors {errors[:3]}")
    return time.perf_counter() - started


def delete(bootstrap: str, topic: str, groups: Sequence[str]) -> None:
    """Deletes the topic and the consumer groups (KafkaSource's ``txdag-<topology>``) if they are there."""
    from confluent_kafka import KafkaError, KafkaException

    client = admin(bootstrap)
    futures = [*client.delete_topics([topic]).values()]
    if groups:
        futures += client.delete_consumer_groups(list(groups), request_timeout=TIMEOUT).values()
    for future in futures:
        try:
            future.result(timeout=TIMEOUT)
        except KafkaException as exc:
            if exc.args[0].code() not in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.GROUP_ID_NOT_FOUND):
                raise

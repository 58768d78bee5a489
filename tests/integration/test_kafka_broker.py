"""The Kafka broker of scripts/kafka.sh: a real Apache Kafka 4 in KRaft mode, its jars fetched by the set-up.

On the broker scripts/services.sh started (TXDAG_TEST_KAFKA_BOOTSTRAP): a topic of 2 partitions, 100 records
produced with confluent-kafka and read back by offset range from each partition, a partition added and seen; and
Spark's Kafka source (the jars of .run/jars/spark-kafka/ in spark.jars) reading exactly an offset range of each
partition as a batch (startingOffsets/endingOffsets), as a spout's emitter will. That every acknowledged record is
still there after a stop and a start, and after a SIGKILL and a start, is checked on the broker of
tests/integration/test_services_script.py, which starts its own broker (kafka.sh, through services.sh, on free ports)
and stops it anyway: one broker's JVM started for both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.kafka import add_partitions, create_topic, delete_topic, partitions_of, produce, read_range, watermarks

ROOT = Path(__file__).resolve().parents[2]
SPARK_KAFKA_JARS = ROOT / ".run" / "jars" / "spark-kafka"


def topic_name(prefix: str) -> str:
    return f"txdag-test-{prefix}"


@pytest.fixture
def topic(kafka_bootstrap: str, prefix: str) -> Iterator[str]:
    """A topic name of the test's own on the shared broker; the topic is deleted afterwards."""
    yield topic_name(prefix)
    delete_topic(kafka_bootstrap, topic_name(prefix))


def test_a_topic_of_two_partitions_read_back_by_offset_range_and_a_partition_added(kafka_bootstrap, topic):
    create_topic(kafka_bootstrap, topic, 2)
    assert partitions_of(kafka_bootstrap, topic, 2) == [0, 1]

    acked = produce(kafka_bootstrap, topic, [(i % 2, f"record-{i}") for i in range(100)])
    assert sorted(acked) == sorted((i % 2, i // 2, f"record-{i}") for i in range(100)), "offsets not as produced"
    assert watermarks(kafka_bootstrap, topic, 0) == (0, 50)
    assert watermarks(kafka_bootstrap, topic, 1) == (0, 50)

    assert read_range(kafka_bootstrap, topic, 0, 10, 35) == [(k, f"record-{2 * k}") for k in range(10, 35)]
    assert read_range(kafka_bootstrap, topic, 1, 0, 50) == [(k, f"record-{2 * k + 1}") for k in range(50)]
    assert read_range(kafka_bootstrap, topic, 1, 49, 50) == [(49, "record-99")]

    add_partitions(kafka_bootstrap, topic, 3)
    assert partitions_of(kafka_bootstrap, topic, 3) == [0, 1, 2]
    assert produce(kafka_bootstrap, topic, [(2, "in-the-new-partition")]) == [(2, 0, "in-the-new-partition")]
    assert read_range(kafka_bootstrap, topic, 2, 0, 1) == [(0, "in-the-new-partition")]
    assert watermarks(kafka_bootstrap, topic, 0) == (0, 50), "adding a partition changed an old one"


# Run in a Python of its own: spark.jars is read when a session starts, and the Spark tests share one session.
SPARK_READ = """
import json, sys
from txdag.spark.session import local_session
bootstrap, topic, jars, starting, ending = sys.argv[1:]
spark = local_session("txdag-kafka-test", master="local[1]", conf={"spark.jars": jars})
spark.sparkContext.setLogLevel("ERROR")
rows = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
        .option("startingOffsets", starting).option("endingOffsets", ending).load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value").collect())
print(json.dumps(sorted([r.partition, r.offset, r.value] for r in rows)))
spark.stop()
"""


def test_spark_reads_exactly_an_offset_range_of_each_partition(kafka_bootstrap, topic):
    jars = sorted(SPARK_KAFKA_JARS.glob("*.jar"))
    names = {p.name.rsplit("-", 1)[0] for p in jars}
    assert {"spark-sql-kafka-0-10_2.13", "kafka-clients"} <= names, \
        f"Spark's Kafka source is not in {SPARK_KAFKA_JARS} ({names}): run bash scripts/setup.sh"
    create_topic(kafka_bootstrap, topic, 2)
    produce(kafka_bootstrap, topic, [(i % 2, f"record-{i}") for i in range(40)])
    starting, ending = {topic: {"0": 5, "1": 0}}, {topic: {"0": 12, "1": 3}}

    done = subprocess.run([sys.executable, "-c", SPARK_READ, kafka_bootstrap, topic, ",".join(map(str, jars)),
                           json.dumps(starting), json.dumps(ending)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(
                              ROOT / "include")})
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert rows == [[0, k, f"record-{2 * k}"] for k in range(5, 12)] + [[1, k, f"record-{2 * k + 1}"]
                                                                       for k in range(3)]

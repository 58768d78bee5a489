"""The Kafka broker of scripts/kafka.sh: a real Apache Kafka 4 in KRaft mode, its jars fetched by the set-up.

On the broker scripts/services.sh started (TXDAG_TEST_KAFKA_BOOTSTRAP): a topic of 2 partitions, 100 records
produced with confluent-kafka and read back by offset range from each partition, a partition added and seen; and
Spark's Kafka source (the jars of .run/jars/spark-kafka/ in spark.jars) reading exactly an offset range of each
partition as a batch (startingOffsets/endingOffsets), as a spout's emitter will. On a broker of the test's own
(kafka.sh on free ports): every acknowledged record is still there after kafka.sh stop and start, and after a
SIGKILL and a start.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.kafka import add_partitions, create_topic, delete_topic, partitions_of, produce, read_range, watermarks
from support.servers import free_port

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


class Broker:
    """scripts/kafka.sh on ports of the test's own; its .run/kafka-<port>/ is removed at the end."""

    def __init__(self) -> None:
        self.port, self.controller_port = free_port(), free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.env = {**os.environ, "TXDAG_KAFKA_PORT": str(self.port),
                    "TXDAG_KAFKA_CONTROLLER_PORT": str(self.controller_port)}
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.dir = ROOT / ".run" / f"kafka-{self.port}"

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "scripts/kafka.sh", *args], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=300)

    def ok(self, *args: str) -> str:
        done = self(*args)
        assert done.returncode == 0, f"kafka.sh {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    def kill(self) -> None:
        """SIGKILL: the broker dies with no chance to write anything out or to shut down cleanly."""
        pid = int((self.dir / "kafka.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)


@pytest.fixture
def broker() -> Iterator[Broker]:
    own = Broker()
    try:
        yield own
    finally:
        own("stop")
        shutil.rmtree(own.dir, ignore_errors=True)


def read_all(bootstrap: str, topic: str) -> list[tuple[int, int, str]]:
    return sorted((p, offset, value) for p in (0, 1)
                  for offset, value in read_range(bootstrap, topic, p, 0, watermarks(bootstrap, topic, p)[1]))


def test_acknowledged_records_survive_a_stop_and_start_and_a_sigkill(broker, prefix):
    broker.ok("start")
    topic = topic_name(prefix)
    create_topic(broker.bootstrap, topic, 2)
    acked = produce(broker.bootstrap, topic, [(i % 2, f"record-{i}") for i in range(100)])
    assert len(acked) == 100

    broker.ok("stop")
    status = broker("status")
    assert status.returncode == 1 and f"127.0.0.1:{broker.port} down" in status.stdout, status.stdout
    broker.ok("start")
    assert partitions_of(broker.bootstrap, topic, 2) == [0, 1], "the topic did not come back"
    assert read_all(broker.bootstrap, topic) == sorted(acked), "records lost across a stop and a start"

    acked += produce(broker.bootstrap, topic, [(i % 2, f"after-restart-{i}") for i in range(20)])
    broker.kill()
    assert broker("status").returncode == 1
    broker.ok("start")
    assert read_all(broker.bootstrap, topic) == sorted(acked), "acknowledged records lost in a crash"
    assert watermarks(broker.bootstrap, topic, 0) == (0, 60)

"""KafkaSource's Spark read: Spark's Kafka source reads exactly the batch's offset ranges on the executors, through
the JobSpec the process task hands spark-submit; the same tuples as the Python read, and the rejections (a value
that is not text, a range the retention deleted) recorded by the job, not dropped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest
from confluent_kafka import Producer
from spark_support import ROOT, load_job
from support.kafka import create_topic, delete_records, delete_topic, partitions_of, produce

from txdag import TransactionAttempt
from txdag.commit.rejections import read_rejections
from txdag.errors import ConfigError
from txdag.spark.runner import run_job
from txdag.spouts import SpoutContext
from txdag.spouts.kafka import KafkaSource, java_client_config
from txdag.staging.store import Staging
from txdag.topology.definition import JobSpec, State
from txdag.txid.healing import classify_name

pytestmark = pytest.mark.integration


@pytest.fixture
def topic(kafka_bootstrap, prefix):
    name = f"txdag-test-{prefix}"
    create_topic(kafka_bootstrap, name, 2)
    partitions_of(kafka_bootstrap, name, 2)
    yield name
    delete_topic(kafka_bootstrap, name)


def test_the_job_reads_the_offset_ranges_on_the_executors_as_python_reads_them(spark, kafka_bootstrap, topic, prefix,
                                                                                redis_client):
    sent = [(i % 2, f"w{i % 5} w{i % 3}") for i in range(30)]
    produce(kafka_bootstrap, topic, sent)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, b"\xc3\x28 broken", partition=1)  # offset 15 of partition 1
    assert producer.flush(30) == 0
    delete_records(kafka_bootstrap, topic, 0, 8)  # offsets 6 and 7 of partition 0 are gone before txid 2 reads them
    configs = {"kafka_default": {"bootstrap.servers": kafka_bootstrap}}
    source = KafkaSource(topic, max_per_partition=6)
    metadata = {"v": 1, "topic": topic, "partitions": {"0": {"from": 8, "to": 12, "lost": [6, 8]},
                                                       "1": {"from": 12, "to": 16}}}  # the broken value last
    tx = TransactionAttempt(2, 1)
    spout = source.build(SpoutContext(prefix, kafka_configs=configs))
    try:
        python = spout.emit_batch(tx, metadata)
    finally:
        spout.close()
    spec = JobSpec.from_json(JobSpec(prefix, tx, metadata, source, (State("words"),)).to_json())
    assert spec.source == source
    rows = spec.source.build(SpoutContext(prefix, kafka_configs=configs)).read(spark, tx, metadata).collect()
    assert sorted((r.id, r.value, r.partition) for r in rows if r.rejected is None) == sorted(
        (r.id, r.value, r.partition) for r in python.records)
    assert sorted((r.id, r.rejected) for r in rows if r.rejected) == sorted((r.id, r.reason) for r in python.rejections)
    assert [r.id for r in python.rejections] == ["0@6", "1@15"] and len(python.records) == 7

    result = run_job(spec, load_job("word_count").process, {"redis_default": redis_client}, spark,
                     kafka_configs=configs)
    assert (result.batch_size, result.rejected) == (10, 2)  # 7 records, 2 lost offsets, 1 value not text
    good = [value for i, (p, value) in enumerate(sent) if (p, i // 2) in {(0, 8), (0, 9), (0, 10), (0, 11),
                                                                           (1, 12), (1, 13), (1, 14)}]
    assert Staging(redis_client, prefix).read(tx) == {"words": dict(Counter(w for v in good for w in v.split()))}
    total, recorded = read_rejections(redis_client, prefix, 10)
    assert total == 2 and {r["id"]: r["reason"] for r in recorded} == {
        "0@6": f"offsets 6 to 7 of partition 0 of Kafka topic {topic!r} were deleted by the topic's retention "
               "before they were read",
        "1@15": "value is not valid UTF-8"}


def test_the_spark_read_logs_in_with_the_connections_librdkafka_sasl_settings(spark, kafka_bootstrap,
                                                                              kafka_sasl_config, topic, prefix):
    """One extra serves both clients: librdkafka's sasl.username/password become the Java client's JAAS login."""
    produce(kafka_bootstrap, topic, [(i % 2, f"v{i}") for i in range(8)])
    metadata = {"v": 1, "topic": topic, "partitions": {"0": {"from": 1, "to": 4}, "1": {"from": 0, "to": 2}}}
    spout = KafkaSource(topic).build(SpoutContext(prefix, kafka_configs={"kafka_default": kafka_sasl_config}))
    rows = spout.read(spark, TransactionAttempt(1, 1), metadata).collect()
    assert sorted((r.id, r.value) for r in rows) == [("0@1", "v2"), ("0@2", "v4"), ("0@3", "v6"), ("1@0", "v1"),
                                                     ("1@1", "v3")]
    # A password the broker refuses: the read halts (ConfigError, not replayed), naming the connection.
    wrong = {**kafka_sasl_config, "sasl.password": "not-the-password"}
    spout = KafkaSource(topic).build(SpoutContext(prefix, kafka_configs={"kafka_default": wrong}))
    with pytest.raises(ConfigError, match="refused the credentials of the Kafka connection 'kafka_default'"):
        spout.read(spark, TransactionAttempt(1, 1), metadata)
    # Java's client refusing a login that librdkafka's passed (settings translated wrongly, or changed meanwhile):
    # the job's error will recur, and the table says why.
    options = {f"kafka.{k}": v for k, v in java_client_config(wrong, "test").items()}
    with pytest.raises(Exception) as refused:
        (spark.read.format("kafka").options(**options).option("assign", json.dumps({topic: [0]}))
         .option("startingOffsets", json.dumps({topic: {"0": 0}}))
         .option("endingOffsets", json.dumps({topic: {"0": 2}}))
         .load().collect())
    verdict = classify_name(type(refused.value).__name__, str(refused.value))
    assert not verdict.transient and "sasl.password" in verdict.because, (verdict, str(refused.value)[:2000])


NO_JARS = """
import sys
from txdag import TransactionAttempt
from txdag.errors import ConfigError
from txdag.spark.session import local_session
from txdag.spouts import SpoutContext
from txdag.spouts.kafka import KafkaSource
spark = local_session("txdag-no-kafka", master="local[1]")
spark.sparkContext.setLogLevel("ERROR")
metadata = {"v": 1, "topic": "t", "partitions": {"0": {"from": 0, "to": 2}}}
spout = KafkaSource("t").build(SpoutContext("wc", kafka_configs={"kafka_default": {"bootstrap.servers": sys.argv[1]}}))
try:
    spout.read(spark, TransactionAttempt(3, 1), metadata)
except ConfigError as exc:
    print(exc)
spark.stop()
"""


def test_a_spark_without_the_kafka_source_names_the_setting_that_adds_it(kafka_bootstrap):
    done = subprocess.run([sys.executable, "-c", NO_JARS, kafka_bootstrap], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT / "include")})
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout.strip().splitlines()[-1]
    assert said.startswith("topology 'wc' txid 3 attempt 1: the job's Spark has no Kafka source (")
    assert "spark_conf={'spark.jars.packages': 'org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0'}" in said

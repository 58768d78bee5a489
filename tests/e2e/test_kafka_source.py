"""KafkaSource through the real Airflow path: a topic on the real broker, filled by a plain Kafka client, counted by
the word count job in both Spark modes (spark-submit with Spark's Kafka source in spark.jars; the Spark Connect
server of scripts/spark-connect.sh, which has it), the broker named by the Kafka provider's ``kafka`` connection.
Two txids in flight; a partition added and records produced between runs; a committed run cleared from the UI.
An opaque retry that reads another batch: the later txid is replayed by txdag itself. Then the faults a Kafka user
meets, with a producer writing all the while: a Spark driver killed, the broker restarted mid-run, a partition added
mid-run, and `txdag replay --from`. Counts equal a recount of what the topic holds, read back by offset; commits
ordered with no gap."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections import Counter

import pytest
import redis
from access import KAFKA_BOOTSTRAP
from conftest import REPO, AirflowInstance
from e2e_runs import (
    RUN_TIMEOUT,
    Writer,
    kill_spark_driver,
    run_of_txid,
    trigger_until_drained,
    txdag_replay,
    wait_runs,
    wait_spark_driver,
)
from support.kafka import (
    add_partitions,
    create_topic,
    delete_topic,
    group_offsets,
    partitions_of,
    produce,
    read_range,
    watermarks,
)
from support.runs import check_commits, counts

from txdag.airflow.api import unique_run_id

pytestmark = pytest.mark.own_topologies  # no wait for the hour's scheduled runs (conftest)

MODES = {"kafka_submit": "submit", "kafka_connect": "connect"}
JARS = ",".join(sorted(str(p) for p in (REPO / ".run" / "jars" / "spark-kafka").glob("*.jar")))


def dag_file(topology: str, mode: str, topic: str, max_per_partition: int = 4, retry_delay: int = 5) -> str:
    conf = {"spark.jars": JARS} if mode == "submit" else {}
    return f"""# An Airflow DAG: a topology over a Kafka topic (the broker: the connection kafka_default).
from datetime import timedelta

from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.spouts.kafka import KafkaSource
from txdag.topology.definition import State

topology = TransactionalTopology(
    {topology!r},
    source=KafkaSource({topic!r}, max_per_partition={max_per_partition}),
    job={str(REPO / "spark_jobs" / "word_count.py")!r},
    states=[State("words", namespace={topology + ":words"!r})],
    spark_mode={mode!r},
    spark_conf={conf!r},
    max_active_transactions=2,
    retry_delay=timedelta(seconds={retry_delay}),
)
dag = render(topology, dag_file=__file__)
"""


def topic_counts(topic: str, partitions: int) -> dict[str, int]:
    """The ground truth: every record the topic holds, read back by offset, its words counted."""
    values = [value for p in range(partitions)
              for _, value in read_range(KAFKA_BOOTSTRAP, topic, p, 0, watermarks(KAFKA_BOOTSTRAP, topic, p)[1])]
    return dict(Counter(w for v in values for w in v.split(" ") if w))


@pytest.fixture
def topic():
    name = f"txdag-e2e-{uuid.uuid4().hex[:8]}"
    create_topic(KAFKA_BOOTSTRAP, name, 2)
    partitions_of(KAFKA_BOOTSTRAP, name, 2)
    yield name
    delete_topic(KAFKA_BOOTSTRAP, name)


@pytest.mark.parametrize("topology", list(MODES))
def test_a_kafka_topic_is_counted_exactly_once_through_airflow(airflow: AirflowInstance, store_of, topic: str,
                                                               topology: str) -> None:
    assert JARS, "no Spark Kafka source jars in .run/jars/spark-kafka: run bash scripts/setup.sh"
    produce(KAFKA_BOOTSTRAP, topic, [(i % 2, f"w{i % 5} w{i % 3}") for i in range(24)])
    airflow.add_dag_file(f"{topology}.py", dag_file(topology, MODES[topology], topic))
    airflow.api.wait_dag_parsed(topology, timeout=120)
    airflow.api.unpause(topology)

    trigger_until_drained(airflow, topology, at_once=2)  # 12 records a partition, 4 a txid: txids 1-3
    check_commits(store_of(topology), 3)
    add_partitions(KAFKA_BOOTSTRAP, topic, 3)
    partitions_of(KAFKA_BOOTSTRAP, topic, 3)
    produce(KAFKA_BOOTSTRAP, topic, [(i % 3, f"w{i % 4} late") for i in range(12)])  # 4 a partition: txid 4
    trigger_until_drained(airflow, topology, at_once=2)
    records = check_commits(store_of(topology), 4)
    assert records[4].metadata["partitions"] == {"0": {"from": 12, "to": 16}, "1": {"from": 12, "to": 16},
                                                 "2": {"from": 0, "to": 4}}
    state = redis.Redis.from_url(airflow.redis_url)
    counted = counts(state, f"{topology}:words")
    assert counted == topic_counts(topic, 3)
    ends = [watermarks(KAFKA_BOOTSTRAP, topic, p)[1] for p in range(3)]
    assert group_offsets(KAFKA_BOOTSTRAP, f"txdag-{topology}", topic, 3) == ends  # Kafka's tools see no lag

    run1 = run_of_txid(records, 1)
    airflow.api.clear_run(topology, run1)  # the UI's clear of a committed run: nothing is counted twice
    assert airflow.api.wait_run(topology, run1, timeout=600) == "success"
    assert store_of(topology).read_txid(1)[0].metadata == records[1].metadata
    assert counts(state, f"{topology}:words") == counted


def check_offsets(records: dict, topic: str, partitions: int) -> None:
    """The committed txids' batches cover every partition from offset 0 to its end, each starting where the one
    before it on that partition ended: no offset skipped, none read twice (a lost range would be a rejection)."""
    ranges: dict[str, list[tuple[int, int, int]]] = {str(p): [] for p in range(partitions)}
    for txid in sorted(records):
        for name, part in records[txid].metadata["partitions"].items():
            assert not part.get("lost"), f"txid {txid} recorded offsets of partition {name} as lost: {part}"
            assert part["to"] >= part["from"], f"txid {txid} read partition {name} backwards: {part}"
            if part["to"] > part["from"]:
                ranges[name].append((part["from"], part["to"], txid))
    seen = {t: (r.attempt, r.metadata["partitions"]) for t, r in sorted(records.items())}
    for name, spans in ranges.items():
        end = watermarks(KAFKA_BOOTSTRAP, topic, int(name))[1]
        starts = [0] + [to for _, to, _ in spans]
        assert [f for f, _, _ in spans] + [end] == starts, f"partition {name} (end {end}): {spans}; txids {seen}"


def restart_broker() -> float:
    """scripts/kafka.sh stop, then start, of the tests' broker (its data kept); returns how long it was away."""
    env = {**os.environ, "TXDAG_KAFKA_PORT": KAFKA_BOOTSTRAP.rsplit(":", 1)[1]}
    started = time.monotonic()
    for action in ("stop", "start"):
        done = subprocess.run(["bash", str(REPO / "scripts" / "kafka.sh"), action], env=env, capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, f"kafka.sh {action}: {done.stdout}{done.stderr}"
    return time.monotonic() - started


def test_a_kafka_topic_stays_exact_through_faults_while_a_producer_writes(airflow: AirflowInstance, store_of,
                                                                          topic: str) -> None:
    """spark-submit mode, two txids in flight, a plain producer writing all along: txid 1's Spark driver killed
    (its retry reads the same offsets), the broker stopped and started while txid 2's job runs, a partition added
    while txids 3 and 4 are in flight; once the topic is drained, `txdag replay --from 1` while the producer writes
    again, then the records written meanwhile drained in new txids."""
    topology = "kafka_faults"
    # 120 records a partition, 60 a txid: txids 1 and 2 both have a batch however fast their runs coordinate
    produce(KAFKA_BOOTSTRAP, topic, [(i % 2, f"w{i % 5} w{i % 3}") for i in range(240)])
    airflow.add_dag_file(f"{topology}.py", dag_file(topology, "submit", topic, max_per_partition=60))
    airflow.api.wait_dag_parsed(topology, timeout=120)
    airflow.api.unpause(topology)
    partitions = [2]

    def write(n: int) -> None:
        produce(KAFKA_BOOTSTRAP, topic, [(i % partitions[0], f"w{i % 7} p{i % partitions[0]}")
                                         for i in range(n * 3, n * 3 + 3)])
    producer = Writer(write, every=0.5)
    producer.start()

    def trigger_two() -> list[str]:
        return [airflow.api.trigger(topology, run_id=unique_run_id(topology)) for _ in range(2)]

    runs = trigger_two()  # txids 1 and 2
    kill_spark_driver(topology, 1)
    wait_spark_driver(topology, 2)  # started beside txid 1's: the broker goes while it runs
    away = restart_broker()
    wait_runs(airflow, topology, runs)
    runs = trigger_two()  # txids 3 and 4: the partition appears while they are in flight
    add_partitions(KAFKA_BOOTSTRAP, topic, 3)
    partitions_of(KAFKA_BOOTSTRAP, topic, 3)
    partitions[0] = 3
    wait_runs(airflow, topology, runs)
    written = producer.stop()
    trigger_until_drained(airflow, topology, at_once=2)
    store = store_of(topology)
    last = store.read_topology()[0].committed_txid
    records = check_commits(store, last)
    assert records[1].attempt >= 2, "the killed driver's txid committed on its first attempt"
    assert "2" in records[last].metadata["partitions"], "the partition added mid-run was never read"
    check_offsets(records, topic, 3)
    state = redis.Redis.from_url(airflow.redis_url)
    counted = counts(state, f"{topology}:words")
    assert counted == topic_counts(topic, 3), {t: (r.attempt, r.metadata) for t, r in records.items()}
    print(f"\nproducer: {written * 3} records while txids ran; broker away {away:.1f} s; txids 1..{last} committed, "
          f"attempts {[records[t].attempt for t in sorted(records)]}")

    producer = Writer(write, every=0.5)  # writing again while every txid is replayed
    producer.start()
    try:
        out = txdag_replay(airflow, topology, 1)  # every txid again, from the metadata ZooKeeper keeps
        assert f"txid {last}: clearing run" in out, out
        wait_runs(airflow, topology, [run_of_txid(records, t) for t in records])
    finally:
        written = producer.stop()
    replayed = check_commits(store, last)  # the replayed runs took no new records: each re-emitted its own txid
    assert all(replayed[t].attempt > records[t].attempt for t in records), "a cleared run did not run again"
    assert {t: r.metadata for t, r in replayed.items()} == {t: r.metadata for t, r in records.items()}
    assert counts(state, f"{topology}:words") == counted
    assert written > 0, "the producer wrote nothing while the replay ran"
    trigger_until_drained(airflow, topology, at_once=2)  # what it wrote meanwhile, in new txids
    after = store.read_topology()[0].committed_txid
    assert after > last
    check_offsets(check_commits(store, after), topic, 3)
    assert counts(state, f"{topology}:words") == topic_counts(topic, 3)
    print(f"replay: {written * 3} records written meanwhile, then txids {last + 1}..{after}")


def test_an_opaque_retry_with_another_batch_replays_the_later_txid_by_itself(airflow: AirflowInstance, store_of,
                                                                            topic: str) -> None:
    """Issue 36 item 2, through Airflow: txid 1's Spark job dies (process:kafka_reemit:1:1) and its retry waits 30 s;
    meanwhile txid 2 takes the next records and more records arrive. The retry plans txid 1 again from the start
    and reads more (opaque): txid 2 was planned on the old batch, so txdag marks it for an automatic replay and,
    once txid 1 commits, replays its run; it is re-emitted after txid 1's new batch. Nobody steps in; exact."""
    topology, store = "kafka_reemit", store_of("kafka_reemit")
    produce(KAFKA_BOOTSTRAP, topic, [(i % 2, f"w{i % 5} first") for i in range(10)])
    airflow.add_dag_file(f"{topology}.py", dag_file(topology, "submit", topic, max_per_partition=20, retry_delay=30))
    airflow.api.wait_dag_parsed(topology, timeout=120)
    airflow.api.unpause(topology)

    def allocated(txid: int) -> None:
        deadline = time.monotonic() + 120
        while not (store.client.exists(store.path) and store.read_topology()[0].last_txid >= txid):
            assert time.monotonic() < deadline, f"txid {txid} was never allocated"
            time.sleep(0.3)

    first = airflow.api.trigger(topology, run_id=unique_run_id(topology))
    deadline = time.monotonic() + 300
    while f"process-{topology}-1-1" not in airflow.fired_faults():  # txid 1's first try died; its retry waits 30 s
        assert time.monotonic() < deadline, "txid 1's Spark job never reached its fault point"
        time.sleep(0.3)
    planned = store.read_txid(1)[0].metadata  # type: ignore[index]
    produce(KAFKA_BOOTSTRAP, topic, [(i % 2, f"w{i % 3} second") for i in range(10)])
    second = airflow.api.trigger(topology, run_id=unique_run_id(topology))
    allocated(2)
    produce(KAFKA_BOOTSTRAP, topic, [(i % 2, f"w{i % 4} third") for i in range(10)])
    assert airflow.api.wait_run(topology, first, timeout=RUN_TIMEOUT) == "success"
    deadline = time.monotonic() + RUN_TIMEOUT
    while (got := store.read_txid(2)[0]).status.value != "committed":  # type: ignore[index]
        assert time.monotonic() < deadline, f"txid 2 never committed: {got}"
        time.sleep(0.5)
    assert airflow.api.wait_run(topology, second, timeout=RUN_TIMEOUT) == "success"
    trigger_until_drained(airflow, topology, at_once=2)
    records = check_commits(store)
    assert records[1].attempt == 2 and records[1].metadata != planned, "txid 1's retry read another batch"
    assert any("re-emitted automatically once txid 1 commits" in (h.error or "") for h in records[2].history), \
        "txid 2 was not marked for an automatic replay"
    assert records[2].attempt >= 2 and records[2].run_id == second
    assert counts(redis.Redis.from_url(airflow.redis_url), f"{topology}:words") == topic_counts(topic, 2)
    print(f"\ntxid 1 planned {planned}, then {records[1].metadata}; txid 2 attempts {records[2].attempt}: "
          f"{[(h.attempt, h.status.value) for h in records[2].history]}")

"""A user's own sources on the loopback cluster (issue 32): the guide's example spout (examples/landing_files.py,
saved beside the DAG files as a module of the user's project, support.loopback.user_project) and a Kafka topic on
the cluster's broker, filled by a plain Kafka client. Each runs through Airflow's CeleryExecutor, spark-submit to the
standalone master (executors whose Python has no txdag and no module of the user's: both reads are Spark's own), its
counts on the Redis Cluster; two runs of each at a time until both sources are drained. The counts equal a recount
of the files and of the topic read back by offset; every txid is committed once, in txid order; the topic's
consumer group shows no lag to Kafka's tools.
"""

from __future__ import annotations

import time
from collections import Counter

from access import ZK_AUTH
from support.kafka import create_topic, group_offsets, partitions_of, produce, read_range, watermarks
from support.loopback import LANDING, TOPIC, USER_TOPOLOGIES
from support.runs import check_commits, counts, drain

from txdag.zk.client import close_zk, connect_zk
from txdag.zk.store import TransactionStore

FILES = {"2026-11-28T10.txt": "the cat sat\non the mat\n", "2026-11-28T11.txt": "the dog\r\n\r\nthe end",
         "2026-11-28T12.txt": "cat dog cat\n", "2026-11-28T13.txt": "one more line\n", "2026-11-28T14.txt": "mat\n"}
RECORDS = [(i % 2, f"w{i % 5} w{i % 3}") for i in range(24)]  # 12 a partition, 6 a txid: txids 1 and 2
RUN_TIMEOUT = 900


def land(name: str, text: str) -> None:
    """A writer lands a file whole: written under a hidden name, then renamed in."""
    hidden = LANDING / f".{name}"
    hidden.write_text(text, newline="")
    hidden.rename(LANDING / name)


def test_a_users_spout_and_a_kafka_topic_are_exactly_once_on_the_cluster(addresses, cluster_api, states) -> None:
    bootstrap = addresses["TXDAG_CLUSTER_KAFKA_BOOTSTRAP"]
    create_topic(bootstrap, TOPIC, 2)
    assert partitions_of(bootstrap, TOPIC, 2) == [0, 1]
    produce(bootstrap, TOPIC, RECORDS)
    for name, text in FILES.items():
        land(name, text)
    for dag in USER_TOPOLOGIES:
        cluster_api.wait_dag_parsed(dag, timeout=180)

    started = time.monotonic()
    runs = drain(cluster_api, list(USER_TOPOLOGIES), at_once=2, timeout=RUN_TIMEOUT)
    print(f"drained in {time.monotonic() - started:.0f} s: runs {({dag: len(r) for dag, r in runs.items()})}")

    client = connect_zk(addresses["TXDAG_CLUSTER_ZK_HOSTS"], auth=ZK_AUTH)
    try:
        landing = check_commits(TransactionStore(client, "landing_words"), 3)  # 5 files, 2 a txid
        kafka = check_commits(TransactionStore(client, "kafka_words"), 2)
    finally:
        close_zk(client)
    assert [landing[t].metadata["files"] for t in (1, 2, 3)] == [list(FILES)[0:2], list(FILES)[2:4], list(FILES)[4:]]
    halves = [{"from": 0, "to": 6}, {"from": 6, "to": 12}]
    assert [kafka[t].metadata["partitions"] for t in (1, 2)] == [{"0": half, "1": half} for half in halves]

    lines = [line for text in FILES.values() for line in text.splitlines()]
    assert counts(states, "landing_words") == dict(Counter(w for line in lines for w in line.split(" ") if w))
    ends = [watermarks(bootstrap, TOPIC, p)[1] for p in range(2)]
    values = [value for p in range(2) for _, value in read_range(bootstrap, TOPIC, p, 0, ends[p])]
    assert sorted(values) == sorted(v for _, v in RECORDS)  # the ground truth is what the topic holds
    assert counts(states, "kafka_words") == dict(Counter(w for v in values for w in v.split(" ") if w))
    assert group_offsets(bootstrap, "txdag-kafka_words", TOPIC, 2) == ends == [12, 12]

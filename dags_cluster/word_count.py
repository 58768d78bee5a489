"""Airflow DAG of dags/word_count.py's topology (the opaque word count) on the loopback cluster of
scripts/cluster.sh: the sentences stay on the single Redis of ``redis_default``, the counts go to the Redis Cluster
of ``redis_cluster``, spark-submit to ``spark_cluster`` with txdag shipped (see tweets_analytics.py here).
"""

import json
import os

from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, StreamsSource

topology = TransactionalTopology(
    "word_count",
    source=StreamsSource(streams=["sentences:0", "sentences:1"], opaque=True, max_per_partition=40),
    job="spark_jobs/word_count.py",
    states=[State("words", kind="opaque", namespace="word_count")],
    max_active_transactions=2,
    schedule="@hourly",
    redis_conn_id="redis_cluster",
    spark_conn_id="spark_cluster",
    spark_conf=json.loads(os.environ.get("TXDAG_CLUSTER_SPARK_CONF") or "{}"),
)
dag = render(topology, dag_file=__file__)

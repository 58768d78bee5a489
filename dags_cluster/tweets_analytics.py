"""Airflow DAG of dags/tweets_analytics.py's topology on the loopback cluster of scripts/cluster.sh (issue 17): the
tweets stay on the single Redis of ``redis_default``, the states go to the Redis Cluster of ``redis_cluster``, the
process task's spark-submit goes to the standalone master of ``spark_cluster``, and the job ships txdag to
executors that do not have it (``TXDAG_CLUSTER_SPARK_CONF``: what `txdag pyfiles --json` printed, which
cluster.sh gives the Airflow components). On real hosts, write those settings here instead (docs/operations.md,
"From the loopback cluster to real hosts"). tests/unit/airflow/test_demo_dags.py checks that only they differ.
"""

import json
import os

from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.analytics.tweets import MARKER_KEY
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology(
    "tweets_analytics",
    source=TweetsSource(max_transaction_size=100),
    job="spark_jobs/tweets_analytics.py",
    states=[
        State("users"),
        State("hashtags"),
        State("users_hashtags", key_fields=2, separator=":"),
    ],
    marker_key=MARKER_KEY,
    max_active_transactions=2,
    schedule="@hourly",
    redis_conn_id="redis_cluster",
    spark_conn_id="spark_cluster",
    spark_conf=json.loads(os.environ.get("TXDAG_CLUSTER_SPARK_CONF") or "{}"),
)
dag = render(topology, dag_file=__file__)

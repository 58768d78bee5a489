"""Airflow DAG of the trending hashtags (seed 001's windows over batches) over the tweets at keys 1..N: each
txid's commit closes a window of the last 3 batches; the top 10 hashtags of it are the state ``trending``."""

from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology(
    "trending_hashtags",
    source=TweetsSource(max_transaction_size=100),
    job="spark_jobs/trending_hashtags.py",
    states=[
        State("hashtag_counts", namespace="trending_hashtags:counts"),
        State("trending", key_fields=0, namespace="trending_hashtags:top"),
    ],
    max_active_transactions=2,
    schedule="@hourly",
)
dag = render(topology, dag_file=__file__)

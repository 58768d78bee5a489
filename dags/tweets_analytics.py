"""Airflow DAG of seed 000's tweets analytics: users, hashtags and user-hashtag pairs over tweets at keys 1..N."""

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
)
dag = render(topology, dag_file=__file__)

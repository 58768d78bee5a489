"""Airflow DAG of the demo's warm mode (bash scripts/demo.sh, its default): dags/tweets_analytics.py's topology with
spark_mode="connect", its process task run against the Spark Connect server of scripts/spark-connect.sh.

scripts/demo.sh points the DAG folder here; `--spark-submit` points it at dags/ (spark_mode "submit"). The two
files define one topology and differ only in spark_mode (tests/unit/airflow/test_demo_dags.py checks it).
"""

from txdag import TransactionalTopology
from txdag.airflow import render
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
    marker_key="LAST_COMMITED_TRANSACTION",
    max_active_transactions=2,
    schedule="@hourly",
    spark_mode="connect",
)
dag = render(topology, dag_file=__file__)

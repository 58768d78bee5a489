"""Airflow DAG of seed 003's TransactionalGlobalCount: one count per batch, summed and stored with its txid."""

from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology(
    "global_count",
    source=TweetsSource(prefix="global_count:", max_transaction_size=50),
    job="spark_jobs/global_count.py",
    states=[State("global_count", key_fields=0)],
    max_active_transactions=2,
    schedule="@daily",
)
dag = render(topology, dag_file=__file__)

"""Airflow DAG of a topology with a seed 002 stateful step, for the e2e tests: running word counts kept in a
KeyValueState."""

from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import KeyValue, State, TweetsSource

topology = TransactionalTopology(
    "e2e_stateful",
    source=TweetsSource(max_transaction_size=40, prefix="stateful:"),
    job="jobs/running_counts.py",
    states=[State("running_sum", key_fields=0, namespace="e2e_stateful:running_sum")],
    key_values=[KeyValue("counts")],
    max_active_transactions=2,
    schedule=None,
)
dag = render(topology, dag_file=__file__)

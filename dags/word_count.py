"""Airflow DAG of seed 004's word count: an opaque partitioned spout over Redis Streams into an OpaqueMap."""

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
)
dag = render(topology, dag_file=__file__)

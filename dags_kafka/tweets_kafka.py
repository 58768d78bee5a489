"""Airflow DAG of the Kafka demo (bash scripts/demo.sh --kafka): seed 000's tweets analytics over the Kafka topic
``tweets`` (Storm's TransactionalKafkaSpout: a replayed txid reads the same offsets), warm Spark.

The broker is the connection kafka_default (scripts/airflow.sh points it at scripts/services.sh's broker); the job
reads each txid's offsets with Spark's Kafka source, which scripts/spark-connect.sh puts on its server. The states
are the Redis demo's under ``kafka:``, so that both demos can share a database.
"""

from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.spouts.kafka import KafkaSource
from txdag.topology.definition import State

topology = TransactionalTopology(
    "tweets_kafka",
    source=KafkaSource("tweets", kind="transactional", max_per_partition=50),
    job="spark_jobs/tweets_analytics.py",
    states=[
        State("users", namespace="kafka:users"),
        State("hashtags", namespace="kafka:hashtags"),
        State("users_hashtags", key_fields=2, separator=":", namespace="kafka:users_hashtags"),
    ],
    max_active_transactions=2,
    spark_mode="connect",
)
dag = render(topology, dag_file=__file__)

"""Spark fixtures: one local SparkSession for the whole run (its start is the slow part), the jobs by path."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType

import pytest
import redis
from spark_support import JOB_NAMES, ROOT, TWEET_STATES, load_job
from support.servers import free_port

from txdag import TransactionAttempt
from txdag.spouts.tweets import append_tweets
from txdag.topology.definition import JobSpec, State, TweetsSource


@pytest.fixture(scope="session")
def spark() -> Iterator:
    """A local[2] session on loopback, shared by every in-process Spark test; Spark's Kafka source (the set-up's
    jars in .run/jars/spark-kafka) is in it, for KafkaSource's read."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from txdag.spark.session import local_session

    jars = sorted(str(p) for p in (ROOT / ".run" / "jars" / "spark-kafka").glob("*.jar"))
    assert jars, "no Spark Kafka source jars in .run/jars/spark-kafka: run bash scripts/setup.sh"
    session = local_session("txdag-tests", conf={"spark.jars": ",".join(jars)})
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    # py4j logs at INFO from __del__ at interpreter exit, after pytest closed the streams a logging
    # handler (Airflow's, when its tests ran in the same session) may still point at.
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def connect_url() -> Iterator[str]:
    """A Spark Connect server of the run's own (test_spark_connect, test_trident_connect), started and stopped by the
    project's script on a free port."""
    script = ["bash", str(ROOT / "scripts" / "spark-connect.sh")]
    env = {**os.environ, "TXDAG_SPARK_CONNECT_PORT": str(free_port())}
    started = subprocess.run([*script, "start"], env=env, capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stdout + started.stderr
    url = subprocess.run([*script, "url"], env=env, capture_output=True, text=True, check=True).stdout.strip()
    yield url
    subprocess.run([*script, "stop"], env=env, capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def jobs() -> dict[str, ModuleType]:
    return {name: load_job(name) for name in JOB_NAMES}


@pytest.fixture
def tweets_spec(redis_client: redis.Redis, prefix: str) -> Callable[..., JobSpec]:
    """Writes tweets under ``<prefix>:`` and returns the JobSpec of one batch holding all of them."""

    def make(tweets: Sequence[str | bytes], states: Sequence[State] = TWEET_STATES, txid: int = 1) -> JobSpec:
        ids = append_tweets(redis_client, tweets, prefix=f"{prefix}:")
        metadata = {"v": 1, "from": ids[0] if ids else 1, "quantity": len(ids)}
        source = TweetsSource(max_transaction_size=max(1, len(ids)), prefix=f"{prefix}:")
        return JobSpec(prefix, TransactionAttempt(txid, 1), metadata, source, tuple(states))

    return make

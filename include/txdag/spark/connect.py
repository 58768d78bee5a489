"""Warm Spark: one TransactionAttempt's job run in the calling process against a Spark Connect server.

The same job file as under spark-submit (its ``process`` function; its ``if __name__ == "__main__"`` block does
not run), the same :func:`~txdag.spark.runner.run_job`: read the batch, process, check, stage and seal. Only the
session differs: a Spark Connect client of a long-running server instead of a new application per txid, which
saves the JVM start and the first job's warm-up (seconds per txid; see ../shared/AIRFLOW-FACTS.md).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import cast
from urllib.parse import urlsplit

import redis
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.connect.session import SparkSession as ConnectSession

from txdag.definition import JobSpec
from txdag.errors import ConfigError, ServiceUnavailable
from txdag.jobfile import load_job_module
from txdag.spark.runner import JobResult, Process, run_job
from txdag.state.kv import ProviderConfig

# pyspark.sql.functions build Connect columns only while this is set (pyspark's is_remote()); pyspark sets it for
# good on a Connect session, so it is set around the job and put back after.
CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"
HOW_TO_START = ("start it with `bash scripts/spark-connect.sh start`, or fix the host/port of the spark_connect "
                "connection")


def load_process(job_path: str) -> Process:
    """The ``process`` function of a job file, imported under a name of its own (so its main block stays off)."""
    process = getattr(load_job_module(job_path), "process", None)
    if not callable(process):
        raise ConfigError(f"Spark job {job_path} defines no process(batch) function")
    return process  # type: ignore[no-any-return]


def connect_session(url: str) -> SparkSession:
    """A Spark Connect session, or ServiceUnavailable naming the server and how to start it."""
    address = url.split(";", 1)[0].rstrip("/")
    parsed = urlsplit(address)
    try:  # the client retries a refused connection for minutes: look first
        socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 15002), timeout=10).close()
    except OSError as exc:
        raise ServiceUnavailable(f"Spark Connect server at {address} does not answer ({exc}); {HOW_TO_START}, "
                                 "then retry the task") from None
    try:
        spark = ConnectSession.builder.remote(url).create()  # a session of its own, ended by run_connected
        spark.range(1).collect()  # the client connects lazily: fail here, clearly, not mid-job
    except PySparkException as exc:
        raise ServiceUnavailable(f"Spark Connect server at {address} does not answer ({type(exc).__name__}); "
                                 f"{HOW_TO_START}, then retry the task") from None
    return cast(SparkSession, spark)


def run_connected(spec: JobSpec, job_path: str, clients: Mapping[str, redis.Redis], url: str,
                  kv_configs: Mapping[str, ProviderConfig] | None = None) -> JobResult:
    """Run the job for ``spec`` on the Spark Connect server at ``url``; the client session ends with it."""
    process = load_process(job_path)
    previous = os.environ.get(CONNECT_MODE)
    os.environ[CONNECT_MODE] = "1"
    try:
        spark = connect_session(url)
        try:
            return run_job(spec, process, clients, spark, kv_configs)
        finally:
            spark.stop()
    finally:  # later classic sessions, and spark-submit children, of this process stay classic
        if previous is None:
            os.environ.pop(CONNECT_MODE, None)
        else:
            os.environ[CONNECT_MODE] = previous

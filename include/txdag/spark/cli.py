"""``main(process)``: the entry point of every job under ``spark_jobs/``, as spark-submit runs it.

    spark-submit spark_jobs/word_count.py --job '<JobSpec JSON>'      with TXDAG_REDIS_URLS in the environment

Exit 0 after the seal; on any error one line ``txdag job failed: topology=.. txid=.. attempt=..: <error>`` is
the last thing on stderr and the exit code is 1, so spark-submit and Airflow fail the task with the reason.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import NoReturn

from pyspark.sql import SparkSession

from txdag.errors import TxdagError
from txdag.spark.env import kafka_configs_from_env, redis_clients_from_env
from txdag.spark.runner import Process, run_job
from txdag.spark.session import spark_session
from txdag.topology.definition import JobSpec
from txdag.topology.kvstates import configs_from_env
from txdag.txid.failure import with_missing_module

log = logging.getLogger("txdag.spark")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Process one txdag TransactionAttempt and stage its partials.")
    parser.add_argument("--job", required=True, help="the JobSpec as JSON (what JobSpec.to_json wrote)")
    return parser.parse_args(argv)


def _where(spec: JobSpec | None) -> str:
    if spec is None:
        return "topology=? txid=? attempt=?"
    return f"topology={spec.topology} txid={spec.tx.txid} attempt={spec.tx.attempt}"


def run_main(process: Process, argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """The job as a function returning its exit code (``main`` exits with it)."""
    spec: JobSpec | None = None
    owns_session = SparkSession.getActiveSession() is None
    spark: SparkSession | None = None
    failed: str | None = None
    try:
        spec = JobSpec.from_json(parse_args(argv).job)
        clients = redis_clients_from_env({spec.redis_conn_id, *spec.source.conn_ids()}, environ)
        kv_configs = configs_from_env([k.name for k in spec.key_values], environ)
        kafka_configs = kafka_configs_from_env(spec.source.kafka_conn_ids(), environ)
        spark = spark_session(f"txdag-{spec.topology}-{spec.tx.txid}-{spec.tx.attempt}")
        result = run_job(spec, process, clients, spark, kv_configs, kafka_configs=kafka_configs)
    except Exception as exc:
        if not isinstance(exc, TxdagError):  # ours say what to do; anything else needs its traceback
            log.exception("unexpected error")
        said = with_missing_module(str(exc)).splitlines() or [""]  # one line: the task reads the output's last ones
        failed = f"txdag job failed: {_where(spec)}: {type(exc).__name__}: {said[0]}"
    finally:
        if spark is not None and owns_session:
            spark.stop()
    if failed is not None:
        # After Spark's own shutdown lines: spark-submit's exception carries the output's last lines, and the
        # process task reads this one there (txdag.airflow.operators.submit_failure).
        print(failed, file=sys.stderr, flush=True)
        return 1
    print(result.summary(), flush=True)
    return 0


def main(process: Process, argv: Sequence[str] | None = None) -> NoReturn:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    raise SystemExit(run_main(process, argv))

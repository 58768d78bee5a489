"""The SparkSession of a txdag job: spark-submit's when it launched us, else a small loopback-only local one."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

LOCAL_MASTER = "local[2]"
LOOPBACK = "127.0.0.1"

# Local runs and tests: no UI port, nothing bound outside loopback, few shuffle partitions for small batches.
LOCAL_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": LOOPBACK,
    "spark.driver.host": LOOPBACK,
    "spark.sql.shuffle.partitions": "4",
}


def under_spark_submit(environ: Mapping[str, str] | None = None) -> bool:
    """spark-submit starts the JVM first and hands the Python driver its gateway through the environment."""
    return "PYSPARK_GATEWAY_PORT" in (os.environ if environ is None else environ)


def local_session(
    app_name: str = "txdag", master: str = LOCAL_MASTER, conf: Mapping[str, str] | None = None
) -> SparkSession:
    """A local-mode session on loopback (SPARK_LOCAL_IP defaults to 127.0.0.1; workers use this Python, which has
    txdag and pyarrow: staging is written from the workers)."""
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    # A Python worker (mapInArrow, applyInArrow) starts PYSPARK_PYTHON, else `python3` on PATH, which may lack
    # pyarrow and txdag; spark.pyspark.python below only reaches workers through spark-submit.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**LOCAL_CONF, "spark.pyspark.python": sys.executable, **(conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def spark_session(app_name: str = "txdag") -> SparkSession:
    """Under spark-submit, its session as configured (master, conf, name come from the command line)."""
    if under_spark_submit():
        return SparkSession.builder.getOrCreate()
    return local_session(app_name)

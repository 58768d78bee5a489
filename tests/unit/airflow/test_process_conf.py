"""Cold mode's spark-submit settings (issue 18): what txdag adds to a topology's spark_conf, and that the topology
wins (no Spark, no Airflow scheduler needed)."""

from __future__ import annotations

from pathlib import Path

from txdag.topology.definition import State, TweetsSource
from txdag.topology.topology import TransactionalTopology

JOB = str(Path(__file__).resolve().parents[3] / "spark_jobs" / "tweets_analytics.py")


def topology(**kwargs) -> TransactionalTopology:
    return TransactionalTopology("t", source=TweetsSource(), job=JOB, states=[State("s")], **kwargs)


def test_cold_mode_starts_its_short_lived_driver_jvm_with_c1_only_unless_the_topology_says_otherwise() -> None:
    """A spark-submit per txid: its driver JVM lives for seconds, so C1-only compiling (faster start, less CPU) is the
    default; a topology's spark_conf wins (issue 18, cold mode)."""
    from txdag.airflow import render

    def process_conf(**kwargs) -> dict:
        return next(t for t in render(topology(**kwargs)).tasks if t.task_id == "process").conf

    conf = process_conf()
    assert conf["spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1" and conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.optimizer.canChangeCachedPlanOutputPartitioning"] == "true"  # a stateful step's cache
    mine = process_conf(spark_conf={"spark.driver.extraJavaOptions": "-Xss4m"})
    assert mine["spark.driver.extraJavaOptions"] == "-Xss4m"

"""The recovery timeouts txdag ships (issue 20; docs/operations.md, "Recovery and timeouts"), read statically:
scripts/airflow.sh's airflow.cfg and docker-compose.yaml's Airflow environment set the same values, and they add
up to recovery within ~30 s (Storm's message timeout) while leaving each heartbeat several chances.

bench/recovery.py measures the seconds; this only checks that the two set-ups agree and the arithmetic holds.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from txdag.topology.definition import State, TweetsSource
from txdag.topology.topology import TransactionalTopology

ROOT = Path(__file__).resolve().parents[2]
BUDGET = 30  # seconds: a dead task is retried within this, on top of one txid's normal time
KEYS = ("task_instance_heartbeat_timeout", "task_instance_heartbeat_timeout_detection_interval",
        "scheduler_health_check_threshold", "orphaned_tasks_check_interval")
AIRFLOW_DEFAULTS = {"scheduler_heartbeat_sec": 5.0, "min_heartbeat_interval": 5.0,  # none is changed
                    "triggerer_job_heartbeat_sec": 5.0}


def airflow_sh_scheduler(section: str = "scheduler") -> dict[str, float]:
    """The numeric options of a section of the airflow.cfg that scripts/airflow.sh writes."""
    text = (ROOT / "scripts" / "airflow.sh").read_text()
    body = text.split(f"\n[{section}]\n", 1)[1].split("\n[", 1)[0]
    return {k: float(v) for k, v in re.findall(r"^(\w+) = ([0-9.]+)$", body, re.MULTILINE)}


def compose_scheduler(section: str = "scheduler") -> dict[str, float]:
    env = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())["x-airflow-common"]["environment"]
    prefix = f"AIRFLOW__{section.upper()}__"
    return {k[len(prefix):].lower(): float(v) for k, v in env.items() if k.startswith(prefix) and
            re.fullmatch(r"[0-9.]+", str(v))}


@pytest.fixture(scope="module", params=["scripts/airflow.sh", "docker-compose.yaml"])
def settings(request) -> dict[str, float]:
    return airflow_sh_scheduler() if request.param == "scripts/airflow.sh" else compose_scheduler()


def test_both_set_ups_ship_the_same_recovery_timeouts() -> None:
    sh, compose = airflow_sh_scheduler(), compose_scheduler()
    assert {k: sh.get(k) for k in KEYS} == {k: compose.get(k) for k in KEYS}
    assert all(k in sh for k in KEYS), f"scripts/airflow.sh sets none of {[k for k in KEYS if k not in sh]}"


def test_a_dead_task_is_retried_within_the_budget(settings) -> None:
    """Heartbeat timeout, plus the scheduler's check interval, plus the first retry delay of txdag's tasks."""
    job = str(ROOT / "spark_jobs" / "tweets_analytics.py")
    retry = TransactionalTopology("t", source=TweetsSource(), job=job, states=[State("s")]).retry_delay
    worst = sum(settings[k] for k in ("task_instance_heartbeat_timeout",
                                      "task_instance_heartbeat_timeout_detection_interval")) + retry.total_seconds()
    assert worst <= BUDGET, settings


def test_a_dead_schedulers_tasks_are_failed_over_within_the_budget(settings) -> None:
    assert settings["scheduler_health_check_threshold"] + settings["orphaned_tasks_check_interval"] <= BUDGET


def test_a_dead_triggerers_commit_waits_move_on_within_the_budget() -> None:
    """A waiting commit defers on the triggerer; a restarted triggerer takes over a dead one's triggers once its
    heartbeat (every 5 s) is older than the threshold: both set-ups agree, within the budget, 3 heartbeats or more."""
    sh, compose = airflow_sh_scheduler("triggerer"), compose_scheduler("triggerer")
    threshold = sh["triggerer_health_check_threshold"]
    assert compose["triggerer_health_check_threshold"] == threshold
    assert 3 * AIRFLOW_DEFAULTS["triggerer_job_heartbeat_sec"] <= threshold <= BUDGET


def test_both_set_ups_wake_the_scheduler_as_often() -> None:
    """Each step of a txid waits for the scheduler's next loop; Airflow's 1 s idle sleep cost a 1-tweet txid ~2 s of
    its ~4 s (issue 18, bench/throughput.py P2). Both set-ups ship the same shorter sleep, above a busy loop's."""
    sh, compose = airflow_sh_scheduler(), compose_scheduler()
    assert sh["scheduler_idle_sleep_time"] == compose["scheduler_idle_sleep_time"]
    assert 0.1 <= sh["scheduler_idle_sleep_time"] < 1


def test_each_heartbeat_gets_several_chances(settings) -> None:
    """Too short and a healthy task (or scheduler) whose heartbeats stall for a moment is failed: keep at least three
    heartbeat intervals inside each timeout."""
    assert settings["task_instance_heartbeat_timeout"] >= 3 * AIRFLOW_DEFAULTS["min_heartbeat_interval"]
    assert settings["scheduler_health_check_threshold"] >= 3 * AIRFLOW_DEFAULTS["scheduler_heartbeat_sec"]


def topology(**kwargs) -> TransactionalTopology:
    job = str(ROOT / "spark_jobs" / "tweets_analytics.py")
    return TransactionalTopology("t", source=TweetsSource(), job=job, states=[State("s")], **kwargs)


def test_every_task_gets_the_topologys_execution_timeout() -> None:
    """A hung (not dead) task is failed and retried: heartbeats notice only the dead."""
    from datetime import timedelta

    from txdag.airflow import render

    assert topology().execution_timeout == timedelta(minutes=30)
    dag = render(topology(execution_timeout=timedelta(minutes=5)))
    assert {t.task_id: t.execution_timeout for t in dag.tasks} == dict.fromkeys(
        ("coordinate", "process", "commit"), timedelta(minutes=5))
    assert {t.execution_timeout for t in render(topology(execution_timeout=None)).tasks} == {None}


@pytest.mark.parametrize("bad", [30, 0.5, "30m", "0"])
def test_an_execution_timeout_that_is_not_a_positive_timedelta_is_refused(bad) -> None:
    from datetime import timedelta

    from txdag.errors import ConfigError

    for value in (bad, timedelta(0)):
        with pytest.raises(ConfigError, match="execution_timeout must be a datetime.timedelta > 0"):
            topology(execution_timeout=value)


def test_the_tasks_redis_clients_time_out(monkeypatch) -> None:
    """A hung Redis fails the step (its retry goes on) instead of wedging it; the Spark job's clients too, unless
    their URL sets its own."""
    from txdag.airflow.hooks import airflow_clients
    from txdag.defaults import REDIS_TIMEOUT
    from txdag.spark.env import redis_clients_from_env

    monkeypatch.setenv("AIRFLOW_CONN_SLOW", '{"conn_type": "redis", "host": "127.0.0.1", "port": 1}')
    kwargs = airflow_clients().redis("slow").connection_pool.connection_kwargs
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (REDIS_TIMEOUT, REDIS_TIMEOUT) == (10, 10)
    env = {"TXDAG_REDIS_URLS": '{"a": "redis://127.0.0.1:1/0", "b": "redis://127.0.0.1:1/0?socket_timeout=3"}'}
    clients = redis_clients_from_env(["a", "b"], env)
    assert [clients[c].connection_pool.connection_kwargs["socket_timeout"] for c in "ab"] == [REDIS_TIMEOUT, 3]

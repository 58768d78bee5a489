"""DAG integrity: every file in dags/ imports cleanly and builds coordinate -> process -> commit.

Parsing contacts no service: connections come from AIRFLOW_CONN_* variables that point nowhere in particular.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONNECTIONS = {
    "AIRFLOW_CONN_REDIS_DEFAULT": "redis://127.0.0.1:6391/",
    "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": '{"conn_type": "zookeeper", "host": "127.0.0.1", "port": 2191}',
    "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "local[*]"}',
}
EXPECTED = {"tweets_analytics", "global_count", "word_count", "trending_hashtags"}


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("airflow-home")
    saved = {k: os.environ.get(k) for k in [*CONNECTIONS, "AIRFLOW_HOME", "AIRFLOW__CORE__LOAD_EXAMPLES"]}
    os.environ.update(CONNECTIONS, AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def dagbag(folder: Path):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(str(folder))


def test_every_dag_file_imports_and_builds_the_three_tasks(airflow_env) -> None:
    bag = dagbag(ROOT / "dags")
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == EXPECTED
    for dag_id in EXPECTED:
        dag = bag.dags[dag_id]
        tasks = {t.task_id: t for t in dag.tasks}
        assert set(tasks) == {"coordinate", "process", "commit"}
        assert tasks["coordinate"].downstream_task_ids == {"process"}
        assert tasks["process"].downstream_task_ids == {"commit"}
        assert tasks["commit"].pool == tasks["coordinate"].pool == f"txdag_{dag_id}"
        assert type(tasks["process"]).__mro__[1].__name__ == "SparkSubmitOperator"
        assert Path(tasks["process"].application).is_file()
        assert dag.max_active_runs == tasks["process"].topology.max_active_transactions >= 2
        assert "txdag" in dag.tags


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ('State("users")', "unknown kind 'bogus'"),
        ('State("hashtags")', r"duplicate state name\(s\) \['users'\]"),
        ("max_active_transactions=2", r"max_active_transactions must be an int >= 1, got 0"),
        ('job="spark_jobs/tweets_analytics.py"', r"the Spark job .*nope\.py does not exist"),
        ("schedule=", "Airflow connection 'missing_redis' \\(redis\\) is not defined"),
    ],
)
def test_a_definition_error_fails_the_dag_file_with_what_to_change(airflow_env, tmp_path, edit, message) -> None:
    replacement = {
        'State("users")': 'State("users", kind="bogus")',
        'State("hashtags")': 'State("users")',
        "max_active_transactions=2": "max_active_transactions=0",
        'job="spark_jobs/tweets_analytics.py"': 'job="spark_jobs/nope.py"',
        "schedule=": 'redis_conn_id="missing_redis", schedule=',
    }[edit]
    (tmp_path / "dags").mkdir()
    shutil.copytree(ROOT / "spark_jobs", tmp_path / "spark_jobs")
    source = (ROOT / "dags" / "tweets_analytics.py").read_text()
    assert edit in source
    (tmp_path / "dags" / "tweets_analytics.py").write_text(source.replace(edit, replacement, 1))
    bag = dagbag(tmp_path / "dags")
    assert bag.dag_ids == []
    [error] = bag.import_errors.values()
    assert "ConfigError" in error
    import re

    assert re.search(message, error), error


def test_a_warm_topology_renders_the_spark_connect_process_task(airflow_env, tmp_path, monkeypatch) -> None:
    (tmp_path / "dags").mkdir()
    shutil.copytree(ROOT / "spark_jobs", tmp_path / "spark_jobs")
    source = (ROOT / "dags" / "tweets_analytics.py").read_text().replace("schedule=", 'spark_mode="connect", schedule=')
    (tmp_path / "dags" / "tweets_analytics.py").write_text(source)
    bag = dagbag(tmp_path / "dags")
    [error] = bag.import_errors.values()  # no spark_connect_default connection: the file says which to add
    assert "Airflow connection 'spark_connect_default' (spark_connect) is not defined" in error
    assert "bash scripts/spark-connect.sh start" in error
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", '{"conn_type": "spark_connect", "host": "127.0.0.1", '
                       '"port": 15092}')
    bag = dagbag(tmp_path / "dags")
    assert bag.import_errors == {}
    process = next(t for t in bag.dags["tweets_analytics"].tasks if t.task_id == "process")
    assert type(process).__name__ == "WarmProcessOperator" and process.topology.spark_mode == "connect"

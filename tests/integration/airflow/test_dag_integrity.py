"""DAG integrity: every file in dags/ (and the demo's dags_warm/) imports cleanly and builds coordinate -> process
-> commit.

Parsing contacts no service and looks up no connection: the DagBag runs with no AIRFLOW_CONN_* variable at all and
an empty metadata database, and a definition naming a connection that exists nowhere still parses.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXPECTED = {"tweets_analytics", "global_count", "word_count", "trending_hashtags"}


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("airflow-home")
    names = [k for k in os.environ if k.startswith("AIRFLOW_CONN_")] + ["AIRFLOW_HOME", "AIRFLOW__CORE__LOAD_EXAMPLES"]
    saved = {k: os.environ.get(k) for k in names}
    for name in names:
        os.environ.pop(name, None)  # no connection anywhere: parsing must not need one
    os.environ.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False")
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


def test_the_demos_warm_folder_renders_the_spark_connect_process_task(airflow_env) -> None:
    bag = dagbag(ROOT / "dags_warm")
    assert bag.import_errors == {} and bag.dag_ids == ["tweets_analytics"]
    process = next(t for t in bag.dags["tweets_analytics"].tasks if t.task_id == "process")
    assert type(process).__name__ == "WarmProcessOperator" and process.topology.spark_mode == "connect"
    assert Path(process.topology.job_path) == ROOT / "spark_jobs" / "tweets_analytics.py"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ('State("users")', "unknown kind 'bogus'"),
        ('State("hashtags")', r"duplicate state name\(s\) \['users'\]"),
        ("max_active_transactions=2", r"max_active_transactions must be an int >= 1, got 0"),
        ('job="spark_jobs/tweets_analytics.py"', r"the Spark job .*nope\.py does not exist"),
    ],
)
def test_a_definition_error_fails_the_dag_file_with_what_to_change(airflow_env, tmp_path, edit, message) -> None:
    replacement = {
        'State("users")': 'State("users", kind="bogus")',
        'State("hashtags")': 'State("users")',
        "max_active_transactions=2": "max_active_transactions=0",
        'job="spark_jobs/tweets_analytics.py"': 'job="spark_jobs/nope.py"',
    }[edit]
    bag = dagbag(copy_project(tmp_path, edit, replacement))
    assert bag.dag_ids == []
    [error] = bag.import_errors.values()
    assert "ConfigError" in error
    assert re.search(message, error), error


def copy_project(tmp_path: Path, edit: str, replacement: str) -> Path:
    """A project in ``tmp_path`` (its own dags/ and spark_jobs/) whose tweets_analytics.py has ``edit`` replaced."""
    (tmp_path / "dags").mkdir()
    shutil.copytree(ROOT / "spark_jobs", tmp_path / "spark_jobs")
    source = (ROOT / "dags" / "tweets_analytics.py").read_text()
    assert edit in source
    (tmp_path / "dags" / "tweets_analytics.py").write_text(source.replace(edit, replacement, 1))
    return tmp_path / "dags"


def test_connections_that_exist_nowhere_do_not_fail_the_parse_but_the_coordinate_task(airflow_env, tmp_path) -> None:
    """Nothing at parse time touches a connection; the coordinate task's first step names the missing one."""
    from txdag.errors import ConfigError

    bag = dagbag(copy_project(tmp_path, "schedule=", 'redis_conn_id="missing_redis", spark_mode="connect", schedule='))
    assert bag.import_errors == {} and bag.dag_ids == ["tweets_analytics"]
    coordinate = next(t for t in bag.dags["tweets_analytics"].tasks if t.task_id == "coordinate")
    assert Path(coordinate.topology.job_path) == tmp_path / "spark_jobs" / "tweets_analytics.py"
    os.environ["AIRFLOW_CONN_REDIS_DEFAULT"] = "redis://127.0.0.1:1/0"  # the source's; the states' is missing
    try:
        with pytest.raises(ConfigError) as caught:  # the task's first step, before ZooKeeper or Redis
            coordinate.execute({"run_id": "manual__1"})
    finally:
        del os.environ["AIRFLOW_CONN_REDIS_DEFAULT"]
    assert str(caught.value).startswith(
        "topology 'tweets_analytics': Airflow connection 'missing_redis' (redis) is not defined (")
    assert "set AIRFLOW_CONN_MISSING_REDIS (a redis connection, e.g. redis://HOST:PORT" in str(caught.value)

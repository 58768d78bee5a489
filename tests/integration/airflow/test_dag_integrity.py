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


def project_with(tmp_path: Path, files: dict[str, str]) -> Path:
    """A project in ``tmp_path`` with the shipped dags/ and spark_jobs/, plus ``files`` (name -> text) in dags/."""
    shutil.copytree(ROOT / "dags", tmp_path / "dags")
    shutil.copytree(ROOT / "spark_jobs", tmp_path / "spark_jobs")
    for name, text in files.items():
        (tmp_path / "dags" / name).write_text(text)
    return tmp_path / "dags"


def word_count_copy() -> str:
    """Issue 21's copy: word_count under the same topology id, another namespace, one transaction at a time."""
    source = (ROOT / "dags" / "word_count.py").read_text()
    for old, new in (('namespace="word_count"', 'namespace="word_count_copy"'),
                     ("max_active_transactions=2", "max_active_transactions=1")):
        assert old in source
        source = source.replace(old, new)
    return source


def test_a_copy_of_a_dag_file_is_an_import_error_naming_both_and_the_original_keeps_the_dag(airflow_env,
                                                                                            tmp_path) -> None:
    """Each file is parsed on its own, as the DAG processor does (one process per file): the copy's own parse
    finds the original, so no DagBag-wide duplicate detection is needed for it to fail."""
    from txdag.errors import ConfigError

    dags = project_with(tmp_path, {"zz_copy.py": word_count_copy()})
    for name in ("word_count.py", "zz_copy.py"):
        bag = dagbag(dags / name)  # one file per bag: what the DAG processor's per-file process sees
        if name == "word_count.py":
            assert bag.import_errors == {} and bag.dag_ids == ["word_count"]
            assert bag.dags["word_count"].fileloc == str(dags / "word_count.py")
            assert bag.dags["word_count"].max_active_runs == 2
        else:
            [(path, error)] = bag.import_errors.items()
            assert path == str(dags / "zz_copy.py") and bag.dag_ids == []
            assert ConfigError.__name__ in error
            assert (f"topology 'word_count' is defined by two DAG files, {dags / 'word_count.py'} and "
                    f"{dags / 'zz_copy.py'}") in error
    whole = dagbag(dags)
    assert list(whole.import_errors) == [str(dags / "zz_copy.py")] and "two DAG files" in whole.import_errors[
        str(dags / "zz_copy.py")]
    assert whole.dags["word_count"].fileloc == str(dags / "word_count.py")


def test_a_copy_first_in_path_order_keeps_the_dag_and_the_coordinate_task_refuses_its_definition(airflow_env,
                                                                                                tmp_path) -> None:
    """Path order decides at parse time; the topology's owner in ZooKeeper (recorded by the first coordinate) is
    what keeps the copy from writing anything (tests/integration/protocol/test_ownership.py)."""
    dags = project_with(tmp_path, {"a_copy.py": word_count_copy()})
    bag = dagbag(dags)
    assert list(bag.import_errors) == [str(dags / "word_count.py")]
    error = bag.import_errors[str(dags / "word_count.py")]
    assert f"Airflow loads {dags / 'a_copy.py'} (the first in path order)" in error
    coordinate = next(t for t in bag.dags["word_count"].tasks if t.task_id == "coordinate")
    assert coordinate.dag_file == str(dags / "a_copy.py")


def test_a_copy_that_airflow_ignores_is_no_second_definition(airflow_env, tmp_path) -> None:
    dags = project_with(tmp_path, {"a_copy.py": word_count_copy(), ".airflowignore": "a_copy.py\n"})
    bag = dagbag(dags)
    assert bag.import_errors == {} and set(bag.dag_ids) == EXPECTED
    assert bag.dags["word_count"].fileloc == str(dags / "word_count.py")

"""How the CLI, the ACL command and the UI read the topologies of a DAG folder (``load_definitions``), and what
rendering adds: the DAG files are run as Airflow runs them, and no connection is looked up on the way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from txdag.errors import ConfigError
from txdag.topology.definition import State, TweetsSource
from txdag.topology.topology import TransactionalTopology, load_definitions

HEAD = "from txdag import TransactionalTopology\nfrom txdag.topology.definition import State, TweetsSource\n"
DEFINE = "TransactionalTopology({name!r}, source=TweetsSource(), job='spark_jobs/job.py', states=[State('s')])"
RENDER = "from txdag.airflow import render\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "dags").mkdir()
    (tmp_path / "spark_jobs").mkdir()
    (tmp_path / "spark_jobs" / "job.py").write_text("")
    return tmp_path


def write(project: Path, file: str, body: str) -> Path:
    path = project / "dags" / file
    path.write_text(HEAD + body)
    return path


def test_a_rendered_dag_carries_its_located_definition(project: Path) -> None:
    write(project, "good.py", f"{RENDER}t = {DEFINE.format(name='good')}\ndag = render(t, dag_file=__file__)\n")
    found, errors = load_definitions(project / "dags")
    assert errors == {} and list(found) == ["good"]
    assert found["good"].project_dir == str(project.resolve())
    assert found["good"].job_path == str(project.resolve() / "spark_jobs" / "job.py")


def test_a_file_that_only_defines_a_topology_is_read_without_rendering(project: Path) -> None:
    write(project, "plain.py", f"t = {DEFINE.format(name='plain')}\n")
    found, errors = load_definitions(project / "dags")
    assert errors == {} and list(found) == ["plain"]
    assert found["plain"].project_dir == str(project.resolve()), "located relative to the file, as render does"


def test_a_topology_kept_in_no_variable_is_an_error_that_says_how_to_write_it(project: Path) -> None:
    path = write(project, "old.py", DEFINE.format(name="old") + "\n")
    found, errors = load_definitions(project / "dags")
    assert found == {}
    assert "dag = render(TransactionalTopology(...), dag_file=__file__)" in errors[str(path)]


def test_one_owner_a_second_file_defining_a_topology_id_is_an_error(project: Path) -> None:
    first = write(project, "a.py", f"t = {DEFINE.format(name='same')}\n")
    second = write(project, "b.py", f"t = {DEFINE.format(name='same')}\nu = {DEFINE.format(name='other')}\n")
    found, errors = load_definitions(project / "dags")
    assert list(found) == ["same"] and found["same"].project_dir == str(project.resolve())
    assert list(errors) == [str(second)]
    assert f"topology 'same' is defined by {first} already" in errors[str(second)]
    assert "`txdag topology owner same` names the recorded owner and which file to delete" in errors[str(second)]


def test_one_file_reached_through_two_links_is_one_definition(project: Path, tmp_path_factory) -> None:
    write(project, "good.py", f"t = {DEFINE.format(name='good')}\n")
    home = tmp_path_factory.mktemp("home")
    (home / "one").symlink_to(project / "dags", target_is_directory=True)
    (home / "two").symlink_to(project / "dags", target_is_directory=True)
    listed = [home / "one" / "good.py", home / "two" / "good.py"]  # as Airflow lists a folder, links followed
    assert list(load_definitions(home, listed)[0]) == ["good"]
    assert load_definitions(home, listed)[1] == {}


def test_loading_and_rendering_look_up_no_connection(project: Path, monkeypatch) -> None:
    from airflow.models.connection import Connection
    from airflow.sdk import BaseHook

    def refuse(*args, **kwargs):
        raise AssertionError(f"a connection was looked up at parse time: {args}")

    monkeypatch.setattr(BaseHook, "get_connection", classmethod(refuse))
    monkeypatch.setattr(Connection, "get_connection_from_secrets", classmethod(refuse))
    for name in ("redis_conn_id='nowhere'", "spark_mode='connect'"):
        write(project, f"t_{name[:5]}.py", f"{RENDER}dag = render(TransactionalTopology('t_{name[:5]}', "
              f"source=TweetsSource(), job='spark_jobs/job.py', states=[State('s')], {name}), dag_file=__file__)\n")
    found, errors = load_definitions(project / "dags")
    assert errors == {} and sorted(found) == ["t_redis", "t_spark"]
    assert found["t_spark"].spark_mode == "connect"


def test_render_refuses_a_relative_job_it_cannot_locate(project: Path) -> None:
    from txdag.airflow import render

    t = TransactionalTopology("t", source=TweetsSource(), job="spark_jobs/job.py", states=[State("s")])
    with pytest.raises(ConfigError, match=r"render\(TransactionalTopology\(...\), dag_file=__file__\)"):
        render(t)
    dag = render(t, dag_file=project / "dags" / "t.py")
    assert dag.dag_id == "t" and dag.txdag_topology.project_dir == str(project.resolve())
    assert {task.topology for task in dag.tasks} == {dag.txdag_topology}


def test_a_tasks_parse_of_its_dag_file_reads_no_other_file(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The DAG processor refuses a second definition (the test below); a task's runner parses its DAG file again,
    inside Airflow's parsing context, and there render reads no other file: the check costs a task nothing."""
    from airflow.sdk.definitions.context import _AIRFLOW_PARSING_CONTEXT_DAG_ID, _AIRFLOW_PARSING_CONTEXT_TASK_ID

    from txdag.airflow import render

    t = TransactionalTopology("same", source=TweetsSource(), job="spark_jobs/job.py", states=[State("s")])
    body = f"{RENDER}dag = render({DEFINE.format(name='same')}, dag_file=__file__)\n"
    write(project, "same.py", body)
    copy = write(project, "zz_copy.py", body)
    with pytest.raises(ConfigError, match="defined by two DAG files"):
        render(t, dag_file=copy)
    monkeypatch.setenv(_AIRFLOW_PARSING_CONTEXT_DAG_ID, "same")  # as `airflow dags test same` parses: no task
    with pytest.raises(ConfigError, match="defined by two DAG files"):
        render(t, dag_file=copy)
    monkeypatch.setenv(_AIRFLOW_PARSING_CONTEXT_TASK_ID, "commit")  # as the task runner parses the DAG file
    assert render(t, dag_file=copy).dag_id == "same"
    monkeypatch.setenv(_AIRFLOW_PARSING_CONTEXT_DAG_ID, "other")  # a task of another DAG (its variables leaked)
    with pytest.raises(ConfigError, match="defined by two DAG files"):
        render(t, dag_file=copy)


def test_the_airflow_package_exports_render_lazily() -> None:
    """``from txdag.airflow import render`` is the function even once the module is loaded; importing the hooks
    (as the CLI does) does not import the operators."""
    code = ("import sys, txdag.airflow.hooks\nloaded = 'txdag.airflow.operators' in sys.modules\n"
            "import txdag.airflow.rendering\nfrom txdag.airflow import render\n"
            "print(loaded, callable(render) and render.__module__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["False", "txdag.airflow.rendering"]


def test_a_second_rendered_definition_fails_its_file_naming_both_and_the_first_keeps_it(project: Path) -> None:
    """The check render makes (one owner): it reads the DAG folder's other files, runs none, and the file later in
    path order fails, as it does in Airflow's DAG processor; the coordinate task records the file it came from."""
    body = f"{RENDER}dag = render({DEFINE.format(name='same')}, dag_file=__file__)\n"
    first, copy = write(project, "same.py", body), write(project, "zz_copy.py", body)
    found, errors = load_definitions(project / "dags")
    assert list(found) == ["same"] and list(errors) == [str(copy)]
    assert f"topology 'same' is defined by two DAG files, {first} and {copy}" in errors[str(copy)]
    from txdag.airflow import render

    dag = render(found["same"], dag_file=first)
    assert next(t for t in dag.tasks if t.task_id == "coordinate").dag_file == str(first)

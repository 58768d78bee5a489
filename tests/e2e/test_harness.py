"""The e2e harness itself, on the trivial DAGs of tests/e2e/dags_fixture: runs that overlap, clearing one run,
task logs, backfills, variables, and the environment the components get."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from conftest import AirflowInstance

from txdag.airflow.api import unique_run_id

TRIVIAL = "e2e_trivial"
SCHEDULED = "e2e_scheduled"


def _dt(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_two_runs_overlap_and_log_what_they_saw(airflow: AirflowInstance) -> None:
    api = airflow.api
    api.wait_dag_parsed(TRIVIAL, timeout=60)
    runs = [api.trigger(TRIVIAL, conf={"sleep": 6}, run_id=unique_run_id("overlap")) for _ in range(2)]
    assert [api.wait_run(TRIVIAL, run, timeout=120) for run in runs] == ["success", "success"]

    first = [next(ti for ti in api.task_instances(TRIVIAL, run) if ti["task_id"] == "first") for run in runs]
    a, b = ((_dt(ti["start_date"]), _dt(ti["end_date"])) for ti in first)
    assert a[0] < b[1] and b[0] < a[1], f"the two runs' tasks did not overlap: {a} {b}"
    assert all(ti["try_number"] == 1 for ti in first)

    log = api.task_log(TRIVIAL, runs[0], "first", 1)
    assert f"E2E first run_id={runs[0]} try_number=1 logical_date=None sleep=6.0" in log
    assert api.run(TRIVIAL, runs[0])["logical_date"] is None  # REST trigger without a logical date


def test_clear_one_run_reruns_only_it(airflow: AirflowInstance) -> None:
    api = airflow.api
    api.wait_dag_parsed(TRIVIAL, timeout=60)
    # Logical dates in the past (a future one holds the tasks back: "Logical date ... is in the future").
    base = datetime(2020, 1, 1, tzinfo=UTC)
    runs = [
        api.trigger(TRIVIAL, logical_date=base + timedelta(seconds=i), run_id=unique_run_id(f"clear{i}"))
        for i in range(2)
    ]
    assert [api.wait_run(TRIVIAL, run, timeout=120) for run in runs] == ["success", "success"]

    # include_future goes by logical date: from the first run, the second's tasks would be cleared too.
    would = api.clear(TRIVIAL, runs[0], include_future=True, dry_run=True)
    assert {ti["dag_run_id"] for ti in would} == set(runs)

    cleared = api.clear(TRIVIAL, runs[0])  # every task of the run, the successful ones included
    assert sorted(ti["task_id"] for ti in cleared) == ["first", "second"]
    assert api.wait_run(TRIVIAL, runs[0], timeout=120) == "success"

    tries = {run: {ti["task_id"]: ti["try_number"] for ti in api.task_instances(TRIVIAL, run)} for run in runs}
    assert tries[runs[0]] == {"first": 2, "second": 2}
    assert tries[runs[1]] == {"first": 1, "second": 1}
    assert "try_number=2" in api.task_log(TRIVIAL, runs[0], "first", 2)
    assert "try_number=1" in api.task_log(TRIVIAL, runs[0], "first", 1)


def test_backfill_runs_each_logical_date(airflow: AirflowInstance) -> None:
    api = airflow.api
    api.wait_dag_parsed(SCHEDULED, timeout=60)
    # Backfill runs stay queued while the DAG is paused. Unpausing also makes the scheduler create the
    # latest scheduled run (catchup=False): only the backfill's runs are looked at.
    api.unpause(SCHEDULED)
    backfill = api.backfill(SCHEDULED, "2021-01-01T00:00:00Z", "2021-01-03T00:00:00Z", max_active_runs=2)
    assert backfill["max_active_runs"] == 2

    runs = []
    for _ in range(240):
        runs = [run for run in api.runs(SCHEDULED) if run["run_type"] == "backfill"]
        if len(runs) == 3 and all(run["state"] in ("success", "failed") for run in runs):
            break
        time.sleep(0.5)
    assert sorted((run["logical_date"], run["state"]) for run in runs) == [
        ("2021-01-01T00:00:00Z", "success"),
        ("2021-01-02T00:00:00Z", "success"),
        ("2021-01-03T00:00:00Z", "success"),
    ]


def test_components_get_the_environment_and_variables(airflow: AirflowInstance) -> None:
    api = airflow.api
    key = f"e2e_{unique_run_id('var').split('__')[1]}"
    api.set_variable(key, "from-the-api")
    dag_id = f"e2e_env_{key}"
    airflow.add_dag_file(
        f"{dag_id}.py",
        f'''
import os
from airflow.sdk import DAG, BaseHook, Variable, task

# Connections resolve at parse time in the DAG processor too.
PARSE_ROOT = BaseHook.get_connection("zookeeper_default").extra_dejson["root"]

with DAG(dag_id="{dag_id}", schedule=None, catchup=False) as dag:
    @task
    def show():
        redis = BaseHook.get_connection("redis_default")
        print("E2E env", PARSE_ROOT, redis.extra_dejson.get("db"), os.environ.get("TXDAG_FAULTS_ALLOWED"),
              Variable.get("{key}", default=None), Variable.get("{key}_missing", default=None))
    show()
''',
    )
    api.wait_dag_parsed(dag_id, timeout=60)
    run = api.trigger(dag_id)
    assert api.wait_run(dag_id, run, timeout=120) == "success"
    redis_db = airflow.redis_url.rsplit("/", 1)[1]
    assert f"E2E env {airflow.zk_root} {redis_db} 1 from-the-api None" in api.task_log(dag_id, run, "show", 1)

    assert api.get_variable(key) == "from-the-api"
    assert api.delete_variable(key) is True
    assert api.get_variable(key) is None

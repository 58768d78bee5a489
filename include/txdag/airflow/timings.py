"""Per-txid timings of a topology's runs, read from Airflow's REST API: how long coordinate, process and commit
took, and the scheduler's gaps between them (end of one task to the start of the next)."""

from __future__ import annotations

from datetime import datetime

from txdag.airflow.api import AirflowAPI

TASKS = ("coordinate", "process", "commit")


def _dt(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def run_timings(api: AirflowAPI, dag_id: str, run: dict) -> dict | None:
    """One run's task durations and the gaps between its tasks (seconds), with the tasks' start and end dates
    (``spans``) and the process task's try (``process_try``, whose log holds its job's line); None unless all three
    tasks succeeded."""
    tis = {ti["task_id"]: ti for ti in api.task_instances(dag_id, run["dag_run_id"])}
    if any(tis.get(t, {}).get("state") != "success" for t in TASKS):
        return None
    span = {t: (_dt(tis[t]["start_date"]), _dt(tis[t]["end_date"])) for t in TASKS}
    return {
        "run": run["dag_run_id"],
        **{t: (span[t][1] - span[t][0]).total_seconds() for t in TASKS},
        "gap c>p": (span["process"][0] - span["coordinate"][1]).total_seconds(),
        "gap p>c": (span["commit"][0] - span["process"][1]).total_seconds(),
        "total": (span["commit"][1] - span["coordinate"][0]).total_seconds(),
        "spans": span,
        "process_try": tis["process"]["try_number"],
    }


def all_timings(api: AirflowAPI, dag_id: str) -> list[dict]:
    """run_timings of every run of the DAG whose three tasks succeeded, oldest run first."""
    rows, offset = [], 0
    while True:
        runs = api.runs(dag_id, offset=offset)
        rows += [row for run in runs if (row := run_timings(api, dag_id, run)) is not None]
        if len(runs) < 100:
            return rows
        offset += len(runs)

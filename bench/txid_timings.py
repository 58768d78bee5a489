"""Per-txid timings of a topology's runs, read from Airflow's REST API: coordinate, process and commit
durations, and the scheduler's gaps between them (end of one task to the start of the next).

    eval "$(bash scripts/airflow.sh env)"; .venv/bin/python bench/txid_timings.py tweets_analytics
"""

from __future__ import annotations

import argparse
import statistics
from datetime import datetime

from txdag.airflow.api import AirflowAPI, api_from_env

TASKS = ("coordinate", "process", "commit")


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def run_timings(api: AirflowAPI, dag_id: str, run: dict) -> dict | None:
    """One run's task durations and the gaps between its tasks (seconds), with the tasks' start and end dates
    (``spans``); None unless all three tasks succeeded."""
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dag_id")
    args = parser.parse_args()
    rows = all_timings(api_from_env(), args.dag_id)
    if not rows:
        print(f"no run of {args.dag_id} with all three tasks successful")
        return 1
    columns = [*TASKS, "gap c>p", "gap p>c", "total"]
    print(f"{'run':<44}" + "".join(f"{c:>11}" for c in columns))
    for row in rows:
        print(f"{row['run']:<44}" + "".join(f"{row[c]:>10.1f}s" for c in columns))
    print(f"{'median':<44}" + "".join(f"{statistics.median(r[c] for r in rows):>10.1f}s" for c in columns))
    print("(a commit that waited for txid - 1 shows the wait in 'gap p>c': it reschedules every commit_poke_interval)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

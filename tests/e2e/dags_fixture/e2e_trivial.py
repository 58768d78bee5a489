"""A trivial DAG for the e2e harness's own tests: two chained tasks that say what they saw."""

from __future__ import annotations

import time

from airflow.sdk import DAG, task

with DAG(dag_id="e2e_trivial", schedule=None, catchup=False, max_active_runs=4, tags=["txdag-e2e"]) as dag:

    @task
    def first(**context) -> dict:
        conf = context["dag_run"].conf or {}
        seconds = float(conf.get("sleep", 0))
        ti = context["ti"]
        print(
            f"E2E first run_id={context['run_id']} try_number={ti.try_number} "
            f"logical_date={context['dag_run'].logical_date} sleep={seconds}"
        )
        time.sleep(seconds)
        return {"run_id": context["run_id"], "try_number": ti.try_number}

    @task
    def second(seen: dict, **context) -> None:
        print(f"E2E second saw {seen} try_number={context['ti'].try_number}")

    second(first())

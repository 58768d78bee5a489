"""A daily DAG for the e2e harness's own tests of backfills (Airflow only backfills DAGs with a schedule)."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG, task

with DAG(
    dag_id="e2e_scheduled",
    schedule="@daily",
    start_date=datetime(2021, 1, 1, tzinfo=UTC),
    catchup=False,
    is_paused_upon_creation=True,  # only backfills run it
    tags=["txdag-e2e"],
) as dag:

    @task
    def report(**context) -> str:
        print(f"E2E scheduled logical_date={context['dag_run'].logical_date} run_type={context['dag_run'].run_type}")
        return str(context["dag_run"].logical_date)

    report()

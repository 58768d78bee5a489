"""Renders a TransactionalTopology as an Airflow DAG: coordinate -> process -> commit, one run per txid.

A DAG file calls it explicitly (``dag = render(TransactionalTopology(...), dag_file=__file__)``, with ``from
txdag.airflow import render``). Rendering is a function of the definition and of the DAG file's location only:
it reads no environment variable and looks up no connection (Airflow's rule for top-level DAG code: the coordinate
task checks the connections, and ``txdag doctor --check connections`` does before that).
"""

from __future__ import annotations

from pathlib import Path

from airflow.sdk import DAG

from txdag.airflow import located
from txdag.airflow.operators import (
    CommitOperator,
    CoordinateOperator,
    ProcessOperator,
    WarmProcessOperator,
    fail_txid,
)
from txdag.topology.topology import TransactionalTopology


def render(topology: TransactionalTopology, *, dag_file: str | Path | None = None) -> DAG:
    """The Airflow DAG of ``topology``. ``dag_file`` (the DAG file's ``__file__``) locates a relative ``job``:
    the project root is the folder above the DAG file's folder, unless the topology names its ``project_dir``.
    The DAG carries the located definition as ``dag.txdag_topology`` (``txdag.topology.topology.load_definitions`` reads
    it)."""
    t = located(topology, dag_file)
    dag = _build(t)
    dag.txdag_topology = t  # type: ignore[attr-defined]  # a DAG takes attributes; load_definitions reads it
    return dag


def _build(t: TransactionalTopology) -> DAG:
    doc = (
        f"txdag topology **{t.topology_id}**: each run is one transaction (txid). `coordinate` allocates or "
        f"re-emits the txid, `process` runs `{t.job}` on Spark ({t.spark_mode} mode) for its batch, `commit` "
        f"applies the batch to "
        f"{', '.join(s.name for s in t.states)} in txid order (pool `{t.pool}`, 1 slot). Clear a run to replay "
        f"its txid; clear with *Future* to replay it and every later one."
    )
    with DAG(
        dag_id=t.topology_id,
        schedule=t.schedule,
        start_date=t.start_date,
        catchup=t.catchup,
        max_active_runs=t.max_active_transactions,
        default_args={"retries": t.retries, "retry_delay": t.retry_delay},
        tags=["txdag"],
        description=t.description or f"txdag transactional topology {t.topology_id}",
        doc_md=doc,
    ) as dag:
        coordinate = CoordinateOperator(task_id="coordinate", topology=t, pool=t.pool)
        process_operator = WarmProcessOperator if t.spark_mode == "connect" else ProcessOperator
        process = process_operator(task_id="process", topology=t, on_failure_callback=fail_txid)
        # commit is idempotent: retrying it is always safe, and only its final failure fails the txid
        commit = CommitOperator(task_id="commit", topology=t, pool=t.pool, retries=max(t.retries, 2),
                                on_failure_callback=fail_txid)
        coordinate >> process >> commit
    return dag

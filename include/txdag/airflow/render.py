"""Renders a TransactionalTopology as an Airflow DAG: coordinate -> process -> commit, one run per txid."""

from __future__ import annotations

from airflow.sdk import DAG, BaseHook

from txdag import hints
from txdag.airflow.operators import (
    CommitOperator,
    CoordinateOperator,
    ProcessOperator,
    WarmProcessOperator,
    fail_txid,
)
from txdag.errors import ConfigError
from txdag.topology import TransactionalTopology

HOW_TO_ADD = {
    "redis": "redis://HOST:PORT (extra {\"db\": N} for another database)",
    "zookeeper": "zookeeper://HOST:PORT (extra {\"root\": \"/txdag\"})",
    "spark": "spark://local[*], or your master (spark://host:7077, yarn, k8s://...)",
}


def connection_example(kind: str) -> str:
    """An example connection of ``kind``; for Spark Connect, the server of the deployment txdag runs in."""
    return hints.spark_connect_example() if kind == "spark_connect" else HOW_TO_ADD[kind]


def check_connections(topology: TransactionalTopology) -> None:
    """Fail the DAG file at parse time when a connection the topology names is not defined in Airflow."""
    for conn_id, kind in topology.conn_ids().items():
        try:
            BaseHook.get_connection(conn_id)
        except Exception as exc:  # AirflowNotFoundException, or the supervisor's error: both mean "not usable"
            raise ConfigError(
                f"topology {topology.topology_id!r}: Airflow connection {conn_id!r} ({kind}) is not defined "
                f"({type(exc).__name__}): add it in Admin > Connections or set AIRFLOW_CONN_{conn_id.upper()} "
                f"(a {kind} connection, e.g. {connection_example(kind)})"
            ) from None


def build_dag(topology: TransactionalTopology) -> DAG:
    if topology.check_connections:
        check_connections(topology)
    t = topology
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

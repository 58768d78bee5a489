"""Renders a TransactionalTopology as an Airflow DAG: coordinate -> process -> commit, one run per txid.

A DAG file calls it explicitly (``dag = render(TransactionalTopology(...), dag_file=__file__)``, with ``from
txdag.airflow import render``). The DAG is a function of the definition and of the DAG file's location only; in
the DAG processor, the DAG folder's other files are read (not run) to refuse a second definition of the topology.
Rendering looks up no connection (Airflow's rule for top-level DAG code: the coordinate task checks the
connections, and ``txdag doctor --check connections`` does before that).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, get_parsing_context

from txdag.airflow import located
from txdag.airflow.assets import commits_alias, source_asset
from txdag.airflow.operators import (
    CommitOperator,
    CoordinateOperator,
    ProcessOperator,
    WarmProcessOperator,
    fail_txid,
)
from txdag.airflow.retries import BACKOFF_MULTIPLIER, TxidRetryPolicy
from txdag.airflow.triggers import SourceBacklog
from txdag.errors import ConfigError
from txdag.topology.owner import check_one_file, files_defining
from txdag.topology.topology import TransactionalTopology


def render(topology: TransactionalTopology, *, dag_file: str | Path | None = None) -> DAG:
    """The Airflow DAG of ``topology``. ``dag_file`` (the DAG file's ``__file__``) locates a relative ``job``:
    the project root is the folder above the DAG file's folder, unless the topology names its ``project_dir`` (a
    relative one is taken from the DAG file's folder).
    The DAG carries the located definition as ``dag.txdag_topology`` (``txdag.topology.topology.load_definitions`` reads
    it). One owner: when another file of the DAG folder, earlier in path order, defines the same topology id, this
    file fails to import with an error naming both (``txdag.topology.owner.check_one_file``; it reads the files'
    text, it runs none and connects to nothing). The DAG processor checks; a task's runner, which parses the DAG
    file again inside Airflow's parsing context (naming the task and its DAG), reads no other file for the task's
    own topology: the DAG it runs passed the check. ``airflow dags test`` names no task, and checks."""
    t = located(topology, dag_file)
    parsing = get_parsing_context()
    if dag_file is not None and (parsing.task_id is None or parsing.dag_id != t.topology_id):
        check_one_file(t.topology_id, dag_file, defining_files(t.topology_id, dag_file))
    dag = _build(t, None if dag_file is None else str(dag_file))
    dag.txdag_topology = t  # type: ignore[attr-defined]  # a DAG takes attributes; load_definitions reads it
    return dag


def defining_files(topology_id: str, dag_file: str | Path) -> list[Path]:
    """The files that define ``topology_id`` in the DAG folder that holds ``dag_file``: Airflow's ``dags_folder``
    when the file is in it, else the file's own folder (another bundle, a test's folder)."""
    try:
        from airflow.configuration import conf
    except ImportError:
        return []
    path = Path(os.path.abspath(dag_file))
    root = Path(os.path.abspath(os.path.expanduser(conf.get("core", "dags_folder"))))
    return defining_in(root if path.is_relative_to(root) else path.parent, topology_id)


def defining_in(folder: str | Path, topology_id: str) -> list[Path]:
    """The files of ``folder`` that define ``topology_id`` and that Airflow's DAG processor reads: its
    ``.airflowignore`` and safe mode applied, the safe-mode test (which reads a file) only to the few that name the
    id. Empty where Airflow's core is not installed (a Task SDK-only worker): the DAG processor checked already."""
    try:
        from airflow.configuration import conf
        from airflow.utils.file import list_py_file_paths, might_contain_dag
    except ImportError:
        return []
    found = files_defining(list_py_file_paths(str(folder), safe_mode=False), topology_id)
    safe_mode = conf.getboolean("core", "dag_discovery_safe_mode", fallback=True)
    return [f for f in found if might_contain_dag(str(f), safe_mode)]


def dag_files(folder: str | Path) -> list[Path]:
    """The files of ``folder`` that Airflow's DAG processor reads: subfolders, ``.airflowignore`` and safe mode
    applied (the transactions page and its metrics read the topologies Airflow runs, not a stale copy beside them)."""
    from airflow.configuration import conf
    from airflow.utils.file import list_py_file_paths

    safe_mode = conf.getboolean("core", "dag_discovery_safe_mode", fallback=True)
    return [Path(f) for f in list_py_file_paths(str(folder), safe_mode=safe_mode) if f.endswith(".py")]  # no zip


def schedule_of(t: TransactionalTopology, dag_file: str | None) -> Any:
    """The DAG's schedule: the topology's, and with ``drain`` its source asset too, watched by the triggerer (a run
    when either says so; ``txdag.txid.backlog``)."""
    if t.drain is None:
        return t.schedule
    if dag_file is None:
        raise ConfigError(f"topology {t.topology_id!r}: drain needs the DAG file, where Airflow's triggerer finds the "
                          "topology's source: render(topology, dag_file=__file__)")
    if not (t.schedule is None or isinstance(t.schedule, str | timedelta)) or t.schedule in ("@once", "@continuous"):
        raise ConfigError(f"topology {t.topology_id!r}: with drain, schedule must be None, a cron expression, a preset "
                          f"or a datetime.timedelta (runs start on it or on the source's backlog), got {t.schedule!r}")
    source = source_asset(t.topology_id, watcher=SourceBacklog(  # the path as Airflow runs it, links unresolved
        t.topology_id, os.path.abspath(dag_file), entries=t.drain.entries,
        wait_seconds=t.drain.wait.total_seconds(), poll=float(t.drain.poll), max_active=t.max_active_transactions))
    if t.schedule is None:
        return [source]
    from airflow.sdk import timezone
    from airflow.sdk.definitions.dag import _create_timetable  # Airflow's own reading of a schedule value
    from airflow.sdk.definitions.timetables.assets import AssetOrTimeSchedule

    zone = timezone.coerce_datetime(t.start_date).timezone or timezone.utc  # the DAG's, as Airflow takes it
    timetable = _create_timetable(t.schedule, zone)
    try:  # what Airflow checks of a plain schedule when it loads the DAG, and not inside an AssetOrTimeSchedule
        timetable.validate()
    except Exception as exc:  # noqa: BLE001 - AirflowTimetableInvalid, named with Airflow's reason
        raise ConfigError(f"topology {t.topology_id!r}: schedule {t.schedule!r} is not one Airflow can run: "
                          f"{exc}") from None
    return AssetOrTimeSchedule(timetable=timetable, assets=[source])


def _build(t: TransactionalTopology, dag_file: str | None = None) -> DAG:
    doc = (
        f"txdag topology **{t.topology_id}**: each run is one transaction (txid). `coordinate` allocates or "
        f"re-emits the txid, `process` runs `{t.job}` on Spark ({t.spark_mode} mode) for its batch, `commit` "
        f"applies the batch to "
        f"{', '.join(s.name for s in t.states)} in txid order (pool `{t.pool}`, 1 slot). Clear a run to replay "
        f"its txid; clear with *Future* to replay it and every later one."
    )
    with DAG(
        dag_id=t.topology_id,
        schedule=schedule_of(t, dag_file),
        start_date=t.start_date,
        catchup=t.catchup,
        max_active_runs=t.max_active_transactions,
        default_args={"retries": t.retries, "retry_delay": t.retry_delay, "max_retry_delay": t.max_retry_delay,
                      "retry_exponential_backoff": BACKOFF_MULTIPLIER, "execution_timeout": t.execution_timeout,
                      # a txid's later tasks first (commit 3, process 2, coordinate 1): a commit that process tasks
                      # wait for takes a free worker or pool slot before a new txid's tasks do
                      "weight_rule": "upstream"},
        tags=["txdag"],
        description=t.description or f"txdag transactional topology {t.topology_id}",
        doc_md=doc,
    ) as dag:
        heals = TxidRetryPolicy(t)  # a transient failure is replayed automatically; one that will recur is not
        coordinate = CoordinateOperator(task_id="coordinate", topology=t, dag_file=dag_file, pool=t.pool,
                                        retry_policy=heals)
        process_operator = WarmProcessOperator if t.spark_mode == "connect" else ProcessOperator
        process = process_operator(task_id="process", topology=t, dag_file=dag_file, on_failure_callback=fail_txid,
                                   retry_policy=heals)
        # commit is idempotent: retrying it is always safe, and only its final failure fails the txid
        commit = CommitOperator(task_id="commit", topology=t, dag_file=dag_file, pool=t.pool,
                                retries=max(t.retries, 2), on_failure_callback=fail_txid, retry_policy=heals,
                                outlets=[commits_alias(t.topology_id)])  # its states' assets: txdag.airflow.assets
        coordinate >> process >> commit
    return dag

"""The transactions page's data, gathered inside Airflow's API server: topologies from the DAG folder, txids from
ZooKeeper, the lag from each topology's source in Redis, run states and paused flags from Airflow's database.
Its actions go through Airflow's REST API *as the logged-in user* (their own token), so Airflow's permission
checks and audit log apply to them exactly as to the UI's own buttons.

Clients are cached per process (the API server is long-lived; ``txdag.protocol.clients``): one ZooKeeper session
per connection id, one Redis client per connection id, the DAG folder's definitions re-read every DEFINITIONS_TTL
seconds.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from txdag.airflow import config
from txdag.airflow.api import AirflowAPI
from txdag.airflow.hooks import airflow_clients
from txdag.airflow.rendering import dag_files
from txdag.defaults import ZOOKEEPER_CONN_ID
from txdag.errors import ServiceUnavailable, TxdagError
from txdag.topology.topology import TransactionalTopology, load_definitions
from txdag.txid.replays import guarded_replay
from txdag.txid.report import last_batch, read_snapshot, replay_targets, transactions_view
from txdag.zk.store import TransactionStore

DEFINITIONS_TTL = 30.0
PAGE_SECONDS = 10.0  # how long the page waits for a topology's view (a scrape: the scraper's own timeout)
DATABASE_READERS = threading.BoundedSemaphore(4)  # views read at once take turns at Airflow's connection pool
REJECTIONS_SHOWN = 20  # the newest rejected entries a topology's section lists
DEFAULT_ZK_CONN = ZOOKEEPER_CONN_ID
_lock = threading.Lock()
_definitions: tuple[float, dict[str, TransactionalTopology], dict[str, str]] = (0.0, {}, {})
_clients = airflow_clients()


def definitions() -> dict[str, TransactionalTopology]:
    """The topologies of the DAG folder, from the files Airflow's DAG processor reads, re-read every
    DEFINITIONS_TTL s."""
    return _read_folder()[1]


def folder() -> tuple[dict[str, TransactionalTopology], dict[str, str]]:
    """The topologies of the DAG folder and its files that failed to load, with their error, from one read."""
    _, found, broken = _read_folder()
    return found, broken


def _read_folder() -> tuple[float, dict[str, TransactionalTopology], dict[str, str]]:
    global _definitions
    with _lock:
        if time.monotonic() - _definitions[0] > DEFINITIONS_TTL:
            folder = config.dags_folder()
            _definitions = (time.monotonic(), *load_definitions(folder, dag_files(folder)))
        return _definitions


def store_of(name: str) -> TransactionStore:
    """The topology's znodes, under the root of its ZooKeeper connection (the default one when not defined)."""
    definition = definitions().get(name)
    return _clients.store(name, definition.zookeeper_conn_id if definition is not None else DEFAULT_ZK_CONN)


def topology_names() -> list[str]:
    """Topologies defined in the DAG folder, and those with znodes under the roots their connections use."""
    defined = definitions()
    names = set(defined)
    for conn_id in {DEFAULT_ZK_CONN, *(d.zookeeper_conn_id for d in defined.values())}:
        names.update(_clients.topology_ids(conn_id))
    return sorted(names)


def lag_of(name: str, records: list[Any], last_txid: int, strict: bool = False) -> tuple[int | None, str | None]:
    """Source entries not in any batch yet: (lag, None), or (None, why it is unknown); with ``strict``, a source
    that does not answer raises its ServiceUnavailable."""
    definition = definitions().get(name)
    if definition is None:
        return None, f"topology {name!r} is not defined in the DAG folder {config.dags_folder()}: its source is unknown"
    try:
        after = last_batch(records, last_txid)
    except LookupError as exc:
        return None, str(exc)
    try:
        spout = _clients.spout(definition)
        try:
            return spout.lag(after), None
        finally:
            spout.close()
    except Exception as exc:  # a user's spout may raise anything: the page says so instead of failing
        if strict and isinstance(exc, ServiceUnavailable):
            raise
        return None, f"{type(exc).__name__}: {exc}"


def rejections(name: str, limit: int) -> dict[str, Any]:
    """The entries a topology of the DAG folder rejected: the total and the newest ``limit`` (txdag rejections)."""
    from txdag.commit.rejections import read_rejections

    total, rows = read_rejections(_clients.redis(definitions()[name].redis_conn_id), name, limit)
    return {"topology": name, "total": total, "rejections": rows}


def rejections_of(name: str, limit: int = REJECTIONS_SHOWN, strict: bool = False
                  ) -> tuple[int | None, list[dict[str, Any]], str | None]:
    """For a view: (how many entries the topology rejected, the newest ``limit``, None), or (None, [], why not);
    with ``strict``, a Redis that does not answer raises its ServiceUnavailable."""
    if name not in definitions():
        return None, [], (f"topology {name!r} is not defined in the DAG folder {config.dags_folder()}: its Redis is "
                          "unknown")
    try:
        found = rejections(name, limit)
    except (TxdagError, OSError) as exc:
        if strict and isinstance(exc, ServiceUnavailable):
            raise
        return None, [], f"{type(exc).__name__}: {exc}"
    return found["total"], found["rejections"], None


def airflow_runs(dag_id: str, run_ids: list[str]) -> tuple[dict[str, str], bool | None, int | None]:
    """States of the given runs and of the DAG's active runs, whether the DAG is paused and its max_active_runs
    (None: not parsed)."""
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import or_, select

    with DATABASE_READERS, create_session() as session:
        rows = session.execute(select(DagRun.run_id, DagRun.state).where(
            DagRun.dag_id == dag_id, or_(DagRun.run_id.in_(run_ids), DagRun.state.in_(["queued", "running"]))))
        runs = {run_id: str(getattr(state, "value", state)) for run_id, state in rows}
        dag = session.execute(select(DagModel.is_paused, DagModel.max_active_runs).where(
            DagModel.dag_id == dag_id)).first()
    return runs, (dag[0] if dag else None), (dag[1] if dag else None)


def view(name: str, strict: bool = False) -> dict[str, Any]:
    """One topology's figures for the page; a service that fails is reported in the view (``error``), never as a
    500. With ``strict`` (the page's JSON list), a service that does not answer raises its ServiceUnavailable: a read
    that cannot read what it reports answers an error status, not a success."""
    try:
        return read_view(name, strict)
    except TxdagError as exc:
        if strict and isinstance(exc, ServiceUnavailable):
            raise
        return {"topology": name, "error": f"{type(exc).__name__}: {exc}"}


def views(names: list[str], seconds: float, read: Callable[[str], dict[str, Any]] | None = None
          ) -> list[dict[str, Any]]:
    """Each topology's view, every topology read at once on a thread of its own: one whose services hang (a stopped
    Redis, a source's broker) is an ``error`` after ``seconds`` while the others are shown (the page) or served (a
    scrape, within the scraper's timeout). A read still hanging goes on in the background (a daemon thread, which
    holds no process from exiting) and its result is dropped."""
    found: dict[str, dict[str, Any]] = {}

    def run(name: str) -> None:
        try:
            found[name] = (read or view)(name)
        except Exception as exc:  # a user's spout, a database error: this topology's figures are unknown
            found[name] = {"topology": name, "error": f"{type(exc).__name__}: {exc}"}

    threads = [threading.Thread(target=run, args=(name,), name=f"txdag-view-{name}", daemon=True) for name in names]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [found.get(name) or {"topology": name, "error": f"its records, source or Airflow's database did not "
                                                           f"answer within {seconds:g} s"} for name in names]


def read_view(name: str, strict: bool = False) -> dict[str, Any]:
    """One topology's figures, or the error that kept them from being read (``strict``: see :func:`view`)."""
    store = store_of(name)
    store.wait_connected()
    rejected, rejections, rejections_error = rejections_of(name, strict=strict)
    rejected_view = {"rejected": rejected, "rejections": rejections, "rejections_error": rejections_error}
    if not store.client.exists(store.path):
        runs, paused, _ = airflow_runs(name, [])
        lag, lag_error = lag_of(name, [], 0, strict)
        return {"topology": name, "never_ran": True, "paused": paused, "committed_txid": 0, "last_txid": 0,
                "in_flight": [], "failed": [], "stalled": [], "txids": [], "lag": lag, "lag_error": lag_error,
                "commits_per_minute": 0.0, **rejected_view}
    topo, records = read_snapshot(store)
    lag, lag_error = lag_of(name, records, topo.last_txid, strict)
    runs, paused, max_active_runs = airflow_runs(name, [r.run_id for r in records])
    return {**transactions_view(name, topo, records, now=datetime.now(UTC), runs=runs, lag=lag, lag_error=lag_error,
                                paused=paused, max_active_runs=max_active_runs), **rejected_view}


def api_as(token: str) -> AirflowAPI:
    """A REST client of this Airflow acting as the user whose token this is."""
    from airflow.configuration import conf

    return AirflowAPI(conf.get("api", "base_url", fallback="http://127.0.0.1:8080"), token=token)


def replay(name: str, from_txid: int, token: str) -> list[dict[str, Any]]:
    """Clear the run of txid ``from_txid`` and of every later kept txid, in txid order (``txdag replay``). ZooKeeper
    is asked only once connected, within the session timeout: kazoo would hold a request made while disconnected
    until the connection is back, so the replay would hang, then run long after its caller gave up."""
    store = store_of(name)
    store.wait_connected()
    records = replay_targets(store, from_txid)
    api = api_as(token)

    def clear() -> list[dict[str, Any]]:
        for record in records:
            api.clear_run(name, record.run_id)
        return [{"txid": r.txid, "run_id": r.run_id, "attempt": r.attempt, "was": r.status.value} for r in records]

    if not records:
        return clear()
    by = f"the transactions page's replay from txid {from_txid} ({socket.gethostname()} pid {os.getpid()})"
    return guarded_replay(store, records, by, lambda run_id: (api.run(name, run_id) or {}).get("state"), clear)


def set_paused(name: str, paused: bool, token: str) -> bool:
    """Pause or unpause the topology's DAG; returns the DAG's is_paused as Airflow answered it."""
    return bool(api_as(token).set_paused(name, paused)["is_paused"])

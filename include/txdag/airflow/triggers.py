"""The trigger a waiting step defers on: it fires the moment the txid it waits on is settled in ZooKeeper.

A commit of txid N waits until txid N - 1 is committed (or failed: then N is refused); so does the process step of
a topology with key-value states (it reads the state as of N - 1), for which only a commit of N - 1 settles it (a
failed N - 1 leaves it waiting for the replay, looking again at the time limit). Deferring on this trigger, instead
of rescheduling every ``commit_poke_interval``, resumes the task as soon as N - 1 settles, and holds neither a
worker nor the topology's pool slot meanwhile. The trigger decides nothing: on any event (settled, its own time
limit, an error) the task runs its step again, which decides.

It never fires sooner than ``earliest`` seconds after the task deferred (by default Airflow's ``[workers]
min_heartbeat_interval`` plus 2 s). Airflow 3.3 fails a resumed task that is already queued or running when the
executor's report of the deferring try's exit reaches the scheduler only then (apache/airflow#72716): a wait settled
at once would lose its try to that race (seen in CI: a process step resumed 4 s after it deferred was killed as
"finished with state success, but ... running"). The time counts from the deferral (``deferred_at``, by the
worker's clock: Airflow's hosts keep one time), not from the trigger's start, 1-2 s later, which made every wait of a
txid behind another that much longer.

``SourceBacklog`` is the other kind: an event trigger (Airflow's ``AssetWatcher``) on a topology's source asset,
which starts the topology's next run while its source has a backlog (``txdag.txid.backlog`` decides when).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from airflow.sdk import BaseHook
from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent

from txdag.airflow.hooks import airflow_clients, zookeeper_settings
from txdag.errors import ConfigError
from txdag.protocol.clients import Clients
from txdag.spouts.base import TransactionalSpout
from txdag.topology.topology import TransactionalTopology, definitions_of
from txdag.txid.backlog import BacklogWatch
from txdag.txid.report import last_batch, read_unsettled
from txdag.zk.client import close_zk
from txdag.zk.records import IN_FLIGHT, TxStatus
from txdag.zk.store import TransactionStore

POLL_SECONDS = 0.25  # one znode read per waiting commit: cheap for ZooKeeper, quick to notice
REPORT_MARGIN = 2.0  # seconds, beyond the worker's report interval, for the scheduler's loop to take the report


def earliest_default() -> float:
    """Seconds a wait lasts at least: until the worker's report of the deferral has reached the scheduler."""
    from airflow.configuration import conf

    return conf.getfloat("workers", "min_heartbeat_interval", fallback=5.0) + REPORT_MARGIN


class TxidSettled(BaseTrigger):
    """Fires once txid ``waiting_on`` of ``topology_id`` is committed or failed (only committed with
    ``committed_only``), or ``limit`` seconds after ``deferred_at`` (seconds since the epoch; None: now, as the task
    that defers builds it); not before ``earliest`` seconds after it (None: earliest_default())."""

    def __init__(self, topology_id: str, zookeeper_conn_id: str, waiting_on: int, limit: float,
                 committed_only: bool = False, earliest: float | None = None,
                 deferred_at: float | None = None) -> None:
        super().__init__()
        self.topology_id, self.zookeeper_conn_id = topology_id, zookeeper_conn_id
        self.waiting_on, self.limit, self.committed_only = waiting_on, limit, committed_only
        self.earliest = earliest
        self.deferred_at = time.time() if deferred_at is None else deferred_at

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__name__}",
                {"topology_id": self.topology_id, "zookeeper_conn_id": self.zookeeper_conn_id,
                 "waiting_on": self.waiting_on, "limit": self.limit, "committed_only": self.committed_only,
                 "earliest": self.earliest, "deferred_at": self.deferred_at})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        loop = asyncio.get_running_loop()
        earliest = earliest_default() if self.earliest is None else self.earliest
        waited = max(0.0, time.time() - self.deferred_at)  # both counted from the deferral
        not_before = loop.time() + max(0.0, earliest - waited)
        deadline = max(loop.time() + self.limit - waited, not_before)
        why, client = "time limit", None
        try:
            settings = zookeeper_settings(await BaseHook.aget_connection(self.zookeeper_conn_id))
            client = await asyncio.to_thread(settings.connect)
            store = TransactionStore(client, self.topology_id, root=settings.root)
            while loop.time() < deadline:
                if await asyncio.to_thread(settled, store, self.waiting_on, self.committed_only):
                    why = "settled"
                    break
                await asyncio.sleep(POLL_SECONDS)
        except Exception as exc:  # noqa: BLE001 - the task's own step reports the service; this only wakes it
            why = f"{type(exc).__name__}: {exc}"
            self.log.warning("topology=%s: cannot watch txid %s (%s); the task looks again itself in %gs",
                             self.topology_id, self.waiting_on, why, max(0.0, deadline - loop.time()))
            # not at once: a connection the triggerer lacks but the worker has would make the task defer and
            # wake in a loop; at the time limit it is the reschedule it replaced
            await asyncio.sleep(max(0.0, deadline - loop.time()))
        finally:
            if client is not None:
                await asyncio.to_thread(close_zk, client)
        await asyncio.sleep(max(0.0, not_before - loop.time()))
        yield TriggerEvent({"waiting_on": self.waiting_on, "why": why})


def settled(store: TransactionStore, txid: int, committed_only: bool = False) -> bool:
    """Whether ``txid`` is committed (or failed, unless ``committed_only``), or gone (cleaned up after its commit):
    one read of its record, which a commit moves to COMMITTED in the same ZooKeeper transaction as the topology's
    committed txid."""
    found = store.read_txid(txid)
    done = (TxStatus.COMMITTED,) if committed_only else (TxStatus.COMMITTED, TxStatus.FAILED)
    return found is None or found[0].status in done


class SourceBacklog(BaseEventTrigger):
    """Fires, for as long as it runs, each time topology ``topology_id`` (defined in ``dag_file``) should start a
    txid for its source's backlog (``BacklogWatch``): Airflow adds an event to the topology's source asset, which
    starts one run. A service that does not answer is logged and looked at again at the next poll."""

    def __init__(self, topology_id: str, dag_file: str, entries: int, wait_seconds: float, poll: float,
                 max_active: int) -> None:
        super().__init__()
        self.topology_id, self.dag_file = topology_id, dag_file
        self.entries, self.wait_seconds, self.poll, self.max_active = entries, wait_seconds, poll, max_active

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__name__}",
                {"topology_id": self.topology_id, "dag_file": self.dag_file, "entries": self.entries,
                 "wait_seconds": self.wait_seconds, "poll": self.poll, "max_active": self.max_active})

    def definition(self) -> TransactionalTopology:
        """The topology as its DAG file defines it now (run again whenever the file changes), with the DAG folder on
        ``sys.path`` as Airflow's DAG processor runs it (a spout module beside the file)."""
        from airflow.configuration import conf

        folder = os.path.abspath(os.path.expanduser(conf.get("core", "dags_folder")))
        if folder not in sys.path:
            sys.path.append(folder)
        defined = definitions_of(Path(self.dag_file))
        if self.topology_id not in defined:
            raise ConfigError(f"{self.dag_file} defines no topology {self.topology_id!r} any more (it defines "
                              f"{sorted(defined)}): Airflow stops this watch once its DAG processor has parsed it")
        return defined[self.topology_id]

    def active_runs(self) -> int:
        """The topology's DAG runs queued or running, as Airflow's triggerer reads them (its Execution API)."""
        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

        return RuntimeTaskInstance.get_dr_count(dag_id=self.topology_id, states=["queued", "running"])

    def connect(self, topology: TransactionalTopology) -> tuple[Clients, TransactionStore, TransactionalSpout]:
        """Fresh clients (the connections read again), the topology's znodes and its source's spout."""
        clients = airflow_clients()
        try:
            return clients, clients.store(self.topology_id, topology.zookeeper_conn_id), clients.spout(topology)
        except BaseException:
            clients.close()
            raise

    @staticmethod
    def disconnect(source: tuple[Clients, TransactionStore, TransactionalSpout] | None) -> None:
        if source is not None:
            try:
                source[2].close()
            finally:
                source[0].close()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        loop = asyncio.get_running_loop()
        watch = BacklogWatch(self.entries, self.wait_seconds, self.max_active)
        topology: TransactionalTopology | None = None
        source: tuple[Clients, TransactionStore, TransactionalSpout] | None = None
        loaded, failing, held = None, None, False
        try:
            while True:
                try:
                    modified = await asyncio.to_thread(os.path.getmtime, self.dag_file)
                    if topology is None or modified != loaded:  # the DAG file changed: its source may have too
                        topology = await asyncio.to_thread(self.definition)
                        loaded = modified
                        source = await asyncio.to_thread(self.disconnect, source)
                    if source is None:
                        source = await asyncio.to_thread(self.connect, topology)
                    lag, last_txid, in_flight, failed = await asyncio.to_thread(read_backlog, source[1], source[2])
                    active_runs = await asyncio.to_thread(self.active_runs)
                    if lag is None:
                        raise TypeError(f"its source {type(topology.source).__name__} tells no lag (its spout's "
                                        "lag() returns None): implement it (docs/spouts.md) to drain a backlog")
                    failing = None
                except Exception as exc:  # noqa: BLE001 - a service down, a DAG file being edited: look again
                    if failing != (why := f"{type(exc).__name__}: {exc}"):
                        self.log.warning("topology=%s: cannot read its backlog (%s); looking again every %gs",
                                         self.topology_id, why, self.poll)
                    failing = why
                    source = await asyncio.to_thread(self.disconnect, source)  # the next look connects afresh
                    await asyncio.sleep(self.poll)
                    continue
                if failed and not held:
                    self.log.warning("topology=%s: a txid after the committed one failed: its source starts no run "
                                     "until it is replayed (`txdag status %s` names it)", self.topology_id,
                                     self.topology_id)
                held = failed
                if watch.observe(loop.time(), lag, last_txid, in_flight, active_runs, failed):
                    self.log.info("topology=%s: %d source entries wait, %d txid(s) in flight after txid %d, %d "
                                  "run(s) active: starting a run", self.topology_id, lag, in_flight, last_txid,
                                  active_runs)
                    yield TriggerEvent({"topology": self.topology_id, "waiting": lag, "last_txid": last_txid,
                                        "in_flight": in_flight, "active_runs": active_runs})
                await asyncio.sleep(self.poll)
        finally:
            await asyncio.to_thread(self.disconnect, source)


def read_backlog(store: TransactionStore, spout: TransactionalSpout) -> tuple[int | None, int, int, bool]:
    """What the watch observes: (source entries in no batch yet, or None where the spout cannot tell; the last
    txid begun; txids in flight; whether a txid after the committed one failed). A topology that never ran has its
    whole source waiting."""
    if not store.client.exists(store.path):
        return spout.lag(None), 0, 0, False
    topo, records = read_unsettled(store)
    in_flight = sum(r.status in IN_FLIGHT for r in records)
    failed = any(r.status is TxStatus.FAILED and r.txid > topo.committed_txid for r in records)
    return spout.lag(last_batch(records, topo.last_txid)), topo.last_txid, in_flight, failed

"""The recovery benchmark's stack and what a trial reads from it: one topology per Spark mode (copies of
dags/tweets_analytics.py, bench/tput/dags.py), the tweets loaded so far and their ground truth, the txids' commit
times in ZooKeeper, Airflow's runs through the REST API, and the leftovers a stale attempt could write in Redis.

Every read tolerates the service a fault has just taken down: it is retried until the trial's deadline.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import redis
import requests
from tput import dags, data
from tput.services import BenchError, Stack

from txdag.airflow.api import AirflowAPI, AirflowAPIError, unique_run_id
from txdag.errors import TxdagError
from txdag.spouts import append_tweets
from txdag.spouts.samples import sample_tweets
from txdag.staging import layout as staging_layout
from txdag.zk.client import connect_zk
from txdag.zk.records import TxStatus
from txdag.zk.store import TransactionStore

T = TypeVar("T")
TRANSIENT = (requests.RequestException, AirflowAPIError, redis.RedisError, TxdagError, OSError)


def patiently(what: str, func: Callable[[], T], timeout: float = 300.0) -> T:
    """``func()``, retried every 0.5 s while a service is down (a fault's restart), for up to ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return func()
        except TRANSIENT as exc:
            if time.monotonic() > deadline:
                raise BenchError(f"{what}: still failing after {timeout:.0f} s: {exc}") from exc
            time.sleep(0.5)


@dataclass
class Topology:
    """One benchmark topology: its variant (DAG id, Redis database, batch, mode) and the tweets loaded for it."""

    variant: dags.Variant
    tweets: list[str] = field(default_factory=list)

    @property
    def dag(self) -> str:
        return self.variant.topology_id


@dataclass
class Hit:
    """Where the fault lands: the faulted txid's run and task, its task instance id and its task process."""

    lab: Lab
    topo: Topology
    run_id: str
    txid: int
    task: str
    ti_id: str
    task_pid: int
    restart_after: float


@dataclass
class Lab:
    stack: Stack
    seed: int = 100
    api: AirflowAPI = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.zk = connect_zk(self.stack.zk_hosts,
                             auth=(self.stack.cred["TXDAG_ZK_USER"], self.stack.cred["TXDAG_ZK_PASSWORD"]))
        self.api = self._login()

    def _login(self) -> AirflowAPI:
        home = Path(self.stack.airflow_home)
        password = json.loads((home / "simple_auth_manager_passwords.json").read_text())["admin"]
        return AirflowAPI(self.stack.airflow_url, "admin", password)

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()

    # --- data --------------------------------------------------------------------------------------------------

    def store(self, t: Topology) -> TransactionStore:
        return TransactionStore(self.zk, t.dag, root=self.stack.zk_root)

    def redis(self, t: Topology) -> redis.Redis:
        return self.stack.admin(t.variant.db)

    def append(self, t: Topology, n: int) -> None:
        """Appends ``n`` new tweets (a seed of their own, so each trial's batch differs) to the topology's source."""
        self.seed += 1
        more = sample_tweets(n, seed=self.seed)
        with self.redis(t) as client:
            append_tweets(client, more)
        t.tweets += more

    def check_exact(self, t: Topology) -> str:
        """"" when the committed counts equal the ground truth of every tweet loaded so far, else what differs."""
        try:
            with self.redis(t) as client:
                data.check_exact(client, data.expected_counts(t.tweets), t.dag)
        except data.CountMismatch as exc:
            return str(exc)
        return ""

    def leftovers(self, t: Topology, txids: list[int]) -> list[str]:
        """Staging and claim keys of these committed txids: what a stale attempt wrote after the cleanup (the
        txid's fence is meant to outlive the cleanup: not counted)."""
        fences = {staging_layout.fence_key(t.dag, x) for x in txids}
        found = []
        with self.redis(t) as client:
            for pattern in staging_layout.acl_patterns(t.dag):
                for key in client.scan_iter(pattern, count=1000):
                    name = key.decode()
                    if int(name[len(pattern) - 1:].split(":")[0]) in txids and name not in fences:
                        found.append(name)
        return sorted(found)

    # --- ZooKeeper -----------------------------------------------------------------------------------------------

    def committed_txid(self, t: Topology) -> int:
        store = self.store(t)
        store.ensure()
        return patiently("reading the committed txid", lambda: store.read_topology()[0].committed_txid)

    def commit_times(self, t: Topology, txids: list[int]) -> dict[int, float | None]:
        """Each txid's first COMMITTED time (epoch seconds, from its history in ZooKeeper), None if not committed."""
        records = patiently("reading txid records", lambda: self.store(t).read_txids(txids))
        out: dict[int, float | None] = {}
        for txid in txids:
            rec = records.get(txid, (None, 0))[0]
            ats = [h.at for h in rec.history if h.status is TxStatus.COMMITTED] if rec else []
            out[txid] = min(datetime.fromisoformat(a).timestamp() for a in ats) if ats else None
        return out

    def order_problems(self, t: Topology) -> str:
        """"" when every kept txid up to the last is COMMITTED and their first commits are in strictly increasing
        txid order; else what is wrong."""
        store = self.store(t)
        topo = patiently("reading the topology", lambda: store.read_topology()[0])
        if topo.committed_txid != topo.last_txid:
            return f"committed txid {topo.committed_txid} < last txid {topo.last_txid}"
        txids = patiently("listing txids", store.list_txids)
        times = self.commit_times(t, txids)
        missing = [x for x, at in times.items() if at is None]
        if missing:
            return f"txids {missing} not committed"
        ordered = [times[x] for x in sorted(times)]
        if ordered != sorted(ordered) or len(set(ordered)) != len(ordered):
            return f"commits out of txid order: {sorted(times.items(), key=lambda kv: kv[1] or 0)}"
        return ""

    def failed_txids(self, t: Topology) -> list[int]:
        store = self.store(t)
        records = patiently("reading txids", lambda: store.read_txids(store.list_txids()))
        return sorted(x for x, (rec, _) in records.items() if rec.status is TxStatus.FAILED)

    def txid_of(self, t: Topology, run_id: str) -> int | None:
        return patiently("reading a run's txid", lambda: self.store(t).txid_of_run(run_id))

    # --- Airflow ------------------------------------------------------------------------------------------------

    def trigger(self, t: Topology, count: int) -> list[str]:
        """``count`` runs with logical dates that grow with the order of triggering (and across trials)."""
        base = datetime.now(UTC) - timedelta(minutes=1)
        return [patiently("triggering a run", lambda i=i: self.api.trigger(
            t.dag, logical_date=base + timedelta(milliseconds=i), run_id=unique_run_id("recovery")))
            for i in range(count)]

    def ti(self, t: Topology, run_id: str, task: str) -> dict[str, Any]:
        return patiently("reading a task instance", lambda: self.api.task_instance(t.dag, run_id, task))

    def run_state(self, t: Topology, run_id: str) -> str:
        return patiently("reading a run", lambda: self.api.run(t.dag, run_id))["state"]

    def airflow_env(self) -> dict[str, str]:
        """The components' environment for a restart: the start's, without recreating the database."""
        return {k: v for k, v in self.stack.airflow_env.items() if k != "TXDAG_AIRFLOW_FRESH_DB"}

    def script(self, name: str, *args: str, airflow: bool = False) -> None:
        self.stack.script(name, *args, env=self.airflow_env() if airflow else None, timeout=300)

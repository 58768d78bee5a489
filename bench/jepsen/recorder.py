"""The recorder: while a schedule runs, what ZooKeeper and Redis hold over time, kept for the checker.

Two threads, so that a paused server stalls only its own readings: one reads the topology's committed txid and every
kept txid's record (attempts, status history with times) each ``zk_every`` s; one samples the three states' hashes
and their ``{state}:txid`` hashes in one MULTI/EXEC each ``redis_every`` s, between two clock readings (t0, t1). A
reading a paused or restarting server fails is skipped: the next one comes.

A history (JSON, format version 1) is::

    {"v": 1, "seed", "duration", "bound", "schedule": [fault], "injected": [{kind, at, healed, targets, note}],
     "base": {"committed", "covered", "states"}, "tweets": {"first", "texts"}, "txids": {txid: record},
     "committed": [[t, committed txid]], "samples": [{"t0", "t1", "states"}], "final": states,
     "final_at": [t0, t1], "healed_at", "stuck": what the drain had to do, "recorder_errors": {name: count}}

states: state -> field -> [value, txid]; record: {attempt, status, metadata, history: [[attempt, status, at, error]]}
(times in epoch seconds).
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any

import redis
from recov.lab import TRANSIENT, Lab, Topology

from txdag.analytics.tweets import STATES
from txdag.state.redis_backing import state_keys
from txdag.zk.records import TxidRecord

FORMAT_VERSION = 1


def snapshot(client: redis.Redis, prefix: str = "") -> dict[str, dict[str, list]]:
    """Every state's fields as [value, txid], read atomically (one MULTI/EXEC)."""
    pipe = client.pipeline(transaction=True)
    for state in STATES:
        values, txids = state_keys(f"{prefix}{state}")[:2]
        pipe.hgetall(values)
        pipe.hgetall(txids)
    replies = pipe.execute()
    out = {}
    for i, state in enumerate(STATES):
        values, txids = replies[2 * i], replies[2 * i + 1]
        out[state] = {f.decode(): [int(v), int(txids[f]) if f in txids else 0] for f, v in values.items()}
    return out


def record_json(rec: TxidRecord) -> dict[str, Any]:
    return {"attempt": rec.attempt, "status": rec.status.value, "metadata": rec.metadata, "run_id": rec.run_id,
            "history": [[h.attempt, h.status.value, datetime.fromisoformat(h.at).timestamp(), h.error]
                        for h in rec.history]}


def merged(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """``new`` with every history step either reading saw: a record keeps only its last steps (txdag.zk.records),
    so a txid retried often drops its first COMMITTING or COMMITTED from ZooKeeper, not from the history."""
    if old is None:
        return new
    steps = {tuple(step[:3]): step for step in [*old["history"], *new["history"]]}
    return {**new, "history": sorted(steps.values(), key=lambda step: step[2])}


class Recorder:
    def __init__(self, lab: Lab, topo: Topology, *, zk_every: float = 1.0, redis_every: float = 2.0) -> None:
        self.lab, self.topo = lab, topo
        self.zk_every, self.redis_every = zk_every, redis_every
        self.txids: dict[str, dict[str, Any]] = {}
        self.committed: list[list] = []
        self.samples: list[dict[str, Any]] = []
        self.errors: dict[str, int] = {"zk": 0, "redis": 0}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(self.read_zk, zk_every), daemon=True),
                         threading.Thread(target=self._loop, args=(self.sample, redis_every), daemon=True)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        for t in self._threads if wait else ():
            t.join(timeout=120)

    def _loop(self, read: Any, every: float) -> None:
        while not self._stop.is_set():
            try:
                read()
            except Exception as exc:  # noqa: BLE001 - counted: a reading that fails must not stop the readings
                name = type(exc).__name__
                self.errors[name] = self.errors.get(name, 0) + 1
            self._stop.wait(every)

    def read_zk(self, since: int = 0) -> None:
        store = self.lab.store(self.topo)
        try:
            topo = store.read_topology()[0]
            t = time.time()
            records = store.read_txids([x for x in store.list_txids() if x > since])
        except TRANSIENT:
            self.errors["zk"] += 1
            return
        self.committed.append([round(t, 3), topo.committed_txid])
        for txid, (rec, _) in records.items():
            self.txids[str(txid)] = merged(self.txids.get(str(txid)), record_json(rec))

    def sample(self) -> None:
        try:
            with self.lab.redis(self.topo) as client:
                t0 = time.time()
                states = snapshot(client, self.topo.variant.prefix)
                t1 = time.time()
        except TRANSIENT:
            self.errors["redis"] += 1
            return
        self.samples.append({"t0": round(t0, 3), "t1": round(t1, 3), "states": states})

"""The workload: a producer that appends tweets and triggers runs through the REST API, keeping two runs (two
txids, the topology's max_active_transactions) in flight, as the recovery benchmark's trials do, but continuously.

Each time fewer than two of its runs are unfinished it appends one batch of new tweets (seeded texts; their ids as
the source gave them, the ground truth) and triggers one run. Once ``appending`` is cleared it only triggers, while
the committed txids do not cover every tweet appended (the drain).
"""

from __future__ import annotations

import threading
from typing import Any

from recov.lab import TRANSIENT, Lab, Topology

from txdag.spouts import append_tweets
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweet_batches import check_metadata

IN_FLIGHT = 2


def covered(lab: Lab, topo: Topology) -> tuple[int, int]:
    """(committed txid, the last tweet id its batch covers; 0 before any)."""
    store = lab.store(topo)
    store.ensure()  # before the first run's coordinate creates it
    committed = store.read_topology()[0].committed_txid
    rec = store.read_txid(committed) if committed else None
    if rec is None:
        return committed, 0
    start, quantity = check_metadata(rec[0].metadata)
    return committed, start + quantity - 1


class Workload:
    def __init__(self, lab: Lab, topo: Topology, batch: int, seed: int, tweets: dict[int, str]) -> None:
        self.lab, self.topo, self.batch, self.seed = lab, topo, batch, seed
        self.tweets = tweets  # id -> text: every tweet appended to the source so far (the ground truth's input)
        self.runs: list[str] = []
        self.appending = threading.Event()
        self.appending.set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._unfinished: list[str] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        if wait:
            self._thread.join(timeout=600)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._step()
            except TRANSIENT as exc:
                print(f"jepsen:   workload: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            self._stop.wait(1.0)

    def _step(self) -> None:
        self._unfinished = [r for r in self._unfinished if self.lab.api.run(self.topo.dag, r)["state"]
                            not in ("success", "failed")]
        if len(self._unfinished) >= IN_FLIGHT:
            return
        if self.appending.is_set():
            self.seed += 1
            texts = sample_tweets(self.batch, seed=self.seed)
            with self.lab.redis(self.topo) as client:
                ids = append_tweets(client, texts, prefix=self.topo.variant.prefix)
            self.tweets.update(zip(ids, texts))
        elif covered(self.lab, self.topo)[1] >= max(self.tweets, default=0):
            return
        run = self.lab.trigger(self.topo, 1)[0]
        self.runs.append(run)
        self._unfinished.append(run)

    def status(self) -> dict[str, Any]:
        return {"runs": len(self.runs), "unfinished": list(self._unfinished), "tweets": len(self.tweets)}

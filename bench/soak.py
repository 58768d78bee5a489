"""Soak: the tweets and word-count topologies for hundreds of txids under random faults, then an exact audit.

    .venv/bin/python bench/soak.py --txids 500 --seed 7          (the full soak, ~15 min on 2 cores)
    .venv/bin/python bench/soak.py --txids 40 --seed 1           (the short one CI runs)

It starts a Redis, a second Redis (word count's stream partition "1") and a ZooKeeper of its own on free
loopback ports, loads the sources, and drives runs the way Airflow would: each phase (coordinate, process,
commit) of each run is a process of its own (bench/soak_worker.py), retried up to 3 times when it dies; a
final failure fails the txid and the later ones, and the soak then clears those runs (replays them). Two
txids are in flight per topology; their processing runs in parallel. Faults, drawn per run from a seeded
random generator:

    coordinate, process, staged, commit, committed   SIGKILL at that fault point (txdag.faults), once
    process-for-good      the process phase dies on every try: the txid fails, the later ones cascade, replay
    redis-process         the Redis of the states and sources is killed during processing, restarted 0.3-2.5 s on
    redis-commit          the same during the commit
    zk-coordinate         ZooKeeper killed during coordination, restarted 0.3-2 s later
    zk-expire-commit      ZooKeeper killed during the commit for longer than the session timeout
    partition-replay      (word count) partition 1 goes down and the txid's run is cleared: the opaque replay
                          emits a different batch; the later txid is re-emitted; the partition comes back

The audit: the committed state equals the ground truth computed from the loaded sources (tuples lost and
double counted are both 0), commits are strictly in txid order with no gap, and every txid's final attempt is
the one recorded as committed in ZooKeeper. It prints a table and exits 1 when any check fails.
This is not a test and asserts no timing; tests/integration/test_soak.py runs the short version.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent / "tests"))  # tests/support/: the real servers the soak starts
from soak_worker import TWEETS, WORDS, build  # noqa: E402
from support.servers import RedisServer, ZooKeeperServer  # noqa: E402

from txdag.analytics.tweets import tweet_partials  # noqa: E402
from txdag.spouts import StreamPartition, append_entries, append_tweets  # noqa: E402
from txdag.spouts.samples import sample_sentences, sample_tweets  # noqa: E402
from txdag.zk.records import TxStatus  # noqa: E402

POINTS = ("coordinate", "process", "staged", "commit", "committed")
INFRA = ("process-for-good", "redis-process", "redis-commit", "zk-coordinate", "zk-expire-commit")
TRIES = 3
ZK_TIMEOUT = 4.0  # the workers' ZooKeeper session timeout, seconds


@dataclass
class Run:
    run_id: str
    fault: str | None
    emitted: dict | None = None  # the coordinate result (txid, attempt, metadata...)
    processed: dict | None = None  # txid and attempt that were staged
    done: bool = False


@dataclass
class Tally:
    faults: Counter = field(default_factory=Counter)  # kind -> times it happened
    replays: int = 0  # runs cleared and coordinated again
    phases: int = 0
    retries: int = 0


class Soak:
    def __init__(self, workdir: Path, seed: int, fault_rate: float, batch: int) -> None:
        self.workdir, self.rng, self.fault_rate, self.batch = workdir, random.Random(seed), fault_rate, batch
        self.redis, self.partition = RedisServer(workdir / "redis"), RedisServer(workdir / "partition")
        self.zk = ZooKeeperServer(workdir / "zk")
        self.fired = workdir / "fired"
        self.fired.mkdir()
        self.tally = Tally()
        self.committed_attempts: dict[str, dict[int, int]] = {TWEETS: {}, WORDS: {}}  # what the commits reported
        self.root = f"/soak-{seed}"

    def start(self) -> None:
        for server in (self.redis, self.partition, self.zk):
            server.start()

    def stop(self) -> None:
        for server in (self.redis, self.partition, self.zk):
            server.kill()

    def config(self, topology: str) -> dict:
        return {"topology": topology, "redis": self.redis.url, "zk": self.zk.hosts, "root": self.root,
                "zk_timeout": ZK_TIMEOUT, "batch": self.batch, "max_active": 2,
                "partitions": {"0": self.redis.url, "1": self.partition.url}}

    # --- one phase, in a process of its own ------------------------------------------------------------------

    def phase(self, topology: str, name: str, run: Run, faults: str = "", owner: str = "") -> tuple[int, dict]:
        env = {**os.environ, "TXDAG_FAULTS_ALLOWED": "1", "TXDAG_FAULTS_FIRED_DIR": str(self.fired)}
        env.pop("TXDAG_FAULTS", None)
        if faults:
            env["TXDAG_FAULTS"] = faults
        if name == "process" and run.fault == "process-for-good":
            env.pop("TXDAG_FAULTS_FIRED_DIR")  # dies on every try
        args = [sys.executable, str(HERE / "soak_worker.py"), name, json.dumps(self.config(topology)), run.run_id,
                json.dumps(run.processed if name == "commit" else run.emitted), owner]
        self.tally.phases += 1
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
        if "TXDAG FAULT" in done.stderr:
            point = done.stderr.split("TXDAG FAULT ")[1].split()[0]
            self.tally.faults[run.fault if run.fault == "process-for-good" and point == "process" else point] += 1
        lines = done.stdout.strip().splitlines()
        return done.returncode, (json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {})

    def outage(self, server: RedisServer | ZooKeeperServer, kind: str, down_for: tuple[float, float]
               ) -> threading.Thread:
        """Kill ``server`` within 0.3 s and restart it ``down_for`` seconds later, beside the running phase."""
        delay, down = self.rng.uniform(0, 0.3), self.rng.uniform(*down_for)

        def cycle() -> None:
            time.sleep(delay)
            server.kill()
            time.sleep(down)
            server.start()

        self.tally.faults[kind] += 1
        thread = threading.Thread(target=cycle)
        thread.start()
        return thread

    def with_retries(self, topology: str, name: str, run: Run, faults: str) -> tuple[int, dict]:
        """Like an Airflow task with retries: the fault plan goes to the first try only (FIRED_DIR makes it once)."""
        outage = {("process", "redis-process"): (self.redis, (0.3, 2.5)),
                  ("commit", "redis-commit"): (self.redis, (0.3, 2.5)),
                  ("coordinate", "zk-coordinate"): (self.zk, (0.3, 2.0)),
                  ("commit", "zk-expire-commit"): (self.zk, (ZK_TIMEOUT * 1.5, ZK_TIMEOUT * 2))}.get((name, run.fault))
        thread = self.outage(outage[0], run.fault, outage[1]) if outage else None
        try:
            for attempt in range(1, TRIES + 1):
                rc, out = self.phase(topology, name, run, faults, owner=f"{run.run_id} try {attempt}")
                if rc in (0, 3):
                    return rc, out
                self.tally.retries += 1
                time.sleep(0.2)
            return rc, out
        finally:
            if thread is not None:
                thread.join()
                outage[0].start() if not outage[0].running else None

    # --- runs, the way the scheduler and an operator drive them -----------------------------------------------

    def drive(self, topology: str, txids: int) -> int:
        """Runs until ``txids`` are committed or the source is drained; returns the committed txids."""
        active: list[Run] = []
        committed, next_txid, n = 0, 1, 0
        drained = False
        while committed < txids and (active or not drained):
            while len(active) < 2 and not drained and committed + len(active) < txids:
                run = Run(f"{topology}__{n}", self.pick(topology))
                n += 1
                plan = f"coordinate:{topology}:{next_txid}:1" if run.fault == "coordinate" else ""
                rc, out = self.with_retries(topology, "coordinate", run, plan)
                if out.get("kind") == "emission":
                    run.emitted, next_txid = out, out["txid"] + 1
                    active.append(run)
                elif out.get("kind") == "notready":
                    drained = True
                else:
                    raise RuntimeError(f"{topology} run {run.run_id}: coordinate gave {rc} {out}")
            self.process_all(topology, [r for r in active if r.processed is None])
            for run in sorted(active, key=lambda r: r.emitted["txid"]):
                if run.processed is None or run.processed.get("final"):
                    break
                if run.fault == "partition-replay" and topology == WORDS:
                    self.partition_replay(topology, run)
                rc, out = self.commit(topology, run)
                if rc == 3 or out.get("status") not in ("committed", "already committed"):
                    break
                run.done, committed = True, committed + 1
                self.committed_attempts[topology][run.processed["txid"]] = run.processed["attempt"]
            active = [r for r in active if not r.done]
            if any(r.processed is None or r.processed.get("final") for r in active) or self.stuck(active):
                self.replay(topology, active)
        return committed

    def pick(self, topology: str) -> str | None:
        if self.rng.random() >= self.fault_rate:
            return None
        kinds = POINTS + INFRA + (("partition-replay",) if topology == WORDS else ())
        return self.rng.choice(kinds)

    def process_all(self, topology: str, runs: list[Run]) -> None:
        """Process the runs in parallel (threads, each driving a worker process); None on a final failure."""
        def one(run: Run) -> None:
            plan = (f"{run.fault}:{topology}:{run.emitted['txid']}:{run.emitted['attempt']}"
                    if run.fault in ("process", "staged", "process-for-good") else "")
            plan = plan.replace("process-for-good", "process")
            rc, out = self.with_retries(topology, "process", run, plan)
            if rc == 0:
                run.processed = out
            else:  # the final failure: on_failure_callback fails the txid and the later ones
                self.fail(topology, run)
                run.processed = {"final": True}

        threads = [threading.Thread(target=one, args=(run,)) for run in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def commit(self, topology: str, run: Run) -> tuple[int, dict]:
        plan = (f"{run.fault}:{topology}:{run.processed['txid']}:{run.processed['attempt']}"
                if run.fault in ("commit", "committed") else "")
        for _ in range(50):
            rc, out = self.with_retries(topology, "commit", run, plan)
            if rc == 0 and out.get("status") == "waiting":
                time.sleep(0.1)
                continue
            if rc not in (0, 3):
                self.fail(topology, run)
                run.processed = {"final": True}
            elif rc == 3:
                run.processed = {"final": True}
            return rc, out
        return rc, out

    def fail(self, topology: str, run: Run) -> None:
        failing = Run(run.run_id, None, emitted={**run.emitted, **(run.processed or {}), "error": "retries exhausted"})
        for _ in range(TRIES):
            if self.phase(topology, "fail", failing)[0] == 0:
                return

    def stuck(self, active: list[Run]) -> bool:
        return bool(active) and all(r.processed is not None for r in active)

    def replay(self, topology: str, active: list[Run]) -> None:
        """The operator clears the failed run and its later runs: each is coordinated again, in txid order."""
        for run in sorted(active, key=lambda r: r.emitted["txid"]):
            run.fault = None
            rc, out = self.with_retries(topology, "coordinate", run, "")
            if out.get("kind") != "emission":
                raise RuntimeError(f"{topology} run {run.run_id}: the replay's coordinate gave {rc} {out}")
            run.emitted, run.processed = out, None
            self.tally.replays += 1

    def partition_replay(self, topology: str, run: Run) -> None:
        """Partition 1 goes down; the run is cleared, so the opaque spout replays the txid without it."""
        self.tally.faults["partition-replay"] += 1
        self.partition.kill()
        try:
            rc, out = self.with_retries(topology, "coordinate", Run(run.run_id, None, run.emitted), "")
            if out.get("kind") != "emission":
                raise RuntimeError(f"{topology} run {run.run_id}: the replay's coordinate gave {rc} {out}")
            run.emitted, run.processed = out, None
            self.tally.replays += 1
            self.process_all(topology, [run])
        finally:
            self.partition.start()


# --- sources and the audit ------------------------------------------------------------------------------------


def load(soak: Soak, txids: int) -> tuple[list[str], dict[str, list[str]]]:
    """Enough tuples for ``txids`` batches per topology, plus a margin the drive does not reach."""
    client = redis.Redis.from_url(soak.redis.url)
    tweets = sample_tweets(txids * soak.batch + soak.batch // 2, seed=5)
    append_tweets(client, tweets)
    per = txids * soak.batch // 2 + 5
    sentences = {"0": sample_sentences(per, seed=6), "1": sample_sentences(per, seed=8)}
    for name, url in (("0", soak.redis.url), ("1", soak.partition.url)):
        append_entries(StreamPartition.from_url(name, url, f"{WORDS}:{name}"), sentences[name])
    return tweets, sentences


def audit(soak: Soak, topology: str, truth: dict[str, Counter]) -> dict:
    local = build(soak.config(topology))
    try:
        client = redis.Redis.from_url(soak.redis.url, decode_responses=True)
        lost = double = 0
        for name, counts in truth.items():
            expected = local.encode(name, counts, 0, [])  # a key the state refuses is a rejection: not stored
            got = {k: int(v) for k, v in client.hgetall(local.states[name].backing.namespace).items()}
            for key in set(expected) | set(got):
                diff = got.get(key, 0) - expected.get(key, 0)
                lost, double = lost + max(-diff, 0), double + max(diff, 0)
        status = local.coordinator.status()
        records = sorted(status.txids, key=lambda r: r.txid)
        committed = [r for r in records if r.status is TxStatus.COMMITTED]
        stamps = [next(h.at for h in r.history if h.status is TxStatus.COMMITTED) for r in committed]
        return {
            "txids committed": status.topology.committed_txid,
            "tuples lost": lost,
            "tuples double-counted": double,
            "commits ordered, no gap": [r.txid for r in committed] == list(range(1, status.topology.committed_txid + 1))
            and stamps == sorted(stamps),
            "final attempts recorded": {r.txid: r.attempt for r in records} == soak.committed_attempts[topology],
            "max attempt": max((r.attempt for r in committed), default=0),
        }
    finally:
        local.coordinator.store.client.stop()


def committed_truth(soak: Soak, topology: str, tweets: list[str], sentences: dict[str, list[str]]) -> dict:
    """The ground truth of what the committed batches cover, from the sources and the last committed metadata."""
    local = build(soak.config(topology))
    try:
        status = local.coordinator.status()
        last = max((r for r in status.txids if r.txid == status.topology.committed_txid), key=lambda r: r.txid)
        meta = last.metadata
    finally:
        local.coordinator.store.client.stop()
    if topology == TWEETS:
        covered = tweets[: meta["from"] - 1 + meta["quantity"]]
        return tweet_partials(covered)
    client_of = {"0": soak.redis.url, "1": soak.partition.url}
    words: Counter = Counter()
    for name, part in meta["partitions"].items():
        stream = redis.Redis.from_url(client_of[name], decode_responses=True)
        ids = stream.xrange(f"{WORDS}:{name}", max=part.get("last") or part["after"])
        words.update((w,) for line in sentences[name][: len(ids)] for w in line.split())
    return {"words": words}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--txids", type=int, default=500, help="txids to commit, in total over both topologies")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--fault-rate", type=float, default=0.3, help="share of runs that get a fault")
    parser.add_argument("--batch", type=int, default=20, help="tuples per txid (max_transaction_size)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the servers' data directory")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="txdag-soak-"))
    soak, started = Soak(workdir, args.seed, args.fault_rate, args.batch), time.monotonic()
    results: dict[str, dict] = {}
    try:
        soak.start()
        per_topology = {TWEETS: args.txids - args.txids // 2, WORDS: args.txids // 2}
        tweets, sentences = load(soak, max(per_topology.values()))
        for topology, txids in per_topology.items():
            soak.drive(topology, txids)
            results[topology] = audit(soak, topology, committed_truth(soak, topology, tweets, sentences))
    finally:
        soak.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    wall = time.monotonic() - started
    ok = print_table(soak.tally, results, wall, args)
    if args.json:
        args.json.write_text(json.dumps({"ok": ok, "wall_s": round(wall, 1), "seed": args.seed,
                                         "faults": dict(soak.tally.faults), "replays": soak.tally.replays,
                                         "retries": soak.tally.retries, "topologies": results}, indent=2))
    return 0 if ok else 1


def print_table(tally: Tally, results: dict[str, dict], wall: float, args: argparse.Namespace) -> bool:
    print(f"txdag soak: seed {args.seed}, fault rate {args.fault_rate}, batch {args.batch}, {tally.phases} phase "
          f"processes, {tally.retries} retried")
    print(f"{'fault injected':<22} {'times':>6}")
    for kind in POINTS + INFRA + ("partition-replay",):
        print(f"{kind:<22} {tally.faults.get(kind, 0):>6}")
    print(f"{'total':<22} {sum(tally.faults.values()):>6}")
    print(f"replays (runs cleared) {tally.replays:>6}")
    keys = ["txids committed", "tuples lost", "tuples double-counted", "commits ordered, no gap",
            "final attempts recorded", "max attempt"]
    print(f"{'':<26}" + "".join(f"{t:>14}" for t in results))
    for key in keys:
        print(f"{key:<26}" + "".join(f"{str(r[key]):>14}" for r in results.values()))
    total = sum(r["txids committed"] for r in results.values())
    ok = all(r["tuples lost"] == 0 and r["tuples double-counted"] == 0 and r["commits ordered, no gap"]
             and r["final attempts recorded"] for r in results.values()) and total >= args.txids
    print(f"txids committed in total: {total}; wall time {wall:.0f} s; {'OK' if ok else 'FAILED'}")
    return ok


if __name__ == "__main__":
    sys.exit(main())

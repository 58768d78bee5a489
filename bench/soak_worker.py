"""One phase of one run of a soak topology, in a process of its own, so that a fault can kill it for real.

    python bench/soak_worker.py coordinate|process|commit|fail CONFIG_JSON RUN_ID [TX_JSON] [OWNER]

It runs the same step as the Airflow task of that phase (txdag.protocol.steps, which
txdag.airflow.operators runs too), with the batch processed by the topology's Python reference instead of Spark:
claim the attempt or re-emit, stage and seal, mark processed; commit in txid order; on the final failure, fail
the run's txid and the later ones. It prints one JSON line.
Exit codes: 0 done, 3 the txid moved on or cascaded (the phase must not be retried), other: failed (a source
down at coordinate, or an exception: retried).
"""

from __future__ import annotations

import json
import sys
from collections import Counter

import redis

from txdag.analytics.tweets import STATES, tweet_partials
from txdag.attempt import TransactionAttempt
from txdag.local import LocalTopology
from txdag.protocol import AlreadyCommitted, Committed, Emission, Processed, SourceDown, Wait, steps
from txdag.spouts import OpaquePartitionedStreamSpout, StreamPartition
from txdag.spouts.tweets import TweetsTransactionalSpout
from txdag.state import JoinedKeyCodec, OpaqueMap, RedisBackingMap, TransactionalMap
from txdag.state.keys import DEFAULT_KEY_CODEC
from txdag.txid.coordinator import Coordinator
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore

TWEETS, WORDS = "soak_tweets", "soak_words"
FINAL = 3  # the exit code of a phase that must not be retried: the txid moved on, or cascaded


def build(config: dict) -> LocalTopology:
    """The soak's tweets_analytics (transactional) or word_count (opaque, two stream partitions)."""
    client = redis.Redis.from_url(config["redis"], socket_timeout=5)
    store = TransactionStore(connect_zk(config["zk"], timeout=config["zk_timeout"]), config["topology"],
                             root=config["root"])
    if config["topology"] == TWEETS:
        spout = TweetsTransactionalSpout(client, max_transaction_size=config["batch"], topology=TWEETS)
        codecs = {"users_hashtags": JoinedKeyCodec(":", 2)}
        states = {name: TransactionalMap(RedisBackingMap(client, f"{TWEETS}:{name}",
                                                         key_codec=codecs.get(name, DEFAULT_KEY_CODEC)))
                  for name in STATES}
        process = lambda records: tweet_partials(r.value for r in records)  # noqa: E731
    else:
        partitions = [StreamPartition.from_url(name, url, f"{WORDS}:{name}", timeout=1.0)
                      for name, url in sorted(config["partitions"].items())]
        spout = OpaquePartitionedStreamSpout(partitions, max_per_partition=config["batch"] // 2, topology=WORDS)
        states = {"words": OpaqueMap(RedisBackingMap(client, f"{WORDS}:words"))}
        process = lambda records: {"words": Counter((w,) for r in records for w in r.value.split())}  # noqa: E731
    coordinator = Coordinator(store, spout, max_active_transactions=config["max_active"], keep_txids=100_000,
                              lock_timeout=3 * config["zk_timeout"])
    return LocalTopology(coordinator, client, states, process)


def coordinate(topology: LocalTopology, run_id: str) -> tuple[int, dict]:
    outcome = steps.coordinate(topology.runtime, run_id)
    if isinstance(outcome, Emission):
        return 0, {"kind": "emission", "txid": outcome.tx.txid, "attempt": outcome.tx.attempt,
                   "metadata": outcome.metadata, "replay": outcome.replay,
                   "already_committed": outcome.already_committed,
                   "unavailable_partitions": list(outcome.unavailable_partitions)}
    # a source that is down fails this try (the task's retry coordinates again); the others are answers
    return (1 if isinstance(outcome, SourceDown) else 0), {"kind": type(outcome).__name__.lower(),
                                                          "reason": outcome.reason}


def process(topology: LocalTopology, run_id: str, emitted: dict, owner: str) -> tuple[int, dict]:
    emission = Emission(TransactionAttempt(emitted["txid"], emitted["attempt"]), emitted["metadata"],
                        emitted["replay"], already_committed=emitted["already_committed"])
    outcome = steps.process(topology.runtime, run_id, emission, topology.run_job, owner=owner)
    if isinstance(outcome, Processed):
        return 0, {"txid": outcome.tx.txid, "attempt": outcome.tx.attempt, "tuples": outcome.tuples,
                   "rejected": outcome.rejected}
    if isinstance(outcome, AlreadyCommitted):
        return 0, {"txid": emission.tx.txid, "attempt": emission.tx.attempt, "tuples": 0}
    return FINAL, {"error": outcome.reason, "final": True}  # Superseded (Wait: no key-value states here)


def commit(topology: LocalTopology, tx: TransactionAttempt) -> tuple[int, dict]:
    outcome = steps.commit(topology.runtime, tx)
    if isinstance(outcome, Committed):
        return 0, {"status": "committed", "applied": outcome.applied}
    if isinstance(outcome, AlreadyCommitted):
        return 0, {"status": "already committed", "applied": 0}
    if isinstance(outcome, Wait):
        return 0, {"status": "waiting", "waiting_on": outcome.waiting_on}
    return FINAL, {"error": outcome.reason, "final": True}  # Refused (cascade, never processed) or Superseded


def fail(topology: LocalTopology, run_id: str, error: str) -> tuple[int, dict]:
    failed = steps.fail(topology.runtime, run_id, error)
    return 0, {"failed": list(failed.txids) if failed else []}


def main(argv: list[str]) -> int:
    phase, config, run_id = argv[0], json.loads(argv[1]), argv[2]
    emitted = json.loads(argv[3]) if len(argv) > 3 else None
    topology = build(config)
    try:
        if phase == "coordinate":
            rc, result = coordinate(topology, run_id)
        elif phase == "process":
            rc, result = process(topology, run_id, emitted, argv[4])
        elif phase == "commit":
            rc, result = commit(topology, TransactionAttempt(emitted["txid"], emitted["attempt"]))
        elif phase == "fail":
            rc, result = fail(topology, run_id, emitted.get("error", "failed in the soak"))
        else:
            raise SystemExit(f"unknown phase {phase!r}")
    finally:
        topology.coordinator.store.client.stop()
    print(json.dumps(result))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

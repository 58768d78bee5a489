"""One phase of one run of a soak topology, in a process of its own, so that a fault can kill it for real.

    python bench/soak_worker.py coordinate|process|commit|fail CONFIG_JSON RUN_ID [TX_JSON] [OWNER]

It does what the Airflow task of that phase does (txdag.airflow.operators), with the batch processed by the
topology's Python reference instead of Spark: claim the attempt or re-emit, stage and seal, mark processed;
commit in txid order; on the final failure, fail the txid and the later ones. It prints one JSON line.
Exit codes: 0 done, 3 the txid moved on or cascaded (the phase must not be retried), other: failed.
"""

from __future__ import annotations

import json
import sys
from collections import Counter

import redis

from txdag.analytics.tweets import STATES, tweet_partials
from txdag.attempt import TransactionAttempt
from txdag.claims import ReemitError, claim_attempt
from txdag.commit import commit_transaction
from txdag.coordinator import Coordinator, Emission
from txdag.errors import CascadeError, StaleAttemptError
from txdag.faults import crash_if_requested
from txdag.local import LocalTopology
from txdag.rejections import record_rejections
from txdag.spouts import OpaquePartitionedStreamSpout, StreamPartition
from txdag.spouts.tweets import TweetsTransactionalSpout
from txdag.state import JoinedKeyCodec, OpaqueMap, RedisBackingMap, TransactionalMap
from txdag.state.keys import DEFAULT_KEY_CODEC
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore

TWEETS, WORDS = "soak_tweets", "soak_words"


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


def coordinate(topology: LocalTopology, run_id: str) -> dict:
    outcome = topology.coordinate(run_id)
    if isinstance(outcome, Emission):
        return {"kind": "emission", "txid": outcome.tx.txid, "attempt": outcome.tx.attempt,
                "metadata": outcome.metadata, "replay": outcome.replay, "already_committed": outcome.already_committed}
    return {"kind": type(outcome).__name__.lower(), "reason": outcome.reason}


def process(topology: LocalTopology, run_id: str, emitted: dict, owner: str) -> dict:
    if emitted["already_committed"]:
        return {"txid": emitted["txid"], "attempt": emitted["attempt"], "tuples": 0}
    coordinator = topology.coordinator
    emission = Emission(TransactionAttempt(emitted["txid"], emitted["attempt"]), emitted["metadata"], emitted["replay"])
    emission = claim_attempt(coordinator, topology.staging, run_id, emission, owner)
    tx = emission.tx
    batch = coordinator.spout.emit_batch(tx, emission.metadata)
    record_rejections(topology.client, coordinator.name, tx, batch.rejections)
    partials = topology.process_fn(batch.records)
    topology.staging.stage(tx, {name: topology.encode(name, deltas) for name, deltas in partials.items()})
    if not coordinator.mark_processed(tx):
        raise StaleAttemptError(f"topology {coordinator.name!r} {tx}: moved on while processing; dropped")
    crash_if_requested("staged", coordinator.name, tx)
    return {"txid": tx.txid, "attempt": tx.attempt, "tuples": len(batch), "rejected": len(batch.rejections)}


def commit(topology: LocalTopology, tx: TransactionAttempt) -> dict:
    outcome = commit_transaction(topology.coordinator, topology.staging, topology.client, tx, topology.states)
    return {"status": outcome.status, "waiting_on": outcome.waiting_on, "applied": outcome.applied}


def main(argv: list[str]) -> int:
    phase, config, run_id = argv[0], json.loads(argv[1]), argv[2]
    emitted = json.loads(argv[3]) if len(argv) > 3 else None
    topology = build(config)
    try:
        if phase == "coordinate":
            result = coordinate(topology, run_id)
        elif phase == "process":
            result = process(topology, run_id, emitted, argv[4])
        elif phase == "commit":
            result = commit(topology, TransactionAttempt(emitted["txid"], emitted["attempt"]))
        elif phase == "fail":
            tx = TransactionAttempt(emitted["txid"], emitted["attempt"])
            result = {"failed": topology.coordinator.fail(tx, emitted.get("error", "failed in the soak"))}
        else:
            raise SystemExit(f"unknown phase {phase!r}")
    except (CascadeError, StaleAttemptError, ReemitError) as exc:
        print(json.dumps({"error": str(exc), "final": True}))
        return 3
    finally:
        topology.coordinator.store.client.stop()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The demo so far: seed 000's tweets analytics run in this process over real Redis and ZooKeeper.

    bash scripts/demo.sh        (sets up, starts Redis and ZooKeeper, runs this)

Loads sample tweets at keys 1..N with NEXT_WRITE (in Redis database 2, so the layout is exactly seed 000's),
runs the txids two at a time (both processed, then committed in order), replays one committed txid to show
that a replay changes no count, and prints the top users and hashtags.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import time

import redis

from txdag.analytics.tweets import MARKER_KEY, STATES, tweet_partials
from txdag.local import LocalTopology
from txdag.protocol import AlreadyCommitted, Committed, Wait
from txdag.redisio import describe
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.state import JoinedKeyCodec, RedisBackingMap, TransactionalMap
from txdag.state.keys import DEFAULT_KEY_CODEC
from txdag.txid.coordinator import Coordinator, Emission
from txdag.zk.client import connect_zk
from txdag.zk.records import TxStatus
from txdag.zk.store import TransactionStore

TOPOLOGY = "tweets_analytics_demo"


def build(client: redis.Redis, zk_hosts: str, batch_size: int) -> LocalTopology:
    spout = TweetsTransactionalSpout(client, max_transaction_size=batch_size, topology=TOPOLOGY)
    user, password = os.environ.get("TXDAG_ZK_USER"), os.environ.get("TXDAG_ZK_PASSWORD")  # credentials.env
    store = TransactionStore(connect_zk(zk_hosts, auth=(user, password) if user and password else None), TOPOLOGY)
    coordinator = Coordinator(store, spout, max_active_transactions=2)
    codecs = {"users_hashtags": JoinedKeyCodec(":", 2)}  # seed 000's field "user:hashtag"
    states = {
        name: TransactionalMap(RedisBackingMap(client, name, key_codec=codecs.get(name, DEFAULT_KEY_CODEC)))
        for name in STATES
    }
    process = lambda records: tweet_partials(r.value for r in records)  # noqa: E731
    return LocalTopology(coordinator, client, states, process, marker_key=MARKER_KEY)


def resume(topology: LocalTopology) -> None:
    """Replay, in txid order, the txids an interrupted demo left in flight (Airflow would retry their runs)."""
    pending = [r for r in topology.coordinator.status().txids if r.status is not TxStatus.COMMITTED]
    if pending:
        print(f"resuming {len(pending)} txid(s) left in flight by an interrupted run, from ZooKeeper:")
    for record in pending:
        emission = topology.coordinate(record.run_id)
        if isinstance(emission, Emission):
            topology.process(emission)
            print(f"  {emission.tx}: {said(topology.commit(emission.tx))}")


def said(outcome: Committed | AlreadyCommitted | Wait) -> str:
    """A commit's outcome in the demo's words."""
    if isinstance(outcome, Committed):
        return f"committed, {outcome.applied} keys updated"
    if isinstance(outcome, AlreadyCommitted):
        return "already committed"
    return f"waiting for txid {outcome.waiting_on}"


def run(topology: LocalTopology, run_prefix: str) -> None:
    """New runs two at a time, as a scheduler with max_active_runs=2 would start them, until nothing is left."""
    for first in itertools.count(0, 2):
        emissions = [
            e for n in (first, first + 1) if isinstance(e := topology.coordinate(f"{run_prefix}__{n}"), Emission)
        ]
        for emission in emissions:
            size = topology.process(emission)
            print(f"  {emission.tx}: processed {size} tweets (from {emission.metadata['from']})")
        for emission in emissions:
            print(f"  {emission.tx}: {said(topology.commit(emission.tx))}")
        if len(emissions) < 2:
            return


def main() -> None:
    parser = argparse.ArgumentParser(description="txdag demo: seed 000's tweets analytics, in process")
    parser.add_argument("--tweets", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=100)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    url = os.environ.get("TXDAG_REDIS_URL", "redis://127.0.0.1:6391/0").rsplit("/", 1)[0] + "/2"
    client = redis.Redis.from_url(url)
    topology = build(client, os.environ.get("TXDAG_ZK_HOSTS", "127.0.0.1:2191"), args.batch_size)
    if client.get("NEXT_WRITE") is None:
        store = topology.coordinator.store
        if store.client.exists(store.path):  # the demo's source was wiped (services.sh wipe redis): start over too
            store.client.delete(store.path, recursive=True)
            print(f"Redis holds no demo tweets: the demo's transactions in ZooKeeper ({store.path}) start over")
        ids = append_tweets(client, sample_tweets(args.tweets))
        print(f"loaded {len(ids)} sample tweets at keys {ids[0]}..{ids[-1]} of Redis {describe(client)}")
    resume(topology)
    print("running two txids in flight at a time (both processed, then committed in txid order):")
    run(topology, run_prefix=f"demo__{time.strftime('%Y%m%dT%H%M%S')}_{os.getpid()}")
    status = topology.coordinator.status()
    last = status.topology.committed_txid
    if not status.txids:
        print("nothing to do: no tweets after the last committed batch")
        return
    replay = topology.coordinate(status.txids[-1].run_id)
    if isinstance(replay, Emission):
        topology.process(replay)
        print(f"  replayed {replay.tx} (a cleared run): {said(topology.commit(replay.tx))}; no count changed")
    for name in ("users", "hashtags"):
        top = sorted(((int(v), k.decode()) for k, v in client.hgetall(name).items()), reverse=True)[:5]
        print(f"top {name}: " + ", ".join(f"{k} {v}" for v, k in top))
    print(f"committed up to txid {last}; state in Redis hashes users, hashtags, users_hashtags at {describe(client)}")


if __name__ == "__main__":
    main()

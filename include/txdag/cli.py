"""The ``txdag`` command: seed sample data, show a topology's transactions, replay from a txid.

Hosts and passwords come from the same Airflow connections the DAGs use (``redis_default``,
``zookeeper_default``), read through Airflow's secrets (environment variables or the metadata database), so
run it where the ``airflow`` CLI works: ``eval "$(bash scripts/airflow.sh env)"`` first on a dev machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from txdag.errors import TxdagError

SAMPLES = {
    "tweets_analytics": ("tweets", ""),
    "global_count": ("sentences", "global_count:"),
}


def _connection(conn_id: str) -> Any:
    from airflow.models.connection import Connection

    return Connection.get_connection_from_secrets(conn_id)


def _redis(conn_id: str) -> Any:
    import redis

    from txdag.airflow.hooks import redis_url_of

    return redis.Redis.from_url(redis_url_of(_connection(conn_id)))


def _store(topology: str, conn_id: str) -> Any:
    from txdag.airflow.hooks import zookeeper_settings
    from txdag.zk.client import connect_zk
    from txdag.zk.store import TransactionStore

    hosts, auth, root, timeout = zookeeper_settings(_connection(conn_id))
    return TransactionStore(connect_zk(hosts, auth=auth, timeout=timeout), topology, root=root)


def cmd_seed(args: argparse.Namespace) -> int:
    """Append sample data for a shipped topology to the source it reads."""
    from txdag.sample import sample_sentences, sample_tweets
    from txdag.spouts import StreamPartition, append_entries, append_tweets

    client = _redis(args.redis_conn_id)
    if args.topology == "word_count":
        streams = ["sentences:0", "sentences:1"]
        for i, stream in enumerate(streams):
            ids = append_entries(StreamPartition(stream, client, stream),
                                 sample_sentences(args.count // len(streams), seed=args.seed + i))
            print(f"appended {len(ids)} sentences to stream {stream}")
        return 0
    kind, prefix = SAMPLES[args.topology]
    items = sample_tweets(args.count, seed=args.seed) if kind == "tweets" else sample_sentences(args.count,
                                                                                                 seed=args.seed)
    ids = append_tweets(client, items, prefix=prefix)
    print(f"appended {len(ids)} {kind} at keys {prefix}{ids[0]}..{prefix}{ids[-1]}" if ids else "appended nothing")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """The committed frontier and every kept txid's status, attempt and run."""
    store = _store(args.topology, args.zookeeper_conn_id)
    from txdag.zk.records import TopologyRecord

    topo, _ = store.read_topology() if store.client.exists(store.path) else (TopologyRecord(0, 0), 0)
    records = [r for _, (r, _) in sorted(store.read_txids(store.list_txids()).items())] if topo.last_txid else []
    if args.json:
        print(json.dumps({"last_txid": topo.last_txid, "committed_txid": topo.committed_txid, "txids": [
            {"txid": r.txid, "attempt": r.attempt, "status": r.status.value, "run_id": r.run_id,
             "error": r.error} for r in records]}, indent=2))
        return 0
    print(f"topology {args.topology}: last txid {topo.last_txid}, committed up to {topo.committed_txid}")
    for r in records:
        print(f"  txid {r.txid:>6}  attempt {r.attempt:>3}  {r.status.value:<10}  run {r.run_id}"
              + (f"  ({r.error})" if r.error else ""))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """Storm's re-emission from txid N, for runs of any kind: clears (all tasks of) the run of every kept txid
    >= N, in txid order, through Airflow's REST API. Works where *Clear* with *Future* cannot (runs without a
    logical date, or logical dates that do not grow with the txid)."""
    from txdag.airflow.api import api_from_env

    store = _store(args.topology, args.zookeeper_conn_id)
    topo, _ = store.read_topology()
    if not 1 <= args.from_txid <= topo.last_txid:
        print(f"txdag replay: topology {args.topology} has txids 1..{topo.last_txid}; nothing at {args.from_txid}",
              file=sys.stderr)
        return 1
    records = store.read_txids(range(args.from_txid, topo.last_txid + 1))
    missing = [t for t in range(args.from_txid, topo.last_txid + 1) if t not in records]
    if missing:
        print(f"txdag replay: txids {missing} were rotated out of ZooKeeper (keep_txids); their runs are "
              f"unknown", file=sys.stderr)
        return 1
    api = api_from_env()
    for txid, (record, _) in sorted(records.items()):
        print(f"txid {txid}: clearing run {record.run_id} (attempt {record.attempt}, {record.status.value})")
        if not args.dry_run:
            api.clear_run(args.topology, record.run_id)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="txdag", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    seed = sub.add_parser("seed", help="append sample data for a shipped topology")
    seed.add_argument("topology", choices=[*SAMPLES, "word_count"])
    seed.add_argument("--count", type=int, default=500)
    seed.add_argument("--seed", type=int, default=0, help="random seed of the sample generator")
    seed.add_argument("--redis-conn-id", default="redis_default")
    seed.set_defaults(func=cmd_seed)
    status = sub.add_parser("status", help="show a topology's transactions in ZooKeeper")
    status.add_argument("topology")
    status.add_argument("--zookeeper-conn-id", default="zookeeper_default")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)
    replay = sub.add_parser("replay", help="replay txid N and every later one (clears their runs)")
    replay.add_argument("topology")
    replay.add_argument("--from", dest="from_txid", type=int, required=True, metavar="N")
    replay.add_argument("--zookeeper-conn-id", default="zookeeper_default")
    replay.add_argument("--dry-run", action="store_true")
    replay.set_defaults(func=cmd_replay)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except TxdagError as exc:
        print(f"txdag {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""The process step's batch read: on the driver (main's way until issue 34) against the executors, side by side.

    .venv/bin/python bench/batch_read.py [--sizes 20000,100000,500000] [--repeat 3] [--redis-url URL]
                                         [--connect sc://127.0.0.1:15002]

For each batch size, the seed's tweets are written once under a prefix of the run's, and spark_jobs/
tweets_analytics runs on the same batch through ``txdag.spark.runner.run_job`` (read, plan, stage, seal; no
commit), alternately with the tweets spout as it ships (its Spark read: each executor task MGETs its id range) and
with the same spout read through ``emit_batch`` on the driver (chunked MGET into a Python list, then
``createDataFrame``). Prints each way's median seconds per step and in all, and new ÷ old. Local Spark (local[2])
unless --connect names a Spark Connect server (the warm mode's). A figure, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from txdag import TransactionAttempt
from txdag.defaults import REDIS_CONN_ID
from txdag.spouts import SpoutContext, TransactionalSpout
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.staging.store import Staging
from txdag.topology.definition import JobSpec, State, TweetsSource

ROOT = Path(__file__).resolve().parents[1]
STATES = (State("users"), State("hashtags"), State("users_hashtags", key_fields=2, separator=":"))


class DriverReadSpout(TweetsTransactionalSpout):
    """The shipped spout without its Spark read: read through emit_batch on the driver."""

    read = TransactionalSpout.read


@dataclass(frozen=True)
class DriverReadSource(TweetsSource):
    def build(self, ctx: SpoutContext) -> TransactionalSpout:
        return DriverReadSpout(ctx.redis(self.redis_conn_id), prefix=self.prefix,
                               max_transaction_size=self.max_transaction_size, topology=ctx.topology)


def batch_sizes(text: str) -> list[int]:
    """An argparse type: positive whole numbers, comma-separated (a mistake is a usage error before Spark starts)."""
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: tweets per txid as whole numbers, e.g. 20000,100000") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every size must be at least 1")
    return sizes


def load_process() -> Any:
    spec = importlib.util.spec_from_file_location("txdag_bench_tweets_analytics", ROOT / "spark_jobs" /
                                                  "tweets_analytics.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=batch_sizes, default="20000,100000,500000",
                        help="tweets per txid, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each way at each size (the median is shown)")
    parser.add_argument("--redis-url", default=os.environ.get("TXDAG_TEST_REDIS_URL", "redis://127.0.0.1:6391/0"))
    parser.add_argument("--ways", default="driver,executors", help="which reads to run (a 500k batch through the "
                        "driver can take a Connect server's 1 GB heap down: run executors alone there)")
    parser.add_argument("--connect", help="a Spark Connect URL (sc://host:port) instead of local Spark")
    args = parser.parse_args()
    from txdag.spark.runner import run_job
    from txdag.spark.session import local_session

    if args.connect:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.remote(args.connect).getOrCreate()
    else:
        spark = local_session("txdag-bench-batch-read")
    client = redis.Redis.from_url(args.redis_url)
    clients = {REDIS_CONN_ID: client}
    process = load_process()
    print(f"{'tweets/txid':>12} {'way':>9} {'read s':>8} {'plan s':>8} {'stage s':>8} {'total s':>8}  driver÷executors")
    for size in args.sizes:
        prefix = f"bench{uuid.uuid4().hex[:8]}:"
        ids = append_tweets(client, sample_tweets(size, seed=size), prefix=prefix)
        metadata = {"v": 1, "from": ids[0], "quantity": len(ids)}
        ways = {way: source for way, source in (("driver", DriverReadSource(prefix=prefix, max_transaction_size=size)),
                ("executors", TweetsSource(prefix=prefix, max_transaction_size=size))) if way in args.ways.split(",")}
        times: dict[str, list[dict[str, float]]] = {way: [] for way in ways}
        txid, totals = 0, set()
        for _ in range(args.repeat):
            for way, source in ways.items():
                txid += 1
                spec = JobSpec(prefix.rstrip(":"), TransactionAttempt(txid, 1), metadata, source, STATES)
                started = time.perf_counter()
                result = run_job(spec, process, clients, spark)
                staged = Staging(client, spec.topology).read(spec.tx)
                totals.add(tuple(sum(staged[s.name].values()) for s in STATES))  # every way stages the same counts
                assert len(totals) == 1, f"{way} staged {totals} (mentions per state) at {size} tweets per txid"
                steps = dict(result.timings)
                steps["total"] = time.perf_counter() - started
                times[way].append(steps)
                Staging(client, spec.topology).delete(txid, [1], [s.name for s in STATES])
        medians = {way: {step: statistics.median(t.get(step, 0.0) for t in runs)
                         for step in ("read", "plan", "stage", "total")} for way, runs in times.items()}
        for way, m in medians.items():
            both = way == "executors" and len(medians) == 2
            ratio = f"{medians['driver']['total'] / m['total']:.2f}x" if both else ""
            print(f"{size:>12} {way:>9} {m['read']:>8.2f} {m['plan']:>8.2f} {m['stage']:>8.2f} {m['total']:>8.2f}  "
                  f"{ratio}", flush=True)
        keys = list(client.scan_iter(match=f"{prefix}*", count=10_000))
        for i in range(0, len(keys), 10_000):
            client.delete(*keys[i:i + 10_000])
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Does one shared Spark Connect session's memory grow per txid? Many txids of spark_jobs/tweets_analytics through
the shipped path of a warm task, the Connect server's heap measured after a full GC as they go.

    bash scripts/services.sh start && TXDAG_SPARK_CONNECT_PORT=15093 bash scripts/spark-connect.sh start
    eval "$(bash scripts/services.sh env)"   # TXDAG_REDIS_URL: the admin user of the set-up's Redis
    .venv/bin/python bench/session_soak.py --connect sc://127.0.0.1:15093 [--txids 120] [--batch 20000] [--every 10]

One batch of the seed's tweets is written once; each txid then runs ``txdag.spark.connect.run_connected`` (what
the ``process`` task runs in warm mode: a new client joins the topology's shared session of the day, ships
nothing, reads, plans and stages, and leaves the session open) and its staging is deleted. Every ``--every`` txids
it asks the server's JVM for a full GC (``jcmd <pid> GC.run``) and reads the heap then in use (``GC.heap_info``),
with the JVM's RSS and its Python workers' count and RSS. It prints them and the heap's growth per txid over the
second half (least squares): a session that keeps something per txid shows there (a soak past 00:00 UTC moves to
the next day's session, as tasks do); with ``--settle`` it samples
once more after that many idle seconds, when the server has let go of what it keeps for a while. ``jcmd`` comes
with a JDK; without one, RSS alone is shown. A figure, not a test: nothing here asserts a size.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
import warnings
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import redis

from txdag import TransactionAttempt
from txdag.commit.rejections import rejections_key
from txdag.defaults import REDIS_CONN_ID
from txdag.errors import TxdagError
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import append_tweets
from txdag.staging.store import Staging
from txdag.topology.definition import JobSpec, TweetsSource

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from batch_read import STATES  # noqa: E402 - the tweets job's three states
from tput.memory import MB, listener_pid  # noqa: E402

JOB = BENCH.parent / "spark_jobs" / "tweets_analytics.py"
HEAP_USED = re.compile(r"garbage-first heap\s+total \d+K, used (\d+)K")  # G1's (the JVM's choice on >= 2 cores)


def heap_after_gc(pid: int) -> float | None:
    """MB of heap in use right after a full GC of the JVM ``pid``; None without jcmd."""
    try:
        subprocess.run(["jcmd", str(pid), "GC.run"], check=True, capture_output=True, timeout=60)
        info = subprocess.run(["jcmd", str(pid), "GC.heap_info"], check=True, capture_output=True, text=True,
                              timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return heap_used(info)


def heap_used(info: str) -> float | None:
    """MB in use of a G1 heap, from ``jcmd GC.heap_info``'s output (None for another collector's)."""
    found = HEAP_USED.search(info)
    return int(found.group(1)) / 1024 if found else None


def workers(pid: int) -> tuple[int, float]:
    """The server's Python workers: how many, and their RSS in MB."""
    procs = [p for p in psutil.Process(pid).children(recursive=True) if "pyspark" in " ".join(p.cmdline())]
    return len(procs), sum(p.memory_info().rss for p in procs) / MB


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares growth per txid of (txid, MB) points."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return statistics.linear_regression(xs, ys).slope if len(set(xs)) > 1 else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connect", required=True, help="the Spark Connect server's URL (sc://host:port)")
    parser.add_argument("--txids", type=int, default=120, help="txids to run (default 120)")
    parser.add_argument("--batch", type=int, default=20_000, help="tweets per txid (default 20,000)")
    parser.add_argument("--every", type=int, default=10, help="txids between two heap samples (default 10)")
    parser.add_argument("--redis-url", default=os.environ.get("TXDAG_REDIS_URL") or "redis://127.0.0.1:6391/0",
                        help="the Redis of the tweets and the staging (default $TXDAG_REDIS_URL, which "
                        "`eval \"$(bash scripts/services.sh env)\"` sets)")
    parser.add_argument("--settle", type=float, default=0.0, help="seconds to wait idle after the last txid before a "
                        "last heap sample (the server keeps a finished operation of a client that left for "
                        "spark.connect.execute.manager.detachedTimeout, 5 min by default)")
    parser.add_argument("--result", help="also write the samples as JSON here")
    args = parser.parse_args()
    if min(args.txids, args.batch, args.every) < 1:
        parser.error("--txids, --batch and --every are whole numbers >= 1")
    from txdag.spark.connect import run_connected

    warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)  # once per txid

    if not args.connect.startswith("sc://"):
        parser.error(f"--connect takes a Spark Connect URL, sc://host:port, got {args.connect!r}")
    port = urlsplit(args.connect.replace("sc://", "http://", 1)).port or 15002
    pid = listener_pid(port)
    if pid is None:
        parser.error(f"nothing listens on port {port}: start the server (TXDAG_SPARK_CONNECT_PORT={port} bash "
                     "scripts/spark-connect.sh start)")
    client = redis.Redis.from_url(args.redis_url)
    topology = f"soak{uuid.uuid4().hex[:8]}"
    prefix = f"{topology}:"
    ids = append_tweets(client, sample_tweets(args.batch), prefix=prefix)
    source = TweetsSource(prefix=prefix, max_transaction_size=args.batch)
    metadata = {"v": 1, "from": ids[0], "quantity": len(ids)}
    samples: list[dict] = []
    txid = 0
    print(f"{'txid':>5} {'heap after GC MB':>17} {'JVM RSS MB':>11} {'workers':>8} {'workers MB':>11} {'txid s':>7}")
    try:
        for txid in range(1, args.txids + 1):
            spec = JobSpec(topology, TransactionAttempt(txid, 1), metadata, source, STATES)
            started = time.perf_counter()
            run_connected(spec, str(JOB), {REDIS_CONN_ID: client}, args.connect)
            seconds = time.perf_counter() - started
            Staging(client, topology).delete(txid, [1], [s.name for s in STATES])
            if txid == 1 or txid % args.every == 0:
                heap = heap_after_gc(pid)
                count, workers_mb = workers(pid)
                sample = {"txid": txid, "heap_mb": heap, "jvm_rss_mb": psutil.Process(pid).memory_info().rss / MB,
                          "workers": count, "workers_mb": workers_mb, "seconds": seconds}
                samples.append(sample)
                shown = "-" if heap is None else f"{heap:,.0f}"
                print(f"{txid:>5} {shown:>17} {sample['jvm_rss_mb']:>11,.0f} {count:>8} {workers_mb:>11,.0f} "
                      f"{seconds:>7.2f}", flush=True)
    finally:
        try:  # the tweets, a failed txid's staging, any rejection
            Staging(client, topology).delete(txid, [1], [s.name for s in STATES])
            keys = [*client.scan_iter(match=f"{prefix}*", count=10_000), rejections_key(topology)]
            for i in range(0, len(keys), 10_000):
                client.delete(*keys[i:i + 10_000])
        except (TxdagError, redis.RedisError) as exc:
            print(f"session soak: could not delete the keys under {prefix!r} ({exc})")
    settled = None
    if args.settle > 0:
        time.sleep(args.settle)
        settled = heap_after_gc(pid)
        print(f"after {args.settle:.0f} s idle: heap after GC {'-' if settled is None else f'{settled:,.0f}'} MB, "
              f"JVM RSS {psutil.Process(pid).memory_info().rss / MB:,.0f} MB")
    half = [s for s in samples if s["txid"] > args.txids // 2]
    growth = {key: slope([(s["txid"], s[key]) for s in half if s[key] is not None])
              for key in ("heap_mb", "jvm_rss_mb", "workers_mb")}
    print("growth per txid over the second half: " + ", ".join(f"{k} {v * 1024:+.1f} KB" for k, v in growth.items()))
    if samples[-1]["heap_mb"] is None:
        print("no heap figures: jcmd (a JDK's) is not on PATH; RSS alone does not shrink after a GC")
    if args.result:
        Path(args.result).write_text(json.dumps({"samples": samples, "growth_mb_per_txid": growth, "batch": args.batch,
                                                 "txids": args.txids, "settle_seconds": args.settle,
                                                 "settled_heap_mb": settled}, indent=2) + "\n")
    return 0


def run() -> int:
    """main(), with a service that is down or refuses told in one line."""
    try:
        return main()
    except TxdagError as exc:
        raise SystemExit(f"session soak: {exc}") from None


if __name__ == "__main__":
    sys.exit(run())

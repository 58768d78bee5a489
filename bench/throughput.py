"""txdag's throughput benchmark (issue 5): one command, a table, results.json and chart.png.

    .venv/bin/python bench/throughput.py                      # everything, 1,000,000 tweets (~30-40 min on 2 cores)
    .venv/bin/python bench/throughput.py --quick              # 20,000 tweets, 3 latency samples (a few minutes)
    .venv/bin/python bench/throughput.py --tweets 200000 --batch 10000 --only P1,P3 --out /tmp/b
    .venv/bin/python bench/throughput.py --only P1,P4 --cluster --flush   # P1 cold and P4 on the cluster too
    .venv/bin/python bench/throughput.py --only P1 --kafka    # P1 over a Kafka topic too, beside the Redis source
    .venv/bin/python bench/throughput.py --only P1 --pg-states   # P1 with the states in PostgreSQL too
    .venv/bin/python bench/throughput.py --batches 20000,100000,500000   # P1 at each size: the curve

P1  drain N generated tweets (seed 000's layout) through copies of the tweets_analytics topology on a real Airflow
    (scheduler, LocalExecutor, PostgreSQL) with warm Spark (Spark Connect), checked exactly against the ground
    truth: tweets/s from the first trigger to the last commit; beside it a single-process Python baseline and a
    Spark Structured Streaming peer (bench/streaming_peer.py) over the same tweets, both checked too; the ratios.
    --kafka: the same tweets also produced to a fresh topic of the run's (--kafka-partitions partitions, on the
    broker of scripts/kafka.sh), drained by a copy whose source is a transactional KafkaSource taking
    batch // partitions records of each partition per txid, and read by the same peer through Spark's own Kafka
    source (maxOffsetsPerTrigger = the batch), both checked; the ratios Kafka / Redis and Kafka / peer over Kafka.
    --pg-states: the same tweets also drained, after the Redis copy, by a copy whose three states are PostgreSQL
    tables (PostgresStore, a database of their own on the stack's PostgreSQL, made fresh and dropped at the end;
    its role is kept), checked by key tuple against the ground truth; the ratio PostgreSQL states / Redis states.
P2  trigger -> committed latency of 1-tweet txids: median, min, max, split into scheduler wait and the three tasks.
P3  commit keys/s for 100k distinct keys (bench/commit_throughput.py) beside redis-benchmark, same Redis.
P4  tweets/s with max_active_transactions 1, 2 and 4 on one backlog size.
--batches runs P1 (with the options that add to it) once per size on the same --tweets backlog, each a whole run in
    out/batch-<size>/, then prints the curve and writes curve.json and curve.png (bench/tput/curve.py).
Peak RSS of the Spark and Airflow processes during P1 (and of the peer). --cold adds cold spark-submit to P1/P2.
--cluster then runs P1 (cold: spark-submit to a Spark standalone master) and P4 on the loopback cluster of
scripts/cluster.sh (CeleryExecutor, Redis Cluster, ZooKeeper ensemble), with their ratios cluster / single node.

It starts Redis, ZooKeeper, PostgreSQL, Airflow and a Spark Connect server (and with --kafka the Kafka broker)
through scripts/ on the TXDAG_*_PORT ports (or reuses a server already answering), and stops what it started;
the Kafka topic is deleted at the end (unless --keep-data). Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

PHASES = ("P1", "P2", "P3", "P4")
DEFAULT_BATCH = 20_000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="\n".join(__doc__.splitlines()[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tweets", type=int, default=1_000_000, help="P1's backlog (default 1,000,000)")
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH,
                   help=f"tweets per txid (TweetsSource max_transaction_size; also the peer's micro-batch), "
                        f"default {DEFAULT_BATCH:,}")
    p.add_argument("--batches", default=None, metavar="N,N,...",
                   help="P1 once per batch size (instead of --batch), then the curve against the batch size")
    p.add_argument("--mat", type=int, default=None, help="max_active_transactions of P1 (default: the shipped one's)")
    p.add_argument("--commit-poke-interval", type=float, default=None,
                   help="seconds between a waiting commit's checks (default: the shipped topology's)")
    p.add_argument("--only", default=",".join(PHASES), help="comma-separated phases to run (default all: P1,P2,P3,P4)")
    p.add_argument("--quick", action="store_true", help="20,000 tweets, 3 latency samples, small P3/P4 (development)")
    p.add_argument("--cold", action="store_true", help="also cold spark-submit mode in P1 and P2")
    p.add_argument("--cold-tweets", type=int, default=100_000, help="P1's backlog in cold mode (default 100,000)")
    p.add_argument("--kafka", action="store_true", help="also P1 over a Kafka topic (KafkaSource) and the peer "
                   "over it (Spark's Kafka source), beside the Redis source")
    p.add_argument("--kafka-partitions", type=int, default=4, help="partitions of --kafka's topic (default 4)")
    p.add_argument("--pg-states", action="store_true", help="also P1 with the topology's states in PostgreSQL "
                   "(PostgresStore), beside the states in Redis")
    p.add_argument("--by-source", action="store_true", help="also P1 with the runs started by the topology's "
                   "source (drain=Backlog: Airflow's triggerer watches the backlog), the benchmark triggering none, "
                   "beside the triggered P1")
    p.add_argument("--cluster", action="store_true", help="after the single node's phases, P1 (cold, on "
                   "--cold-tweets; implies --cold) and P4 on the loopback cluster of scripts/cluster.sh (its "
                   "TXDAG_CLUSTER_*_PORT ports; its Airflow must not be running), beside the single node's figures")
    p.add_argument("--p4-tweets", type=int, default=None, help="P4's backlog (default min(--tweets, 10 batches))")
    p.add_argument("--latency-samples", type=int, default=5, help="1-tweet txids timed in P2 (default 5)")
    p.add_argument("--keys", type=int, default=100_000, help="P3's distinct keys (default 100,000)")
    p.add_argument("--repeat", type=int, default=3, help="P3's repeats, best taken (default 3)")
    p.add_argument("--profile", action="store_true", help="py-spy over Airflow's task processes during a short "
                   "extra drain (after the figures; needs py-spy: pip install -e '.[bench]')")
    p.add_argument("--airflow-env", action="append", default=[], metavar="KEY=VALUE",
                   help="extra environment of the Airflow components, e.g. AIRFLOW__SCHEDULER__...=...")
    p.add_argument("--redis-db", type=int, default=4, help="first of the 9 Redis databases used (default 4..12)")
    p.add_argument("--flush", action="store_true", help="empty those databases first if they hold keys")
    p.add_argument("--keep-data", action="store_true", help="leave the Redis databases as the run left them")
    p.add_argument("--timeout", type=float, default=3600, help="give up a drain after this many seconds")
    p.add_argument("--out", default=None, help="output folder (default bench/results/<timestamp>/)")
    for name in ("redis", "zk", "pg", "airflow", "spark-connect", "kafka"):
        p.add_argument(f"--{name}-port", type=int, default=None, help=f"default $TXDAG_{name.upper().replace('-', '_')}"
                       "_PORT or the scripts' default")
    args = p.parse_args(argv)
    if args.quick:
        args.tweets = 20_000 if "--tweets" not in (argv or sys.argv) else args.tweets
        args.batch = 2_000 if "--batch" not in (argv or sys.argv) else args.batch
        args.latency_samples, args.keys, args.repeat = 3, 20_000, 1
        args.cold_tweets = min(args.cold_tweets, args.tweets)
    if args.batches is not None:
        curve_args(p, args, argv if argv is not None else sys.argv)
    args.p4_tweets = args.p4_tweets or min(args.tweets, 10 * args.batch)
    args.phases = [x.strip().upper() for x in args.only.split(",") if x.strip()]
    unknown = set(args.phases) - set(PHASES)
    if unknown:
        p.error(f"unknown phase(s) {sorted(unknown)} in --only; use {','.join(PHASES)}")
    for flag in ("kafka", "pg_states", "by_source"):
        if getattr(args, flag) and "P1" not in args.phases:
            p.error(f"--{flag.replace('_', '-')} adds to P1: --only must name it")
    if args.kafka and not 1 <= args.kafka_partitions <= args.batch:
        p.error(f"--kafka-partitions must be between 1 and the batch ({args.batch:,})")
    if args.cluster and not {"P1", "P4"} & set(args.phases):
        p.error("--cluster runs P1 and P4 on the cluster: --only must name one of them")
    for size in args.batches or []:
        if size > args.tweets:
            p.error(f"--batches {size:,} is more than the backlog (--tweets {args.tweets:,}): it would be one txid "
                    "that is not full")
    args.cold = args.cold or (args.cluster and "P1" in args.phases)  # the cluster's P1 is cold: the single node's too
    started = datetime.now(UTC)
    args.started = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    args.out = args.out or str(Path(__file__).resolve().parent / "results" / started.strftime("%Y%m%d-%H%M%S"))
    return args


def curve_args(p: argparse.ArgumentParser, args: argparse.Namespace, given: list[str]) -> None:
    """--batches: the sizes, P1 alone (the default --only becomes P1), and nothing that does not vary per size."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from batch_read import batch_sizes  # bench/batch_read.py's --sizes

    try:
        sizes = batch_sizes(args.batches)
    except argparse.ArgumentTypeError as exc:
        p.error(f"--batches {exc}")
    if len(set(sizes)) != len(sizes):
        p.error(f"--batches names a size twice: {args.batches!r}")
    args.batches = sorted(sizes)
    if any(a == "--batch" or a.startswith("--batch=") for a in given):
        p.error("--batches runs each size in turn: leave out --batch")
    if not any(a == "--only" or a.startswith("--only=") for a in given):
        args.only = "P1"
    elif [x.strip().upper() for x in args.only.split(",") if x.strip()] != ["P1"]:
        p.error("--batches draws P1's curve: --only P1 (or leave --only out)")
    if args.cluster or args.profile:
        p.error("--batches runs P1 on the single node: leave out --cluster and --profile")
    if args.keep_data and not args.flush:
        p.error("--batches with --keep-data needs --flush: each size starts from empty databases")
    args.batch = args.batches[0]


def machine() -> str:
    """The machine the figures come from: cores, CPU model, memory (for the chart and the README)."""
    import os
    import platform

    model = memory = "?"
    with contextlib.suppress(OSError):
        cpu = [ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")]
        model = cpu[0].split(":", 1)[1].strip() if cpu else model
    with contextlib.suppress(OSError, IndexError, ValueError):
        kib = int(Path("/proc/meminfo").read_text().split("MemTotal:", 1)[1].split()[0])
        memory = f"{kib / 1024 / 1024:.1f} GiB"
    return f"{os.cpu_count()} cores ({model}), {memory} RAM, {platform.system()} {platform.release()}"


def settings(args: argparse.Namespace, roles: dict) -> dict:
    """What the figures depend on, for the JSON, the chart and the README."""
    warm = roles["p1_warm"]
    return {"command": " ".join(sys.argv), "machine": machine(), "tweets": args.tweets, "batch": args.batch,
            "mat": warm.mat,
            "commit_poke_interval": warm.commit_poke_interval, "p4_tweets": args.p4_tweets,
            "cold_tweets": args.cold_tweets if args.cold else None, "latency_samples": args.latency_samples,
            "p3_keys": args.keys, "spark_connect": "local[2] (scripts/spark-connect.sh), shuffle partitions 4",
            "peer": "local[2], shuffle partitions 4, 2 read partitions per micro-batch",
            "airflow": "scripts/airflow.sh: LocalExecutor, parallelism 8, PostgreSQL",
            "airflow_env": args.airflow_env, "phases": args.phases,
            **({"kafka": kafka_settings(roles["p1_kafka"])} if "p1_kafka" in roles else {}),
            **({"pg_states": "PostgresStore (schema bench) in a database of their own on scripts/postgres.sh's "
                "PostgreSQL, beside Airflow's metadata database"} if "p1_pg" in roles else {}),
            **({"by_source": by_source_settings(roles["p1_source"])} if "p1_source" in roles else {}),
            **({"cluster": "scripts/cluster.sh: P1 cold and P4, spark-submit"} if args.cluster else {})}


def by_source_settings(v) -> str:  # type: ignore[no-untyped-def]
    return (f"drain=Backlog(entries={v.batch:,}, wait=1 s, poll=0.5 s): a run per batch waiting, started by the "
            "triggerer; the benchmark unpauses the DAG and triggers nothing")


def kafka_settings(v) -> str:  # type: ignore[no-untyped-def]
    return (f"topic {v.kafka_topic} ({v.partitions} partitions, scripts/kafka.sh's broker), transactional "
            f"KafkaSource, {v.batch // v.partitions:,} per partition per txid; peer: Spark's Kafka source, "
            f"maxOffsetsPerTrigger {v.batch:,}, a read partition per topic partition")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from tput.runner import run

    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    if args.batches:
        from tput.curve import run_curve

        code = run_curve(args, out, settings, run)
    else:
        code = run(args, out, settings)
    print(f"bench: {time.monotonic() - started:.0f} s in all; results in {out}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())

"""One benchmark run: start the services, load the backlogs, run the phases asked for, always stop what was
started (then, with --cluster, the same for P1 and P4 on the loopback cluster), then print the table and write
results.json and chart.png (also after a failure, with what was measured)."""

from __future__ import annotations

import shutil
from argparse import Namespace
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tput import dags, data, kafka, report
from tput.cluster import Cluster, ClusterBench
from tput.memory import machine_load
from tput.phases import Bench
from tput.profile import profile_drain
from tput.services import BenchError, Ports, Stack
from txdag.defaults import REDIS_CONN_ID, SPARK_CONNECT_CONN_ID, ZOOKEEPER_CONN_ID

PG_STATES_DB = "txdag_bench_states"  # --pg-states: the states' database (and role), dropped at the end


def airflow_needed(args: Namespace) -> bool:
    return bool({"P1", "P2", "P4"} & set(args.phases)) or args.profile


def backlogs(args: Namespace, roles: dict[str, dags.Variant]) -> dict[str, int]:
    """Tweets to load per role before Airflow starts."""
    sizes = {}
    if "P1" in args.phases:
        sizes["p1_warm"] = args.tweets
        if args.cold:
            sizes["p1_cold"] = args.cold_tweets
        if args.kafka:
            sizes["p1_kafka"] = args.tweets
        if args.pg_states:
            sizes["p1_pg"] = args.tweets
        if args.by_source:
            sizes["p1_source"] = args.tweets
    if "P4" in args.phases:
        sizes.update({f"p4_{m}": args.p4_tweets for m in (1, 2, 4)})
    if args.profile:
        sizes["profile"] = min(args.tweets, 10 * args.batch)
    return sizes


def chosen_roles(args: Namespace, sizes: dict[str, int]) -> list[str]:
    chosen = ["p2_warm", *sizes]  # p2_warm: the warm-up txid, and P2
    if args.cold and "P2" in args.phases:
        chosen.append("p2_cold")
    return chosen


def ports(args: Namespace) -> Ports:
    env = Ports.from_env()
    return Ports(args.redis_port or env.redis, args.zk_port or env.zk, args.pg_port or env.pg,
                 args.airflow_port or env.airflow, args.spark_connect_port or env.spark_connect,
                 args.kafka_port or env.kafka)


def prepare_dbs(stack: Stack, dbs: list[int], flush: bool) -> None:
    for db in dbs:
        with stack.admin(db) as client:
            size = client.dbsize()
            if size and not flush:
                raise BenchError(f"Redis 127.0.0.1:{stack.ports.redis} database {db} holds {size} keys: the benchmark "
                                 f"needs empty databases {dbs[0]}..{dbs[-1]} (pass --flush to empty them, or "
                                 f"--redis-db N for others)")
            client.flushdb()


def run(args: Namespace, out: Path, settings: Callable[[Namespace, dict], dict]) -> int:
    extra = dict(kv.split("=", 1) for kv in args.airflow_env)
    stack = Stack(ports(args), out / "logs", extra)
    topic = (f"txdag-bench-{stack.unique}", args.kafka_partitions) if args.kafka else None  # a topic of the run's
    roles = dags.variants(args.batch, args.mat or dags.shipped().max_active_transactions, args.commit_poke_interval,
                          args.redis_db, topic, args.pg_states, args.by_source)
    p3_db = args.redis_db + 8
    results: dict[str, Any] = {"started": args.started, "settings": settings(args, roles), "load_start": machine_load()}
    sizes = backlogs(args, roles)
    code = 0
    backlog = bench = None
    pg_made = False
    try:
        stack.start_services(kafka=args.kafka)
        dbs = [*(v.db for v in roles.values()), p3_db]
        prepare_dbs(stack, sorted(set(dbs)), args.flush)
        print(f"bench: generating {max(sizes.values(), default=0):,} tweets and their exact counts", flush=True)
        backlog = data.Backlog(max(sizes.values(), default=0))
        bench = Bench(args, stack, roles, backlog, results)
        if airflow_needed(args):
            if "p1_pg" in sizes:
                pg_made = True  # from here on, the database may exist: dropped at the end
                bench.pg_connection, bench.pg_url = stack.postgres_states(PG_STATES_DB)
            start_airflow(stack, roles, chosen_roles(args, sizes), sizes, backlog, bench.pg_connection)
            bench.warm_up()
        for phase in args.phases:
            print(f"bench: --- {phase} ---", flush=True)
            if phase == "P3":
                bench.p3(p3_db)
            else:
                getattr(bench, phase.lower())()
        if args.profile:
            results["profile"] = profile_drain(bench, sizes["profile"], out)
    except Exception as exc:  # noqa: BLE001 - report what was measured, stop the services, exit 1
        code = 1
        report.record_failure(results, out, exc, "bench")
    finally:
        results["load_end"] = machine_load()
        try:
            stack.clean_up(sorted({v.db for v in roles.values()} | {p3_db}), args.keep_data)
        except Exception as exc:  # noqa: BLE001
            print(f"bench: clean-up: {exc}")
        try:
            if topic and not args.keep_data:  # the topic, and the consumer group KafkaSource's commits wrote
                kafka.delete(stack.kafka_bootstrap, topic[0], [f"txdag-{roles['p1_kafka'].topology_id}"])
        except Exception as exc:  # noqa: BLE001
            print(f"bench: Kafka clean-up: {exc}")
        try:
            if pg_made and not args.keep_data:
                stack.drop_postgres_db(PG_STATES_DB)
        except Exception as exc:  # noqa: BLE001
            print(f"bench: PostgreSQL clean-up: {exc}")
        for problem in stack.stop():
            print(f"bench: could not stop {problem}")
        for checkpoint in ("peer-checkpoint", "peer-kafka-checkpoint"):
            shutil.rmtree(out / checkpoint, ignore_errors=True)
    if args.cluster and code == 0 and backlog is not None:
        code = run_cluster(args, out, stack, backlog, results)
    elif args.cluster:
        print("bench: no cluster phases: the single node's failed")
    print()
    results["table"] = report.print_table(results)
    report.write_json(results, out)
    report.write_chart(results, out)
    return code


def run_cluster(args: Namespace, out: Path, stack: Stack, backlog: data.Backlog, results: dict[str, Any]) -> int:
    """--cluster: P1 (cold) and P4 on scripts/cluster.sh's loopback cluster, on the single node's backlogs, into
    results["cluster"] with the ratios cluster / single node; stops what it started. 1 after a failure."""
    roles = dags.cluster_variants(args.batch, args.mat or dags.shipped().max_active_transactions,
                                  args.commit_poke_interval)
    sizes = {role: n for role, n in backlogs(args, roles).items() if role in roles}  # P1's cold backlog, P4's
    section: dict[str, Any] = {"load_start": machine_load()}
    results["cluster"] = section
    cluster = Cluster(stack, stack.extra_airflow_env)
    topologies: list = []
    code = 0
    try:
        cluster.read_addresses()
        section["settings"] = cluster.settings()
        folder = out / "cluster-dags"
        dags.write_folder(folder, [roles[r] for r in ["warm_up", *sizes]])
        from txdag.topology.topology import load_definitions

        topologies = list(load_definitions(folder)[0].values())
        cluster.start(folder)
        cluster.forget(topologies)  # what an earlier run left
        with cluster.sources() as client:
            for role, n in sizes.items():
                data.load(client, backlog.first(n), roles[role].prefix)
        bench = ClusterBench(args, cluster, roles, backlog, section)
        bench.warm_up()
        for phase in [p for p in args.phases if p in ("P1", "P4")]:
            print(f"bench: --- {phase} on the cluster ---", flush=True)
            getattr(bench, phase.lower())()
    except Exception as exc:  # noqa: BLE001 - as run()'s
        code = 1
        report.record_failure(section, out, exc, "bench: cluster")
    finally:
        section["load_end"] = machine_load()
        try:
            if topologies and not args.keep_data:
                cluster.forget(topologies)
        except Exception as exc:  # noqa: BLE001
            print(f"bench: cluster clean-up: {exc}")
        for problem in cluster.stop():
            print(f"bench: could not stop {problem}")
    section["ratios"] = {figure: ratio for figure, ratio, _ in report.cluster_ratios(results)}
    return code


def start_airflow(stack: Stack, roles: dict[str, dags.Variant], chosen: list[str], sizes: dict[str, int],
                  backlog: data.Backlog, pg_connection: dict | None = None) -> None:
    """Loads each role's backlog (the Kafka copy's into its topic), writes the DAG folder, creates the Redis user,
    starts Spark Connect and Airflow (with ``pg_connection``, the states' database of --pg-states, as bench_pg)."""
    for role, n in sizes.items():
        v = roles[role]
        if v.kafka_topic:
            seconds = kafka.load(stack.kafka_bootstrap, v.kafka_topic, v.partitions, backlog.first(n))
            print(f"bench: produced {n:,} tweets to the Kafka topic {v.kafka_topic} ({v.partitions} partitions) "
                  f"in {seconds:.1f} s", flush=True)
            continue
        with stack.admin(v.db) as client:
            data.load(client, backlog.first(n), v.prefix)
            if v.by_source:  # its source shows nothing waiting until its turn (bench/tput/drain.py)
                data.hide(client, v.prefix)
    shutil.rmtree(stack.airflow_home, ignore_errors=True)
    folder = stack.airflow_home / "dags"
    variants = [roles[r] for r in chosen]
    dags.write_folder(folder, variants)
    from txdag.topology.topology import load_definitions

    stack.create_redis_user(list(load_definitions(folder)[0].values()))
    connections = {v.conn_id: stack.redis_connection(v.db) for v in variants}
    connections.update({REDIS_CONN_ID: stack.redis_connection(0), ZOOKEEPER_CONN_ID: stack.zookeeper_connection(),
                        SPARK_CONNECT_CONN_ID: stack.spark_connect_connection()})
    if any(v.kafka_topic for v in variants):
        connections["kafka_default"] = stack.kafka_connection()
    if pg_connection is not None:
        connections[dags.PG_CONN_ID] = pg_connection
    print("bench: starting Spark Connect and Airflow (scripts/spark-connect.sh, scripts/airflow.sh)", flush=True)
    stack.start_spark_connect()
    stack.start_airflow(folder, connections)

"""The measurements, one method each: P1 (drain beside the baseline and the Spark peer; with --kafka, the same over
a Kafka topic beside them; with --pg-states, the states in PostgreSQL beside Redis), P2 (1-tweet latency),
P3 (commit keys/s beside redis-benchmark), P4 (max_active_transactions 1, 2, 4), and a py-spy profile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from argparse import Namespace
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import redis
from commit_throughput import measure

from tput import data, drain
from tput.baseline import PREFIX as BASELINE_PREFIX
from tput.baseline import python_baseline
from tput.cpu import CpuMeter, above_idle, per_txid
from tput.dags import Variant
from tput.memory import RssSampler, listener_pid, pid_in
from tput.services import REPO, BenchError, Stack
from txdag.airflow.api import AirflowAPI
from txdag.spouts.samples import sample_tweets

COMPONENTS = ("api-server", "dag-processor", "scheduler", "triggerer")
PEER_PREFIX = "peer:"
KAFKA_PEER_PREFIX = "kafka-peer:"
P2_IDLE_SECONDS = 15.0  # a window with no txid running before the 1-tweet txids: each component's idle use


class Bench:
    WARM_UP = "p2_warm"  # the role of the warm-up txid

    def __init__(self, args: Namespace, stack: Stack, roles: dict[str, Variant], backlog: data.Backlog,
                 results: dict[str, Any]) -> None:
        self.args, self.stack, self.roles, self.backlog, self.results = args, stack, roles, backlog, results
        self.api: AirflowAPI | None = None
        self.p2_tweets = sample_tweets(args.latency_samples * 2 + 1, seed=2)  # warm-up + warm + cold samples
        self.p2_used: dict[str, int] = {}
        self.pg_connection: dict | None = None  # --pg-states: the states' database, as an Airflow connection
        self.pg_url = ""  # and as a libpq URL

    # --- helpers ---------------------------------------------------------------------------------------------

    def airflow(self) -> AirflowAPI:
        if self.api is None:
            home, url = self.airflow_at()
            passwords = json.loads((home / "simple_auth_manager_passwords.json").read_text())
            self.api = AirflowAPI(url, "admin", passwords["admin"])
        return self.api

    def airflow_at(self) -> tuple[Path, str]:
        """The AIRFLOW_HOME and the URL of the Airflow the drains use."""
        return self.stack.airflow_home, self.stack.airflow_url

    def sources(self, v: Variant) -> AbstractContextManager[redis.Redis]:
        """An admin client of the Redis that holds ``v``'s tweets."""
        return self.stack.admin(v.db)

    def states(self, v: Variant) -> AbstractContextManager[redis.Redis]:
        """An admin client of the Redis that holds ``v``'s states and marker."""
        return self.stack.admin(v.db)

    def airflow_roots(self) -> dict[str, int]:
        """The Airflow components, by their pid files."""
        found = {f"airflow {name}": pid_in(self.airflow_at()[0] / f"{name}.pid") for name in COMPONENTS}
        return {name: pid for name, pid in found.items() if pid is not None}

    def roots(self) -> dict[str, int]:
        """The processes to sample: the Airflow components and the Spark Connect server."""
        roots = self.airflow_roots()
        connect = listener_pid(self.stack.ports.spark_connect)
        if connect is not None:
            roots["spark-connect"] = connect
        return roots

    def services(self) -> dict[str, int]:
        """The services whose CPU time a drain reports too, by the port each listens on."""
        found = {"redis": self.stack.ports.redis, "zookeeper": self.stack.ports.zk, "postgresql": self.stack.ports.pg}
        return {**found, "kafka": self.stack.ports.kafka} if self.args.kafka else found

    def cpu_roots(self) -> dict[str, int]:
        """The processes whose CPU time a drain reports: roots() and the services."""
        roots = self.roots()
        for name, port in self.services().items():
            pid = listener_pid(port)
            if pid is not None:
                roots[name] = pid
        return roots

    def drain(self, role: str, tweets: int) -> dict[str, Any]:
        v = self.roles[role]
        print(f"bench: draining {tweets:,} tweets through {v.topology_id} (batch {v.batch:,}, "
              f"{v.mat} in flight, {v.mode} mode)", flush=True)
        with self.states(v) as client:
            d = drain.drain(self.airflow(), client, v, tweets, self.args.timeout, CpuMeter(self.cpu_roots()))
            who = f"{v.topology_id} ({tweets:,} tweets)"
            if v.pg_schema:
                data.compare(data.table_counts(self.pg_url, v.pg_tables), self.backlog.partials(tweets), who,
                             f"PostgreSQL schema {v.pg_schema}")
            else:
                data.check_exact(client, self.backlog.truth(tweets), who, v.prefix)
        print(f"bench: {v.topology_id}: {d.rate:,.0f} tweets/s ({d.txids} txids in {d.seconds:.1f} s), counts exact; "
              f"cores {d.cpu['busy_share']:.0%} busy", flush=True)
        return {"tweets": tweets, "txids": d.txids, "batch": v.batch, "mat": v.mat, "mode": v.mode,
                **({"partitions": v.partitions} if v.kafka_topic else {}),
                "seconds": d.seconds, "rate": d.rate, "median_per_txid": d.profile(),
                "job_per_txid": d.job_profile(), "commits": d.commits(),
                "cpu": d.cpu, "cpu_per_txid": per_txid(d.cpu, d.txids),
                "per_txid": [{k: r[k] for k in r if k != "spans"} for r in d.timings]}

    def sampled_drain(self, role: str, tweets: int, memory: str) -> dict[str, Any]:
        """drain(), with the peak RSS of roots() during it in results[memory]."""
        sampler = RssSampler(self.roots()).start()
        try:
            return self.drain(role, tweets)
        finally:
            self.results[memory] = sampler.stop()

    def append_p2(self, role: str):  # type: ignore[no-untyped-def]
        def append(client) -> None:  # type: ignore[no-untyped-def]
            n = sum(self.p2_used.values())
            data.append_tweets(client, [self.p2_tweets[n]], prefix=self.roles[role].prefix)
            self.p2_used[role] = self.p2_used.get(role, 0) + 1
        return append

    def warm_up(self) -> None:
        """One 1-tweet txid before anything is timed: executor workers and the Connect server's first query."""
        v = self.roles[self.WARM_UP]
        with self.sources(v) as client:
            self.airflow().wait_dag_parsed(v.topology_id, timeout=180)
            self.airflow().unpause(v.topology_id)
            first = drain.one_tweet_latency(self.airflow(), client, v, self.append_p2(self.WARM_UP))
        print(f"bench: warm-up txid committed {first.total:.1f} s after its trigger", flush=True)

    # --- P1 --------------------------------------------------------------------------------------------------

    def p1(self) -> None:
        n, p1 = self.args.tweets, {}
        self.results["p1"] = p1
        p1["txdag_warm"] = self.sampled_drain("p1_warm", n, "memory")
        if self.args.kafka:
            p1["txdag_kafka"] = self.sampled_drain("p1_kafka", n, "memory_kafka")
        if self.args.pg_states:
            p1["txdag_pg"] = self.sampled_drain("p1_pg", n, "memory_pg")
        if self.args.by_source:
            p1["txdag_source"] = self.sampled_drain("p1_source", n, "memory_source")
        if self.args.cold:
            p1["txdag_cold"] = self.sampled_drain("p1_cold", self.args.cold_tweets, "memory_cold")
        with self.stack.admin(self.roles["p1_warm"].db) as client:
            meter = CpuMeter({}).start()
            seconds = python_baseline(client, n)
            busy = meter.stop()["busy_core_seconds"]
            data.check_exact(client, self.backlog.truth(n), "Python baseline", BASELINE_PREFIX)
        p1["baseline"] = {"tweets": n, "seconds": seconds, "rate": n / seconds, "busy_core_seconds": busy}
        print(f"bench: Python baseline: {n / seconds:,.0f} tweets/s, counts exact", flush=True)
        p1["peer"] = self.peer(n)
        warm = p1["txdag_warm"]["rate"]
        p1["ratios"] = {"txdag/baseline": warm / p1["baseline"]["rate"], "txdag/peer": warm / p1["peer"]["rate"]}
        if self.args.by_source:
            p1["ratios"]["txdag by its source/txdag triggered"] = p1["txdag_source"]["rate"] / warm
        if self.args.pg_states:
            p1["ratios"]["txdag pg states/txdag redis states"] = p1["txdag_pg"]["rate"] / warm
        if self.args.kafka:
            p1["peer_kafka"] = self.peer(n, self.roles["p1_kafka"])
            kafka = p1["txdag_kafka"]["rate"]
            p1["ratios"].update({"txdag kafka/txdag redis": kafka / warm,
                                 "txdag kafka/peer kafka": kafka / p1["peer_kafka"]["rate"]})

    def peer(self, n: int, kafka: Variant | None = None) -> dict[str, Any]:
        """The streaming peer over the Redis backlog, or (``kafka``: the Kafka copy) over the same topic."""
        db = self.roles["p1_warm"].db
        out = Path(self.args.out)
        name, prefix = ("peer_kafka", KAFKA_PEER_PREFIX) if kafka else ("peer", PEER_PREFIX)
        result, log_path = out / f"{name}.json", out / "logs" / f"streaming_{name}.log"
        env = {**os.environ, "TXDAG_BENCH_REDIS_URL": self.stack.admin_url(db), "PYSPARK_PYTHON": sys.executable,
               "SPARK_LOCAL_IP": "127.0.0.1"}
        cmd = [sys.executable, str(REPO / "bench" / "streaming_peer.py"), "--tweets", str(n), "--batch",
               str(kafka.batch if kafka else self.args.batch), "--prefix", prefix,
               "--checkpoint", str(out / ("peer-kafka-checkpoint" if kafka else "peer-checkpoint")),
               "--result", str(result)]
        if kafka:
            cmd += ["--kafka-topic", kafka.kafka_topic, "--kafka-bootstrap", self.stack.kafka_bootstrap]
        where = f"the Kafka topic {kafka.kafka_topic}" if kafka else "Redis"
        print(f"bench: Spark Structured Streaming peer over the same {n:,} tweets in {where}", flush=True)
        with log_path.open("w") as log:
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
            sampler = RssSampler({"peer": proc.pid}).start()
            try:
                code = proc.wait(timeout=self.args.timeout)
            finally:
                self.results.setdefault("memory", {}).update(
                    {f"{group} over Kafka" if kafka else group: m for group, m in sampler.stop().items()})
        if code != 0:
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
            raise BenchError(f"the streaming peer exited {code}; log {log_path}:\n{tail}")
        peer = json.loads(result.read_text())
        with self.stack.admin(db) as client:
            data.check_exact(client, self.backlog.truth(n), f"Spark Structured Streaming peer over {where}", prefix)
        print(f"bench: streaming peer over {where}: {n / peer['seconds']:,.0f} tweets/s, counts exact", flush=True)
        return {**peer, "batch": kafka.batch if kafka else self.args.batch, "rate": n / peer["seconds"]}

    # --- P2 --------------------------------------------------------------------------------------------------

    def p2(self) -> None:
        self.results["p2"] = {}
        for mode in ("warm", "cold") if self.args.cold else ("warm",):
            role = f"p2_{mode}"
            v = self.roles[role]
            api = self.airflow()
            api.wait_dag_parsed(v.topology_id, timeout=180)
            api.unpause(v.topology_id)
            samples = []
            idle = CpuMeter(self.cpu_roots()).start()
            time.sleep(P2_IDLE_SECONDS)  # what the components use with no txid running, to subtract
            idle_cpu, meter = idle.stop(), CpuMeter(self.cpu_roots()).start()
            with self.stack.admin(v.db) as client:
                for i in range(self.args.latency_samples):
                    samples.append(drain.one_tweet_latency(api, client, v, self.append_p2(role)))
                    print(f"bench: P2 {mode} sample {i + 1}: {samples[-1].total:.2f} s", flush=True)
            cpu = meter.stop()
            self.results["p2"][mode] = {"samples": [vars(s) for s in samples], "summary": drain.summarize(samples),
                                        "job": drain.median_steps([s.job for s in samples if s.job]),
                                        "cpu": cpu, "cpu_per_txid": per_txid(cpu, len(samples)), "idle_cpu": idle_cpu,
                                        "cpu_per_txid_above_idle": above_idle(cpu, idle_cpu, len(samples))}
        self.check_p2()

    def check_p2(self) -> None:
        """The 1-tweet txids' counts are exact too (each role's database got its own slice of p2_tweets)."""
        start = 0
        for role in self.p2_used:
            count = self.p2_used[role]
            with self.stack.admin(self.roles[role].db) as client:
                data.check_exact(client, data.expected_counts(self.p2_tweets[start:start + count]),
                                 self.roles[role].topology_id)
            start += count

    # --- P3, P4 ----------------------------------------------------------------------------------------------

    def p3(self, db: int) -> None:
        print(f"bench: P3 commit of {self.args.keys:,} distinct keys beside redis-benchmark", flush=True)
        with self.stack.admin(db) as client:
            table = measure(client, self.args.keys, self.args.repeat)
        by = dict(table)
        hset, hincr = by["redis-benchmark -t hset -P 16"], by["redis-benchmark hincrby -P 16"]
        new = by["txdag commit, transactional, new txid"]
        self.results["p3"] = {"keys": self.args.keys, "repeat": self.args.repeat, "rows": table, "ratios": {
            "txdag commit / redis-benchmark HSET": new / hset,
            "txdag commit / redis-benchmark HINCRBY": new / hincr}}

    def p4(self) -> None:
        n = self.args.p4_tweets
        drains = {str(m): self.drain(f"p4_{m}", n) for m in (1, 2, 4)}
        self.results["p4"] = {"tweets": n, "drains": drains, "ratio_4_1": drains["4"]["rate"] / drains["1"]["rate"]}

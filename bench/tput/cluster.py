"""--cluster: P1 (cold) and P4 on the loopback cluster of scripts/cluster.sh (issue 17), after the single node's.

The cluster: a ZooKeeper ensemble (the txids), a Redis Cluster (the states and markers), the single Redis of its
sources and Celery broker, a Spark standalone master with two one-core workers (each txid's spark-submit), and
Airflow with the CeleryExecutor and two Celery workers; on the TXDAG_CLUSTER_*_PORT ports (cluster.sh's defaults
otherwise). A node that already serves is reused and left up; the components this run started are stopped after.

Its Airflow must not be running: the benchmark starts it with a DAG folder of its own (copies of
dags_cluster/tweets_analytics.py, tput.dags, in <out>/cluster-dags) and a fresh metadata database of its own
(TXDAG_AIRFLOW_DB, which cluster.sh passes on to scripts/airflow.sh). The copies' records in the ensemble, their keys
on the Redis Cluster and their tweets on the single Redis are deleted before the run (an earlier run's) and after it
(unless --keep-data).
"""

from __future__ import annotations

import os
import subprocess
from argparse import Namespace
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import redis

from tput.dags import Variant
from tput.data import Backlog
from tput.memory import pid_in
from tput.phases import Bench
from tput.services import REPO, SCRIPTS, BenchError, Stack, exports, listening
from txdag.defaults import ZK_ROOT
from txdag.redisio import client_from_url

RUN = REPO / ".run" / "cluster"  # cluster.sh's nodes: one folder each, named by its port, with its pid file
AIRFLOW_DB = "airflow_bench_cluster"


def port_of(address: str) -> int:
    """The port of ``host:port`` or of a URL (``spark://host:port``)."""
    port = urlsplit(address if "://" in address else f"//{address}").port
    if port is None:
        raise BenchError(f"no port in the cluster's address {address!r} (bash scripts/cluster.sh env)")
    return port


@dataclass
class Cluster:
    """The loopback cluster as cluster.sh's ``env`` gives its addresses, and which components this run started."""

    stack: Stack  # runs the scripts into its log folder; the admin credentials of .run/credentials.env
    extra_env: dict[str, str] = field(default_factory=dict)
    addresses: dict[str, str] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)

    def read_addresses(self) -> None:
        done = subprocess.run(["bash", str(SCRIPTS / "cluster.sh"), "env"], capture_output=True, text=True)
        if done.returncode != 0:
            raise BenchError(f"bash scripts/cluster.sh env exited {done.returncode}: {done.stderr.strip()}")
        self.addresses = exports(done.stdout)

    def nodes(self, name: str) -> list[str]:
        return self.addresses[name].split(",")

    @property
    def home(self) -> Path:
        return Path(self.addresses["TXDAG_CLUSTER_AIRFLOW_HOME"])

    @property
    def url(self) -> str:
        return self.addresses["TXDAG_CLUSTER_AIRFLOW_URL"]

    # --- start, stop ---------------------------------------------------------------------------------------

    def start(self, dags_folder: Path) -> None:
        """cluster.sh start, its Airflow with ``dags_folder`` and a fresh database; refused if that Airflow runs."""
        workers = [name for name, f in self.pid_files().items() if name.startswith("celery") and pid_in(f)]
        if listening(port_of(self.url)) or workers:
            raise BenchError(f"the cluster's Airflow ({self.url}, AIRFLOW_HOME {self.home}) is running: the "
                             "benchmark starts it with its own DAG folder and database; stop it first (bash "
                             "scripts/cluster.sh stop airflow)")
        probes = {"zk": port_of(self.nodes("TXDAG_CLUSTER_ZK_HOSTS")[0]),
                  "redis": port_of(self.nodes("TXDAG_CLUSTER_REDIS_NODES")[0]),
                  "spark": port_of(self.addresses["TXDAG_CLUSTER_SPARK_MASTER"])}
        self.started = [name for name, port in probes.items() if not listening(port)] + ["airflow"]
        print(f"bench: starting the loopback cluster (scripts/cluster.sh start; already up: "
              f"{', '.join(sorted(set(probes) - set(self.started))) or 'nothing'}), DAG folder {dags_folder}",
              flush=True)
        self.stack.script("cluster.sh", "start", env=cluster_env(dags_folder, self.extra_env), timeout=1200)

    def stop(self) -> list[str]:
        """cluster.sh stop of the components this run started; what could not be stopped (with why)."""
        started, self.started = self.started, []
        if not started:
            return []
        try:
            self.stack.script("cluster.sh", "stop", *started, timeout=600)
        except (BenchError, subprocess.TimeoutExpired) as exc:
            return [f"the cluster's {' '.join(started)}: {exc}"]
        return []

    # --- clients, processes --------------------------------------------------------------------------------

    def sources(self) -> redis.Redis:
        """The single Redis of the sources (database 0, which its Celery broker shares under "celery:")."""
        host, port = self.addresses["TXDAG_CLUSTER_SINGLE_REDIS"].rsplit(":", 1)
        return redis.Redis(host=host, port=int(port), username=self.stack.cred["TXDAG_REDIS_ADMIN_USER"],
                           password=self.stack.cred["TXDAG_REDIS_ADMIN_PASSWORD"])

    def states(self) -> redis.Redis:
        """The Redis Cluster of the states and markers (a RedisCluster client)."""
        first, *others = self.nodes("TXDAG_CLUSTER_REDIS_NODES")
        login = f"{quote(self.stack.cred['TXDAG_REDIS_ADMIN_USER'], safe='')}:" \
                f"{quote(self.stack.cred['TXDAG_REDIS_ADMIN_PASSWORD'], safe='')}"
        return client_from_url(f"redis://{login}@{first}/0?cluster=true&nodes={','.join(others)}")

    def forget(self, topologies: list[Any]) -> None:
        """Deletes the topologies' records in the ensemble, the keys they write and their sources' keys."""
        from txdag.cli.acl import owned_patterns

        with self.states() as states, self.sources() as sources:
            for t in topologies:
                delete_matching(states, owned_patterns(t))
                delete_matching(sources, t.source.acl_patterns())
        self.stack.delete_znodes(self.addresses["TXDAG_CLUSTER_ZK_HOSTS"],
                                 [f"{ZK_ROOT}/{t.topology_id}" for t in topologies])

    def pid_files(self) -> dict[str, Path]:
        """The pid files of the cluster's processes by name (``<component> #<n>``: one node of several)."""
        spark = port_of(self.addresses["TXDAG_CLUSTER_SPARK_MASTER"])
        files = {f"celery worker #{f.stem.removeprefix('worker')}": f
                 for f in sorted((self.home / "celery").glob("worker*.pid"))}
        files["spark master"] = RUN / f"spark-{spark}-master" / "spark.pid"
        files.update({f"spark worker #{d.name.rsplit('-', 1)[1]}": d / "spark.pid"
                      for d in sorted(RUN.glob(f"spark-{spark}-worker-*"))})
        files.update({f"zookeeper #{port_of(n)}": RUN / f"zk-{port_of(n)}" / "zookeeper.pid"
                      for n in self.nodes("TXDAG_CLUSTER_ZK_HOSTS")})
        files.update({f"redis cluster #{port_of(n)}": RUN / f"redis-{port_of(n)}" / "redis.pid"
                      for n in self.nodes("TXDAG_CLUSTER_REDIS_NODES")})
        return {name: f for name, f in files.items() if f.is_file()}

    def settings(self) -> dict[str, Any]:
        return {"addresses": self.addresses, "dags": "copies of dags_cluster/tweets_analytics.py (spark-submit to "
                "the standalone master; states on the Redis Cluster, tweets on the single Redis)",
                "airflow": f"scripts/cluster.sh: CeleryExecutor, its Celery workers, PostgreSQL database {AIRFLOW_DB}"}


def cluster_env(dags_folder: Path, extra: dict[str, str]) -> dict[str, str]:
    """What ``cluster.sh start`` gets from the benchmark: the DAG folder, a fresh metadata database of the
    benchmark's own and redis_default on database 0 (scripts/airflow.sh's variables, which cluster.sh passes on),
    and --airflow-env's settings."""
    return {"TXDAG_CLUSTER_DAGS_FOLDER": str(dags_folder), "TXDAG_AIRFLOW_DB": AIRFLOW_DB,
            "TXDAG_AIRFLOW_FRESH_DB": "1", "TXDAG_AIRFLOW_REDIS_DB": "0", **extra}


def delete_matching(client: redis.Redis, patterns: list[str]) -> None:
    keys = sorted({k for p in patterns for k in client.scan_iter(match=p, count=1000)})
    for start in range(0, len(keys), 1000):
        client.delete(*keys[start:start + 1000])


class ClusterBench(Bench):
    """P1 (cold) and P4 on the cluster's Airflow: Bench's drains, with the cluster's clients and processes."""

    WARM_UP = "warm_up"

    def __init__(self, args: Namespace, cluster: Cluster, roles: dict[str, Variant], backlog: Backlog,
                 results: dict[str, Any]) -> None:
        super().__init__(args, cluster.stack, roles, backlog, results)
        self.cluster = cluster

    def airflow_at(self) -> tuple[Path, str]:
        return self.cluster.home, self.cluster.url

    def sources(self, v: Variant) -> redis.Redis:
        return self.cluster.sources()

    def states(self, v: Variant) -> redis.Redis:
        return self.cluster.states()

    def roots(self) -> dict[str, int]:
        """Airflow's components and Celery workers (with the tasks), the Spark master and workers (with the
        executors), the ZooKeeper and Redis Cluster nodes."""
        found = {name: pid_in(f) for name, f in self.cluster.pid_files().items()}
        return {**self.airflow_roots(), **{name: pid for name, pid in found.items() if pid is not None}}

    def services(self) -> dict[str, int]:
        """The single Redis (sources, Celery's broker) and PostgreSQL (Airflow's and Celery's databases); the
        latter's port as cluster.sh reads it (`cluster.sh env` does not print it)."""
        return {"redis (sources, broker)": port_of(self.cluster.addresses["TXDAG_CLUSTER_SINGLE_REDIS"]),
                "postgresql": int(os.environ.get("TXDAG_CLUSTER_PG_PORT", "5591"))}

    def p1(self) -> None:
        self.results["p1"] = p1 = {}
        p1["txdag_cold"] = self.sampled_drain("p1_cold", self.args.cold_tweets, "memory")

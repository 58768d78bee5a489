"""What the benchmark runs on, started through the project's own scripts on loopback ports it is given, and
stopped afterwards only where the benchmark started it (a server that already answered is reused and left up).

Redis, ZooKeeper and (P1 --kafka) the Kafka broker: scripts/services.sh. PostgreSQL and the four Airflow
components: scripts/airflow.sh, with an AIRFLOW_HOME and a metadata database of the benchmark's own; P1 --pg-states'
database and role of the states (scripts/postgres.sh fresh-db), on the same PostgreSQL. Spark Connect:
scripts/spark-connect.sh.

Each service has a loopback host (``Hosts``: TXDAG_REDIS_HOST, TXDAG_ZK_HOST, TXDAG_PG_HOST, TXDAG_AIRFLOW_HOST,
TXDAG_SPARK_CONNECT_HOST, which the scripts read too; 127.0.0.1 by default) and may run in a network namespace of
its own (``Stack.wrap``: service -> a command prefix such as ``ip netns exec txj-redis``; bench/jepsen's cuts).
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import redis

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"


class BenchError(RuntimeError):
    """The benchmark cannot go on (a service did not start, a run failed, counts differ): says what and where."""


@dataclass(frozen=True)
class Ports:
    redis: int
    zk: int
    pg: int
    airflow: int
    spark_connect: int
    kafka: int = 9391

    @classmethod
    def from_env(cls) -> Ports:
        env = os.environ.get
        return cls(int(env("TXDAG_REDIS_PORT", "6391")), int(env("TXDAG_ZK_PORT", "2191")),
                   int(env("TXDAG_PG_PORT", "5491")), int(env("TXDAG_AIRFLOW_PORT", "8791")),
                   int(env("TXDAG_SPARK_CONNECT_PORT", "15092")), int(env("TXDAG_KAFKA_PORT", "9391")))

    def env(self) -> dict[str, str]:
        return {"TXDAG_REDIS_PORT": str(self.redis), "TXDAG_ZK_PORT": str(self.zk), "TXDAG_PG_PORT": str(self.pg),
                "TXDAG_AIRFLOW_PORT": str(self.airflow), "TXDAG_SPARK_CONNECT_PORT": str(self.spark_connect),
                "TXDAG_KAFKA_PORT": str(self.kafka)}


def listening(port: int, host: str = "127.0.0.1") -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
        return True
    except OSError:
        return False


def credentials() -> dict[str, str]:
    """The ``export NAME=value`` lines of .run/credentials.env (scripts/credentials.sh creates it once)."""
    path = subprocess.run(["bash", str(SCRIPTS / "credentials.sh")], capture_output=True, text=True,
                          check=True).stdout.strip()
    return exports(Path(path).read_text())


def exports(text: str) -> dict[str, str]:
    """NAME -> value of the ``export NAME=value`` lines of ``text`` (unquoted values, as the scripts write them)."""
    lines = (line.removeprefix("export ").strip() for line in text.splitlines())
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


@dataclass(frozen=True)
class Hosts:
    """The loopback address of each service (the scripts bind and connect to the same, from the same variables)."""

    redis: str = "127.0.0.1"
    zk: str = "127.0.0.1"
    pg: str = "127.0.0.1"
    airflow: str = "127.0.0.1"
    spark_connect: str = "127.0.0.1"

    @classmethod
    def from_env(cls) -> Hosts:
        names = ("TXDAG_REDIS_HOST", "TXDAG_ZK_HOST", "TXDAG_PG_HOST", "TXDAG_AIRFLOW_HOST",
                 "TXDAG_SPARK_CONNECT_HOST")
        hosts = [os.environ.get(n) or "127.0.0.1" for n in names]
        for name, host in zip(names, hosts, strict=True):
            try:
                loopback = ipaddress.ip_address(host) in ipaddress.ip_network("127.0.0.0/8")
            except ValueError:
                loopback = False
            if not loopback:
                raise BenchError(f"{name}={host} is not an IPv4 address in 127.0.0.0/8: the benchmarks' servers "
                                 "listen on loopback only (unset it for 127.0.0.1)")
        return cls(*hosts)

    def env(self) -> dict[str, str]:
        return {"TXDAG_REDIS_HOST": self.redis, "TXDAG_ZK_HOST": self.zk, "TXDAG_PG_HOST": self.pg,
                "TXDAG_AIRFLOW_HOST": self.airflow, "TXDAG_SPARK_CONNECT_HOST": self.spark_connect}


def script_service(name: str, args: tuple[str, ...]) -> str:
    """The service a script call starts or stops (the key of ``Stack.wrap``)."""
    if name == "services.sh":
        return args[1] if len(args) > 1 else "services"
    return name.removesuffix(".sh")


@dataclass
class Stack:
    """The services of one benchmark run, and which of them it started (``started``), to stop only those."""

    ports: Ports
    log_dir: Path
    extra_airflow_env: dict[str, str] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    unique: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    airflow_env: dict[str, str] = field(default_factory=dict)
    hosts: Hosts = field(default_factory=Hosts.from_env)
    wrap: dict[str, list[str]] = field(default_factory=dict)  # service -> prefix of its scripts' command

    def __post_init__(self) -> None:
        self.cred = credentials()
        self.airflow_home = REPO / ".run" / f"airflow-bench-{self.ports.airflow}"
        self.zk_root = f"/txdag-bench-{self.unique}"
        self.redis_user, self.redis_password = f"txdag-bench-{self.unique}", uuid.uuid4().hex

    # --- scripts ---------------------------------------------------------------------------------------------

    def script(self, name: str, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> None:
        log = self.log_dir / f"{name.removesuffix('.sh')}.log"
        with log.open("a") as out:
            prefix = self.wrap.get(script_service(name, args), [])
            out.write(f"$ {' '.join([*prefix, 'bash', f'scripts/{name}', *args])}\n")
            out.flush()
            done = subprocess.run([*prefix, "bash", str(SCRIPTS / name), *args],
                                  env={**os.environ, **self.ports.env(), **self.hosts.env(), **(env or {})},
                                  stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False)
        if done.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
            raise BenchError(f"bash scripts/{name} {' '.join(args)} exited {done.returncode}; log {log}:\n{tail}")

    def start_services(self, *, kafka: bool = False) -> None:
        """Redis and ZooKeeper (and the Kafka broker) through scripts/services.sh."""
        wanted = [("redis", self.ports.redis, self.hosts.redis), ("zk", self.ports.zk, self.hosts.zk),
                  *([("kafka", self.ports.kafka, "127.0.0.1")] if kafka else [])]
        for service, port, host in wanted:
            if not listening(port, host):
                self.started.append(service)
            self.script("services.sh", "start", service)

    def postgres_states(self, db: str) -> tuple[dict, str]:
        """A fresh database ``db`` and role of its own on the PostgreSQL (started if none answers): an Airflow
        connection of type ``postgres`` to it, and its libpq URL."""
        if not listening(self.ports.pg, self.hosts.pg):
            self.started.append("postgres")
        self.script("postgres.sh", "start")
        self.script("postgres.sh", "fresh-db", db)
        done = subprocess.run(["bash", str(SCRIPTS / "postgres.sh"), "url", db], capture_output=True, text=True,
                              env={**os.environ, **self.ports.env(), **self.hosts.env()}, timeout=60, check=False)
        if done.returncode != 0:
            raise BenchError(f"bash scripts/postgres.sh url {db} exited {done.returncode}: {done.stderr[-1000:]}")
        url = urlsplit(done.stdout.strip())
        conn = {"conn_type": "postgres", "host": url.hostname, "port": url.port, "login": unquote(url.username or ""),
                "password": unquote(url.password or ""), "schema": url.path.lstrip("/")}
        return conn, url._replace(scheme="postgresql").geturl()

    def drop_postgres_db(self, db: str) -> None:
        self.script("postgres.sh", "drop-db", db)

    def start_spark_connect(self) -> None:
        if not listening(self.ports.spark_connect, self.hosts.spark_connect):
            self.started.append("spark-connect")
        self.script("spark-connect.sh", "start")

    def start_airflow(self, dags_folder: Path, connections: dict[str, dict]) -> None:
        """A fresh AIRFLOW_HOME and metadata database; the connections as AIRFLOW_CONN_* of the components."""
        if not listening(self.ports.pg, self.hosts.pg):
            self.started.append("postgres")
        env = {"AIRFLOW_HOME": str(self.airflow_home), "TXDAG_AIRFLOW_DB": f"airflow_bench_{self.ports.airflow}",
               "TXDAG_AIRFLOW_FRESH_DB": "1", "TXDAG_DAGS_FOLDER": str(dags_folder), **self.extra_airflow_env}
        env.update({f"AIRFLOW_CONN_{cid.upper()}": json.dumps(conn) for cid, conn in connections.items()})
        self.airflow_env = env
        self.script("airflow.sh", "stop", env=env, timeout=120)  # a run killed before its clean-up
        if listening(self.ports.airflow, self.hosts.airflow):
            raise BenchError(f"port {self.ports.airflow} is taken (another Airflow?): stop it, or give the benchmark "
                             f"another port with --airflow-port")
        self.started.append("airflow")
        self.script("airflow.sh", "start", env=env)

    def stop(self) -> list[str]:
        """Stops what this run started, in reverse order; returns what could not be stopped (with why)."""
        problems = []
        stops = {"airflow": ("airflow.sh", ["stop"], self.airflow_env), "postgres": ("postgres.sh", ["stop"], None),
                 "spark-connect": ("spark-connect.sh", ["stop"], None),
                 "redis": ("services.sh", ["stop", "redis"], None), "zk": ("services.sh", ["stop", "zk"], None),
                 "kafka": ("services.sh", ["stop", "kafka"], None)}
        for name in reversed(self.started):
            script, args, env = stops[name]
            try:
                self.script(script, *args, env=env, timeout=180)
            except (BenchError, subprocess.TimeoutExpired) as exc:
                problems.append(f"{name}: {exc}")
        self.started.clear()
        return problems

    # --- clients and connections -----------------------------------------------------------------------------

    def admin_url(self, db: int) -> str:
        user, password = self.cred["TXDAG_REDIS_ADMIN_USER"], self.cred["TXDAG_REDIS_ADMIN_PASSWORD"]
        return f"redis://{quote(user, safe='')}:{quote(password, safe='')}@{self.hosts.redis}:{self.ports.redis}/{db}"

    def admin(self, db: int) -> redis.Redis:
        return redis.Redis.from_url(self.admin_url(db))

    def redis_connection(self, db: int) -> dict:
        """An Airflow connection to database ``db`` as the run's restricted user (see create_redis_user)."""
        return {"conn_type": "redis", "host": self.hosts.redis, "port": self.ports.redis, "login": self.redis_user,
                "password": self.redis_password, "extra": {"db": db}}

    def zookeeper_connection(self) -> dict:
        return {"conn_type": "zookeeper", "host": self.hosts.zk, "port": self.ports.zk,
                "login": self.cred["TXDAG_ZK_USER"], "password": self.cred["TXDAG_ZK_PASSWORD"],
                "extra": {"root": self.zk_root}}

    @property
    def zk_hosts(self) -> str:
        return f"{self.hosts.zk}:{self.ports.zk}"

    @property
    def airflow_url(self) -> str:
        return f"http://{self.hosts.airflow}:{self.ports.airflow}"

    @property
    def kafka_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ports.kafka}"

    def kafka_connection(self) -> dict:
        """Airflow's ``kafka_default``, as scripts/airflow.sh defines it, on the run's broker."""
        return {"conn_type": "kafka", "extra": {"bootstrap.servers": self.kafka_bootstrap}}

    def spark_connect_connection(self) -> dict:
        return {"conn_type": "spark_connect", "host": self.hosts.spark_connect, "port": self.ports.spark_connect}

    def create_redis_user(self, topologies: list) -> None:
        """The user of the topologies' connections: only their keys, like scripts/airflow.sh's (txdag.cli.acl)."""
        from txdag.cli.acl import setuser_args

        with self.admin(0) as client:
            client.execute_command("ACL", "SETUSER", *setuser_args(self.redis_user, topologies,
                                                                   password=self.redis_password, source_write=True))

    def clean_up(self, dbs: list[int], keep_data: bool) -> None:
        """Deletes the run's Redis user, its ZooKeeper root and (unless ``keep_data``) its Redis databases."""
        with self.admin(0) as client:
            client.execute_command("ACL", "DELUSER", self.redis_user)
        for db in [] if keep_data else dbs:
            with self.admin(db) as client:
                client.flushdb(asynchronous=True)  # freed in the background: millions of keys outlast a reply timeout
        self.delete_znodes(self.zk_hosts, [self.zk_root])

    def delete_znodes(self, hosts: str, paths: list[str]) -> None:
        """Deletes each of ``paths`` and what is under it, as the ZooKeeper digest user of .run/credentials.env."""
        from kazoo.client import KazooClient
        from kazoo.exceptions import NoNodeError

        zk = KazooClient(hosts=hosts, timeout=5,
                         auth_data=[("digest", f"{self.cred['TXDAG_ZK_USER']}:{self.cred['TXDAG_ZK_PASSWORD']}")])
        try:
            zk.start(timeout=5)
            for path in paths:
                try:
                    zk.delete(path, recursive=True)
                except NoNodeError:  # never created: nothing to clean
                    pass
        except Exception:  # ZooKeeper is gone: nothing to clean
            pass
        finally:
            zk.stop()
            zk.close()

"""End-to-end fixtures: one real Airflow (scripts/airflow.sh) for the whole pytest session.

The ``airflow`` fixture starts PostgreSQL if needed (scripts/postgres.sh, through airflow.sh), recreates the
session's metadata database, starts the four Airflow components with a fresh AIRFLOW_HOME, and stops them at
the end of the session, also when a test or the start failed. Its AIRFLOW_HOME (logs included) is left in place
for a post-mortem and wiped by the next session.

Before the start, the Redis database is flushed and the topologies' source data is loaded (e2e_data), so each
scheduled topology's first run, created when the scheduler comes up, emits one batch. Before each test on this
Airflow, ``clear_of_scheduled_runs`` waits until no scheduled run is in flight or due within SCHEDULE_MARGIN, unless
the test is marked ``own_topologies``: it runs only unscheduled topologies of its own and stops no component the
scheduled ones use, so a scheduled run at the hour neither takes its data nor is hurt by it.

The DAG folder is ``<AIRFLOW_HOME>/dags``: symbolic links to each folder of TXDAG_E2E_DAGS_FOLDERS (os.pathsep
separated; default: the repository's ``dags/`` and ``tests/e2e/dags_fixture/``) plus ``extra/``, where
``airflow.add_dag_file()`` writes DAG files during the session (picked up within ~5 s).

Environment (all optional):
    TXDAG_E2E_AIRFLOW_PORT   API port of the e2e instance (default 8792, beside a development instance on 8791)
    TXDAG_E2E_DAGS_FOLDERS   the DAG folders to link (see above)
    TXDAG_E2E_PLUGINS_FOLDER the plugins folder (default: the repository's ``plugins/``)
    TXDAG_E2E_REDIS_DB       the Redis database of the ``redis_default`` connection (default 15)
    TXDAG_E2E_STATSD_PORT    the UDP port Airflow's StatsD client sends to (test_metrics listens; default the API
                             port + 9333)
    TXDAG_E2E_SPARK_CONNECT_PORT  the session's Spark Connect server (scripts/spark-connect.sh; default 15094),
                             the ``spark_connect_default`` connection of topologies with spark_mode="connect"
    TXDAG_TEST_REDIS_URL, TXDAG_TEST_ZK_HOSTS   the servers (set by scripts/test.sh)

The components get ``AIRFLOW_CONN_REDIS_DEFAULT`` (the test Redis, database TXDAG_E2E_REDIS_DB, as a user of the
session limited to the DAG folders' topologies by ``txdag.cli.acl``, deleted at the end),
``AIRFLOW_CONN_ZOOKEEPER_DEFAULT`` (the test ZooKeeper with the tests' digest, extra ``{"root":
"/txdag-e2e-<unique>"}``, deleted at the end), ``AIRFLOW_CONN_KAFKA_DEFAULT`` (the test Kafka broker, the Kafka
provider's ``kafka`` type), ``TXDAG_FAULTS_ALLOWED=1`` with the fault plan
``AIRFLOW_VAR_TXDAG_FAULTS`` (e2e_data.FAULTS, each fault fired once: ``TXDAG_FAULTS_FIRED_DIR`` is
``<AIRFLOW_HOME>/faults-fired``), and whatever the ``airflow_extra_env`` fixture returns (override it in this
file to add connections or variables: ``AIRFLOW_CONN_<ID>``, ``AIRFLOW_VAR_<KEY>``, ``AIRFLOW__SECTION__KEY``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

import pytest
import redis as redis_py
import requests
from access import KAFKA_BOOTSTRAP, PASSWORDS, ZK_AUTH, kazoo_auth
from e2e_data import FAULTS, Sources, load_sources
from support.servers import free_port

from txdag.airflow.api import AirflowAPI
from txdag.cli.acl import redis_acl_rules, setuser_args
from txdag.topology.topology import load_definitions

REPO = Path(__file__).resolve().parents[2]
AIRFLOW = Path(sys.executable).parent / "airflow"  # the venv running the tests
AIRFLOW_SH = REPO / "scripts" / "airflow.sh"
SPARK_CONNECT_SH = REPO / "scripts" / "spark-connect.sh"
START_TIMEOUT = 300  # seconds for scripts/airflow.sh start, PostgreSQL and the database migration included
# A test counts its txids exactly: it does not start this close to a scheduled run (the hourly DAGs' next hour),
# which would take a batch of the data it appends; it waits for that run to be created and finished instead.
SCHEDULE_MARGIN = timedelta(minutes=8)
SCHEDULE_WAIT_TIMEOUT = 900


@dataclass
class AirflowInstance:
    """The running e2e Airflow: where it is, how to reach it, and a logged-in REST client (``api``)."""

    home: Path
    base_url: str
    username: str
    password: str
    dags_folder: Path
    env: dict[str, str]  # the environment the components were started with (for the CLI, see cli())
    redis_url: str  # the Redis database the redis_default connection points at, as the admin user (for tests)
    zk_hosts: str
    zk_root: str  # the zookeeper_default connection's extra "root"
    api: AirflowAPI = field(repr=False)
    sources: Sources = field(default_factory=Sources, repr=False)  # what was loaded before the start
    secrets: list[str] = field(default_factory=list, repr=False)  # the passwords no log may show
    redis_user: str = ""  # the user of redis_default, limited to the topologies' keys

    def logs_showing_a_password(self) -> list[str]:
        """Every file under AIRFLOW_HOME's logs (task logs and the components') that holds one of the secrets."""
        files = [p for p in self.home.rglob("*.log") if p.is_file()] + list((self.home / "logs").rglob("*"))
        return sorted({str(p) for p in files if p.is_file() and any(
            s in p.read_text(errors="replace") for s in self.secrets)})

    def cli(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Runs ``airflow <args>`` against this instance; output captured as text."""
        result = subprocess.run(
            [str(REPO / ".venv" / "bin" / "airflow"), *args],
            env=self.env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if check and result.returncode != 0:
            raise AssertionError(f"airflow {' '.join(args)} exited {result.returncode}:\n{result.stderr[-3000:]}")
        return result

    def add_dag_file(self, name: str, source: str) -> Path:
        """Writes a DAG file into the DAG folder's ``extra/``; the DAG processor picks it up within ~5 s."""
        path = self.dags_folder / "extra" / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(source)
        tmp.replace(path)  # atomic: never parsed half-written
        found, _ = load_definitions(path.parent)  # plain DAG files (no topology) may fail here: not ours to read
        if self.redis_user and found:  # redis_default may touch the new topologies' keys too (rules add up)
            with redis_py.Redis.from_url(self.redis_url) as client:
                client.execute_command("ACL", "SETUSER", self.redis_user,
                                       *redis_acl_rules(*found.values(), source_write=True))
        return path

    def fired_faults(self) -> set[str]:
        """The faults of the plan that fired: ``point-topology-txid-attempt``."""
        return {p.name for p in (self.home / "faults-fired").iterdir()}

    def lineage_events(self, job: str, at_least: int, timeout: float = 60) -> list[dict[str, Any]]:
        """The OpenLineage COMPLETE events of ``job`` (``<dag_id>.<task_id>``) that the provider's file transport
        wrote, once there are ``at_least`` (a task's event is written as it ends)."""
        path, deadline = self.home / "openlineage.jsonl", time.monotonic() + timeout
        while True:
            lines = path.read_text().splitlines() if path.exists() else []
            done = [e for e in map(json.loads, filter(None, lines))
                    if e["job"]["name"] == job and e["eventType"] == "COMPLETE"]
            if len(done) >= at_least or time.monotonic() > deadline:
                return done
            time.sleep(1)

    def component_log(self, component: str, tail: int = 100) -> str:
        """The last lines of a component's log (api-server, dag-processor, scheduler, triggerer)."""
        lines = (self.home / f"{component}.log").read_text(errors="replace").splitlines()
        return "\n".join(lines[-tail:])


def _first_host_port(hosts: str, default_port: int) -> tuple[str, int]:
    first = hosts.split(",")[0].strip()
    host, _, port = first.partition(":")
    return host or "127.0.0.1", int(port or default_port)


@pytest.fixture(scope="session")
def airflow_extra_env() -> dict[str, str]:
    """More environment for the Airflow components (connections, variables, options); override to extend. The
    ``txdag_postgres`` connection: a database of the PostgreSQL states' own (tests/support/postgres.py)."""
    from support.postgres import CONN_ID, postgres_url

    return {f"AIRFLOW_CONN_{CONN_ID.upper()}": postgres_url()}


@pytest.fixture(scope="session")
def airflow(redis_url: str, zk_hosts: str, airflow_extra_env: dict[str, str]) -> Iterator[AirflowInstance]:
    port = int(os.environ.get("TXDAG_E2E_AIRFLOW_PORT", "8792"))
    home = REPO / ".run" / f"airflow-e2e-{port}"
    unique = uuid.uuid4().hex[:10]

    # Redis: the test server, a database of the e2e tests' own.
    redis = urlparse(redis_url)
    redis_db = int(os.environ.get("TXDAG_E2E_REDIS_DB", "15"))
    redis_host, redis_port = redis.hostname or "127.0.0.1", redis.port or 6379
    zk_host, zk_port = _first_host_port(zk_hosts, 2181)
    zk_root = f"/txdag-e2e-{unique}"

    folders = os.environ.get("TXDAG_E2E_DAGS_FOLDERS")
    dag_sources = (
        [Path(p) for p in folders.split(os.pathsep) if p]
        if folders
        else [REPO / "dags", REPO / "tests" / "e2e" / "dags_fixture"]
    )

    env = dict(os.environ)
    env.update(
        AIRFLOW_HOME=str(home),
        TXDAG_AIRFLOW_PORT=str(port),
        TXDAG_AIRFLOW_DB=f"airflow_e2e_{port}",
        TXDAG_AIRFLOW_FRESH_DB="1",
        TXDAG_DAGS_FOLDER=str(home / "dags"),
        TXDAG_PLUGINS_FOLDER=os.environ.get("TXDAG_E2E_PLUGINS_FOLDER", str(REPO / "plugins")),
        # a viewer too: the transactions page lets them read and refuses their actions (test_ui_page)
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin,viewer:viewer",
        TXDAG_FAULTS_ALLOWED="1",
        AIRFLOW_VAR_TXDAG_FAULTS=FAULTS,
        TXDAG_FAULTS_FIRED_DIR=str(home / "faults-fired"),  # each planned fault fires once: crash, then recover
        # metrics (test_metrics): Airflow's StatsD client sends to a port the test listens on; a scraper's token
        AIRFLOW__METRICS__STATSD_ON="True", AIRFLOW__METRICS__STATSD_HOST="127.0.0.1",
        AIRFLOW__METRICS__STATSD_PORT=os.environ.get("TXDAG_E2E_STATSD_PORT", str(port + 9333)),  # 8792: 18125
        AIRFLOW__TXDAG__METRICS_TOKEN=f"scrape-{unique}",
        # lineage (test_metrics): the OpenLineage provider writes each event as a line of a file
        AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps({"type": "file", "log_file_path": str(home / "openlineage.jsonl"),
                                                    "append": True}),
        AIRFLOW__OPENLINEAGE__NAMESPACE="txdag-e2e",
        # (recovery timeouts: scripts/airflow.sh's own, the shipped ones; test_recovery.py relies on them)
    )
    spark_connect_port = os.environ.get("TXDAG_E2E_SPARK_CONNECT_PORT", "15094")
    env.update(TXDAG_SPARK_CONNECT_PORT=spark_connect_port, AIRFLOW_CONN_SPARK_CONNECT_DEFAULT=json.dumps(
        {"conn_type": "spark_connect", "host": "127.0.0.1", "port": int(spark_connect_port)}))
    admin_url = urlunparse(redis._replace(path=f"/{redis_db}"))
    with redis_py.Redis.from_url(admin_url) as client:
        sources = load_sources(client)
        # Access control: redis_default is a user limited to the topologies' keys; zookeeper_default a digest.
        found, _ = load_definitions(REPO / "dags")
        for source in dag_sources:
            found.update(load_definitions(source)[0] if source.is_dir() else {})
        user, user_password = f"txdag-e2e-{unique}", f"e2e-{uuid.uuid4().hex}"
        client.execute_command("ACL", "SETUSER", *setuser_args(user, list(found.values()), password=user_password,
                                                               source_write=True))
    env["AIRFLOW_CONN_REDIS_DEFAULT"] = json.dumps({"conn_type": "redis", "host": redis_host, "port": redis_port,
                                                    "login": user, "password": user_password,
                                                    "extra": {"db": redis_db}})
    env["AIRFLOW_CONN_ZOOKEEPER_DEFAULT"] = json.dumps({"conn_type": "zookeeper", "host": zk_host, "port": zk_port,
                                                        "login": ZK_AUTH[0], "password": ZK_AUTH[1],
                                                        "extra": {"root": zk_root}})
    env["AIRFLOW_CONN_KAFKA_DEFAULT"] = json.dumps({"conn_type": "kafka",
                                                    "extra": {"bootstrap.servers": KAFKA_BOOTSTRAP}})
    env.update(airflow_extra_env)

    # A session killed before its teardown leaves its components running: stop them, then start afresh.
    subprocess.run(["bash", str(AIRFLOW_SH), "stop"], env=env, capture_output=True, timeout=120, check=False)
    shutil.rmtree(home, ignore_errors=True)
    (home / "dags" / "extra").mkdir(parents=True)
    (home / "faults-fired").mkdir()
    for source in dag_sources:
        if source.is_dir():
            link = home / "dags" / source.name
            if link.exists():  # two folders with one name: keep both
                link = home / "dags" / f"{source.name}-{abs(hash(str(source))) % 10_000}"
            link.symlink_to(source.resolve(), target_is_directory=True)

    start_log = home / "start.log"
    started = time.monotonic()
    try:
        with start_log.open("w") as out:
            result = subprocess.run(["bash", str(SPARK_CONNECT_SH), "start"], env=env, stdout=out,
                                    stderr=subprocess.STDOUT, timeout=START_TIMEOUT, check=False)
            if result.returncode != 0:
                pytest.fail(f"scripts/spark-connect.sh start failed:\n{start_log.read_text()[-4000:]}", pytrace=False)
            result = subprocess.run(
                ["bash", str(AIRFLOW_SH), "start"], env=env, stdout=out, stderr=subprocess.STDOUT,
                timeout=START_TIMEOUT, check=False,
            )  # fmt: skip
        if result.returncode != 0:
            pytest.fail(
                f"scripts/airflow.sh start failed (exit {result.returncode}):\n{start_log.read_text()[-4000:]}",
                pytrace=False,
            )
        password = json.loads((home / "simple_auth_manager_passwords.json").read_text())["admin"]
        base_url = f"http://127.0.0.1:{port}"
        instance = AirflowInstance(
            home=home,
            base_url=base_url,
            username="admin",
            password=password,
            dags_folder=home / "dags",
            env={**env, "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"},
            redis_url=admin_url,
            secrets=[user_password, *PASSWORDS],
            redis_user=user,
            zk_hosts=zk_hosts,
            zk_root=zk_root,
            api=AirflowAPI(base_url, "admin", password),
            sources=sources,
        )
        print(f"\ne2e Airflow up in {time.monotonic() - started:.0f} s at {base_url} (AIRFLOW_HOME={home})")
        yield instance
    finally:
        subprocess.run(["bash", str(AIRFLOW_SH), "stop"], env=env, capture_output=True, timeout=120, check=False)
        subprocess.run(["bash", str(SPARK_CONNECT_SH), "stop"], env=env, capture_output=True, timeout=120,
                       check=False)
        _delete_znode(zk_hosts, zk_root)
        with redis_py.Redis.from_url(admin_url) as client:
            client.execute_command("ACL", "DELUSER", user)


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """An ``airflow api-server`` of the test module's own (no scheduler, no PostgreSQL): SQLite in a temporary
    AIRFLOW_HOME, a free loopback port, the Simple auth manager's user ``admin``. Yields (base URL, its password);
    stops the server at the end of the module. Cheap (~20 s): for tests of the REST API and the txdag CLI."""
    home = tmp_path_factory.mktemp("airflow-api")
    port = free_port()
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"), "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db"}
    airflow = str(AIRFLOW) if AIRFLOW.exists() else "airflow"
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    log = open(home / "api.log", "wb")  # noqa: SIM115 (closed at teardown)
    server = subprocess.Popen([airflow, "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                              env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if requests.get(f"{url}/api/v2/monitor/health", timeout=10).ok:
                    break
            except (requests.ConnectionError, requests.Timeout):  # not listening yet, or still starting up
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"airflow api-server did not start on {url}; see {home / 'api.log'}", pytrace=False)
            time.sleep(1)
        password = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
        yield url, password
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        log.close()


@pytest.fixture(autouse=True)
def clear_of_scheduled_runs(request: pytest.FixtureRequest) -> None:
    """Before each test on the e2e Airflow (unless marked own_topologies): no scheduled run due within
    SCHEDULE_MARGIN or still in flight."""
    if "airflow" in request.fixturenames and request.node.get_closest_marker("own_topologies") is None:
        wait_schedule_quiet(request.getfixturevalue("airflow").api, request.node.name)


def wait_schedule_quiet(api: AirflowAPI, test: str) -> None:
    deadline, told = time.monotonic() + SCHEDULE_WAIT_TIMEOUT, False
    while True:
        dags = [d for d in api.get("/dags", limit=100)["dags"] if not d["is_paused"] and d["next_dagrun_run_after"]]
        soon = datetime.now(UTC) + SCHEDULE_MARGIN
        due = [d["dag_id"] for d in dags if datetime.fromisoformat(d["next_dagrun_run_after"]) <= soon]
        scheduled = {d["dag_id"] for d in dags}
        in_flight = api.runs("~", run_type="scheduled", state=["queued", "running"])  # "~": every DAG, one request
        busy = [f"{r['dag_id']}/{r['dag_run_id']}" for r in in_flight if r["dag_id"] in scheduled]
        if not due and not busy:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{test}: scheduled runs still due ({due}) or in flight ({busy}) after "
                               f"{SCHEDULE_WAIT_TIMEOUT} s")
        if not told:
            print(f"\n{test} waits for the scheduled runs due before {soon:%H:%M:%S} UTC: due {due}, in flight {busy}")
            told = True
        time.sleep(5)


@pytest.fixture
def store_of(airflow: AirflowInstance) -> Iterator:
    """``store_of(topology)``: the TransactionStore of a topology of the session's Airflow."""
    from txdag.zk.client import close_zk, connect_zk
    from txdag.zk.store import TransactionStore

    client = connect_zk(airflow.zk_hosts, auth=ZK_AUTH)
    yield lambda topology: TransactionStore(client, topology, root=airflow.zk_root)
    close_zk(client)


def _delete_znode(hosts: str, path: str) -> None:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=hosts, timeout=5, **kazoo_auth())
    try:
        client.start(timeout=5)
        client.delete(path, recursive=True)
    except Exception:  # never created, or ZooKeeper is gone: nothing to clean
        pass
    finally:
        client.stop()
        client.close()

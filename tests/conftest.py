"""Shared fixtures: real Redis and ZooKeeper on loopback (started by scripts/services.sh), one namespace per test.

Tests under tests/unit are marked ``unit`` and must not touch a service; tests under tests/integration are
marked ``integration`` and get a unique Redis key prefix and a unique znode root each. Both services run with
access control on: the clients authenticate with the credentials of ``tests/access.py``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from access import (
    KAFKA_BOOTSTRAP,
    KAFKA_SASL_CONFIG,
    REDIS_URL,
    ZK_AUTH,
    ZK_HOSTS,
    kazoo_auth,
    redis_config_of,
    safe_url,
)

TESTS = Path(__file__).resolve().parent
HOW_TO_START = "start them with `bash scripts/services.sh start` (or run the README's test command)"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = Path(str(item.fspath)).relative_to(TESTS).parts[0]  # tests/<tier>/<package mirror>/test_*.py
        if tier in ("unit", "integration", "e2e", "demo", "cluster", "jepsen"):
            item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture(scope="session")
def redis_url() -> str:
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.AuthenticationError as exc:
        pytest.fail(f"Redis at {safe_url(REDIS_URL)} refused the test credentials ({exc}): run the tests with "
                    f"`bash scripts/test.sh`, or set TXDAG_TEST_REDIS_URL=redis://ADMIN:PASSWORD@host:port/0 "
                    f"(.run/credentials.env holds the admin user)", pytrace=False)
    except redis.ConnectionError as exc:
        pytest.fail(f"Redis is not reachable at {safe_url(REDIS_URL)} ({exc}); {HOW_TO_START}", pytrace=False)
    finally:
        client.close()
    return REDIS_URL


@pytest.fixture
def redis_client(redis_url: str, prefix: str) -> Iterator[redis.Redis]:
    """A client of the test Redis; every key naming the test's prefix is deleted afterwards."""
    client = redis.Redis.from_url(redis_url)
    yield client
    leftovers = list(client.scan_iter(match=f"*{prefix}*", count=1000))
    if leftovers:
        client.delete(*leftovers)
    client.close()


@pytest.fixture
def prefix() -> str:
    """A unique key prefix (and topology id) for one test."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def zk_auth() -> tuple[str, str]:
    """The digest (user, password) every test's ZooKeeper client authenticates with."""
    return ZK_AUTH


@pytest.fixture(scope="session")
def zk_hosts() -> str:
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError
    from kazoo.security import ACL, Id, Permissions, make_digest_acl

    client = KazooClient(hosts=ZK_HOSTS, timeout=3, **kazoo_auth())
    try:
        client.start(timeout=5)
        # the tests' parent: every znode below it is the test user's (digest), but other users may add theirs
        world = ACL(Permissions.READ | Permissions.CREATE, Id("world", "anyone"))
        client.ensure_path("/txdag-test", acl=[make_digest_acl(*ZK_AUTH, all=True), world])
    except KazooTimeoutError:
        pytest.fail(f"ZooKeeper is not reachable at {ZK_HOSTS}; {HOW_TO_START}", pytrace=False)
    finally:
        client.stop()
        client.close()
    return ZK_HOSTS


@pytest.fixture
def zk_root(zk_hosts: str, prefix: str) -> Iterator[str]:
    """A unique znode root for one test, deleted afterwards."""
    from kazoo.client import KazooClient

    root = f"/txdag-test/{prefix}"
    yield root
    client = KazooClient(hosts=zk_hosts, timeout=5, **kazoo_auth())
    client.start(timeout=5)
    try:
        client.delete(root, recursive=True)
    except Exception:  # already gone, or never created
        pass
    finally:
        client.stop()
        client.close()


@pytest.fixture
def zk_client(zk_hosts: str) -> Iterator[KazooClient]:  # noqa: F821
    """A client authenticated with the test digest: the znodes it creates only that user can read or change."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk_hosts, timeout=5, **kazoo_auth())
    client.start(timeout=5)
    yield client
    client.stop()
    client.close()


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """The address of the test Kafka broker (scripts/kafka.sh's, started by scripts/services.sh), once it answers."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        AdminClient({"bootstrap.servers": KAFKA_BOOTSTRAP}).list_topics(timeout=10)
    except KafkaException as exc:
        pytest.fail(f"Kafka is not reachable at {KAFKA_BOOTSTRAP} ({exc}); {HOW_TO_START}", pytrace=False)
    return KAFKA_BOOTSTRAP


@pytest.fixture(scope="session")
def kafka_sasl_config(kafka_bootstrap: str) -> dict[str, str]:
    """A client configuration that logs in to the test broker's SASL listener (PLAIN, .run/credentials.env's
    TXDAG_KAFKA_USER), once that listener answers."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    if not KAFKA_SASL_CONFIG["sasl.password"]:
        pytest.fail("no TXDAG_KAFKA_PASSWORD in .run/credentials.env: run bash scripts/credentials.sh, then restart "
                    "the broker (bash scripts/services.sh stop kafka; bash scripts/services.sh start kafka)",
                    pytrace=False)
    try:
        AdminClient(KAFKA_SASL_CONFIG).list_topics(timeout=10)
    except KafkaException as exc:
        pytest.fail(f"Kafka's SASL listener does not answer at {KAFKA_SASL_CONFIG['bootstrap.servers']} ({exc}): "
                    "a broker started before scripts/kafka.sh had it? restart it (bash scripts/services.sh stop "
                    "kafka; bash scripts/services.sh start kafka)", pytrace=False)
    return dict(KAFKA_SASL_CONFIG)


class RedisServer:
    """A redis-server process on a free loopback port, stoppable and restartable with the same data."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start (or restart on the same port); the first start retries on another port if it was taken."""
        restart = bool(self.port)  # a restart keeps its port: the clients point at it
        for _ in range(1 if restart else 5):
            if not restart:
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", 0))
                    self.port = sock.getsockname()[1]
            if self._spawn():
                return
        raise RuntimeError(f"redis-server did not start on 127.0.0.1:{self.port}")

    def _spawn(self) -> bool:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.workdir),
             "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        probe = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.2, retry=None)
        deadline = time.monotonic() + 10
        try:
            while self.process.poll() is None and time.monotonic() < deadline:
                try:
                    probe.ping()
                    return self.process.poll() is None  # not some other server on a taken port
                except (redis.ConnectionError, redis.BusyLoadingError):
                    time.sleep(0.05)
        finally:
            probe.close()
        self.kill()
        return False

    def kill(self) -> None:
        """SIGKILL: the partition is down (connections refused)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def freeze(self, frozen: bool) -> None:
        """SIGSTOP/SIGCONT: the partition hangs (connections time out) or resumes."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP if frozen else signal.SIGCONT)


@pytest.fixture
def second_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A second redis-server of the test's own (append-only, fsync always), for partitions that go down."""
    server = RedisServer(tmp_path)
    server.start()
    yield server
    if server.process is not None:
        server.freeze(False)
    server.kill()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real 3-master Redis Cluster on free loopback ports (tests/support/cluster.py), once per session, with an
    admin user and the default user off."""
    from support.cluster import RedisClusterServers

    cluster = RedisClusterServers(tmp_path_factory.mktemp("redis-cluster"))
    cluster.start()
    yield cluster
    cluster.stop()


@dataclass
class KVProvider:
    """A KeyValueState provider under test: its name, its JSON config and a client built from them."""

    name: str
    config: dict[str, Any]
    client: Any

    def __repr__(self) -> str:  # pytest prints fixtures on failure: never the password
        return f"KVProvider({self.name!r}, {self.config.get('nodes') or self.config.get('port')})"


@pytest.fixture(params=["redis", "redis_cluster"])
def kv_provider(request: pytest.FixtureRequest, redis_url: str, prefix: str) -> Iterator[KVProvider]:
    """Each KeyValueState provider in turn (one contract suite, every backend); keys naming the test's prefix
    are deleted afterwards, on every node of the cluster."""
    from txdag.state.kv import make_client, parse_provider_config

    if request.param == "redis":
        config = redis_config_of(redis_url)
    else:
        config = request.getfixturevalue("redis_cluster").config()
    client = make_client(parse_provider_config(request.param, config))
    yield KVProvider(request.param, config, client)
    for key in list(client.scan_iter(match=f"*{prefix}*", count=1000)):
        client.delete(key)
    client.close()


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory):
    """Airflow reads its home once, at import: a throwaway one, so no airflow.cfg lands in ~/airflow (modules that
    import Airflow, e.g. the CLI's tests, use it: ``pytestmark = pytest.mark.usefixtures("airflow_home")``)."""
    saved = os.environ.get("AIRFLOW_HOME")
    os.environ.setdefault("AIRFLOW_HOME", str(tmp_path_factory.mktemp("airflow-home")))
    yield
    if saved is None:
        os.environ.pop("AIRFLOW_HOME", None)

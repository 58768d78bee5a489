"""The README's service commands, run as written: ``bash scripts/services.sh start``, ``status``,
``restart-redis`` (keeps the data) and ``stop`` (then ``status`` says down and exits 1); and what a stop and a
start keep (everything: Redis's keys and users, ZooKeeper's znodes, Kafka's topics and every acknowledged record),
a crash of Redis too (its append-only file is fsynced before it answers) and a SIGKILL of Kafka (it fsyncs a
partition's log before it acknowledges), what ``wipe`` deletes (the data, never the users), and a Redis that an
older services.sh started without an append-only file, whose data ``stop`` and ``restart-redis`` keep as well.

They run on a Redis, a ZooKeeper and a Kafka broker of each test's own, on free ports (TXDAG_REDIS_PORT,
TXDAG_ZK_PORT, TXDAG_KAFKA_PORT, TXDAG_KAFKA_CONTROLLER_PORT, TXDAG_KAFKA_SASL_PORT), never on the servers the
other tests use; their .run/redis-<port>/, .run/zk-<port>/ and .run/kafka-<port>/ are removed at the end.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import redis
from access import REDIS_URL, kazoo_auth
from support.kafka import admin_client, create_topic, partitions_of, produce, read_range, watermarks
from support.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
STAGED_KEY = "txdag:stage:{word_count}:survivor"  # a key the topologies' user of the dags/ folder may read


def kill(pid: int) -> None:
    """SIGKILL, then wait up to 10 s for the process to be gone."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


@dataclass
class Services:
    """scripts/services.sh on ports of the test's own, its admin client, and helpers to look at what it runs."""

    redis_port: int
    zk_port: int
    kafka_port: int
    kafka_controller_port: int
    kafka_sasl_port: int
    env: dict[str, str] = field(init=False)
    admin: redis.Redis = field(init=False)

    def __post_init__(self) -> None:
        self.env = {**os.environ, "TXDAG_REDIS_PORT": str(self.redis_port), "TXDAG_ZK_PORT": str(self.zk_port),
                    "TXDAG_KAFKA_PORT": str(self.kafka_port),
                    "TXDAG_KAFKA_CONTROLLER_PORT": str(self.kafka_controller_port),
                    "TXDAG_KAFKA_SASL_PORT": str(self.kafka_sasl_port)}
        self.admin = redis.Redis.from_url(REDIS_URL.rsplit("@", 1)[0] + f"@127.0.0.1:{self.redis_port}/0",
                                          socket_timeout=10, decode_responses=True)

    @property
    def redis_dir(self) -> Path:
        return ROOT / ".run" / f"redis-{self.redis_port}"

    @property
    def zk_dir(self) -> Path:
        return ROOT / ".run" / f"zk-{self.zk_port}"

    @property
    def kafka_dir(self) -> Path:
        return ROOT / ".run" / f"kafka-{self.kafka_port}"

    @property
    def kafka(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "scripts/services.sh", *args], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=300)

    def ok(self, *args: str) -> str:
        done = self(*args)
        assert done.returncode == 0, f"services.sh {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    def redis_pid(self) -> int:
        return int((self.redis_dir / "redis.pid").read_text())

    def kill_redis(self) -> None:
        """SIGKILL: Redis dies between two commands, with no chance to write anything out."""
        kill(self.redis_pid())

    def kill_kafka(self) -> None:
        """SIGKILL: the broker dies with no chance to write anything out or to shut down cleanly."""
        kill(int((self.kafka_dir / "kafka.pid").read_text()))

    def zk(self):  # type: ignore[no-untyped-def]
        from kazoo.client import KazooClient

        client = KazooClient(hosts=f"127.0.0.1:{self.zk_port}", timeout=5, **kazoo_auth())
        client.start(timeout=10)
        return client

    def admin_env(self) -> dict[str, str]:
        """The environment `txdag acl redis --apply` reads the admin login from (as scripts/airflow.sh gives it)."""
        url = urlsplit(REDIS_URL)
        return {**self.env, "TXDAG_REDIS_ADMIN_USER": unquote(url.username or ""),
                "TXDAG_REDIS_ADMIN_PASSWORD": unquote(url.password or "")}


@pytest.fixture
def services() -> Iterator[Services]:
    if shutil.which("redis-server") is None or not Path("/usr/share/zookeeper/bin/zkServer.sh").exists():
        pytest.fail("redis-server and ZooKeeper are needed: run `bash scripts/setup.sh`", pytrace=False)
    ports: set[int] = set()
    while len(ports) < 5:
        ports.add(free_port())
    svc = Services(*ports)
    try:
        yield svc
    finally:
        svc.admin.close()
        svc("stop")
        shutil.rmtree(svc.redis_dir, ignore_errors=True)
        shutil.rmtree(svc.zk_dir, ignore_errors=True)
        shutil.rmtree(svc.kafka_dir, ignore_errors=True)


def acl_rules(client: redis.Redis, user: str) -> dict:
    """ACL GETUSER, its lists sorted (Redis may list a user's commands in another order after a restart)."""
    info = client.acl_getuser(user)
    assert info is not None, f"no user {user!r}"
    return {k: sorted(v) if isinstance(v, list) and all(isinstance(x, str) for x in v) else v
            for k, v in info.items()}


def login(port: int, user: str, password: str) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, username=user, password=password, decode_responses=True)


def read_all(bootstrap: str, topic: str) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of every record of a topic of two partitions."""
    return sorted((p, offset, value) for p in (0, 1)
                  for offset, value in read_range(bootstrap, topic, p, 0, watermarks(bootstrap, topic, p)[1]))


# One test, one start/stop cycle of all three servers for all of it (a Kafka broker's start, a JVM's, is the dear
# part): status and restart-redis, then what a stop and a start keep, then what a crash of each keeps.
def test_start_status_restart_redis_stop_and_what_a_stop_a_start_and_a_crash_keep(services) -> None:
    services.ok("start")

    status = services("status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"Redis     127.0.0.1:{services.redis_port} up (started here, pid" in status.stdout
    assert f"ZooKeeper 127.0.0.1:{services.zk_port} up (started here, pid" in status.stdout
    assert f"Kafka     127.0.0.1:{services.kafka_port} up (started here, pid" in status.stdout
    assert "without its append-only file" not in status.stdout
    assert f"TXDAG_KAFKA_BOOTSTRAP=127.0.0.1:{services.kafka_port}" in services.ok("env")
    assert f"TXDAG_KAFKA_SASL_BOOTSTRAP=127.0.0.1:{services.kafka_sasl_port}" in services.ok("env")
    assert (services.kafka_dir / "server.properties").stat().st_mode & 0o777 == 0o600  # the SASL user's password

    admin, port = services.admin, services.redis_port
    assert admin.config_get("appendonly")["appendonly"] == "yes"
    assert admin.config_get("appendfsync")["appendfsync"] == "always"
    assert Path(admin.config_get("dir")["dir"]).resolve() == (services.redis_dir / "data").resolve()

    # restart-redis keeps the data and the users added since the start
    admin.set("services-script-test", "kept")
    admin.acl_setuser("added-since-start", enabled=True, passwords=["+pw-added"], keys=["services-*"],
                      commands=["+get"])  # no ACL SAVE: restart-redis saves it
    pid = services.redis_pid()
    restarted = services("restart-redis")
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert services.redis_pid() != pid, "restart-redis did not restart Redis"
    assert admin.get("services-script-test") == "kept"
    with login(port, "added-since-start", "pw-added") as user:
        assert user.get("services-script-test") == "kept"

    admin.set(STAGED_KEY, "42")
    admin.hset("services-script-hash", mapping={"a": "1", "b": "2"})
    admin.set("services-script-string", "s")
    # a transaction and a script of two writes each: Redis stores each as MULTI/EXEC in its append-only file and
    # replays them as the default user (so that user, off, must still be allowed to run them; redis/redis#14541)
    admin.pipeline(transaction=True).set("services-script-multi", "1").set("services-script-multi2", "2").execute()
    admin.eval("redis.call('SET', KEYS[1], '1'); redis.call('SET', KEYS[2], '2')", 2, "services-script-lua",
               "services-script-lua2")
    # a user saved the way the brief of access control says: ACL SETUSER, then ACL SAVE
    admin.acl_setuser("saved-user", enabled=True, passwords=["+pw-saved"], keys=["services-*"], commands=["+hgetall"])
    admin.execute_command("ACL", "SAVE")
    # the topologies' user exactly as scripts/airflow.sh creates it (txdag acl redis --apply: SETUSER + SAVE)
    created = subprocess.run(
        [sys.executable, "-m", "txdag.cli.main", "acl", "redis", "--dags", str(ROOT / "dags"), "--user", "txdag",
         "--password-env", "TXDAG_ACL_PASSWORD", "--source-write", "--apply", f"redis://127.0.0.1:{port}/0"],
        env={**services.admin_env(), "TXDAG_ACL_PASSWORD": "pw-txdag"}, capture_output=True, text=True, timeout=60)
    assert created.returncode == 0 and "(ACL SAVE)" in created.stdout, created.stdout + created.stderr
    # and one added since the start without ACL SAVE: stop saves it
    admin.acl_setuser("unsaved-user", enabled=True, passwords=["+pw-unsaved"], keys=["services-*"],
                      commands=["+get"])
    rules = {user: acl_rules(admin, user) for user in ("saved-user", "txdag", "unsaved-user")}

    zk = services.zk()
    try:
        zk.create("/services-script-test/txid", b"7", makepath=True)
    finally:
        zk.stop()
        zk.close()

    topic = "services-script-topic"
    create_topic(services.kafka, topic, 2)
    acked = produce(services.kafka, topic, [(i % 2, f"record-{i}") for i in range(100)])
    assert len(acked) == 100

    stopped = services("stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    status = services("status")
    assert status.returncode == 1, status.stdout + status.stderr
    assert f"Redis     127.0.0.1:{port} down" in status.stdout
    assert f"ZooKeeper 127.0.0.1:{services.zk_port} down" in status.stdout
    assert f"Kafka     127.0.0.1:{services.kafka_port} down" in status.stdout
    services.ok("start")

    # what restart-redis kept is not a one-off: the next cold start has it too
    assert admin.get("services-script-test") == "kept"
    with login(port, "added-since-start", "pw-added") as user:
        assert user.get("services-script-test") == "kept"
    assert admin.get(STAGED_KEY) == "42", "Redis came back without its keys"
    assert admin.hgetall("services-script-hash") == {"a": "1", "b": "2"}
    assert admin.mget("services-script-multi", "services-script-multi2", "services-script-lua",
                      "services-script-lua2") == ["1", "2", "1", "2"], "Redis dropped transactions at its start"
    assert "ACLs rules changed" not in (services.redis_dir / "redis.log").read_text()
    with redis.Redis(port=port, socket_timeout=10) as anonymous, pytest.raises(redis.AuthenticationError):
        anonymous.get("services-script-multi")  # the default user stays off: no one logs in as it
    assert {user: acl_rules(admin, user) for user in rules} == rules, "Redis came back without its users"
    with login(port, "saved-user", "pw-saved") as user:
        assert user.hgetall("services-script-hash") == {"a": "1", "b": "2"}
    with login(port, "txdag", "pw-txdag") as user:
        assert user.get(STAGED_KEY) == "42"
        with pytest.raises(redis.exceptions.NoPermissionError):
            user.get("services-script-hash")
    with login(port, "unsaved-user", "pw-unsaved") as user:
        assert user.get("services-script-string") == "s"
    with login(port, "unsaved-user", "wrong") as user, pytest.raises(redis.AuthenticationError):
        user.ping()  # the users came back with their passwords, not open

    zk = services.zk()
    try:
        data, _ = zk.get("/services-script-test/txid")
        assert data == b"7", "ZooKeeper came back without its znode"
    finally:
        zk.stop()
        zk.close()

    assert partitions_of(services.kafka, topic, 2) == [0, 1], "Kafka came back without its topic"
    assert read_all(services.kafka, topic) == sorted(acked), "Kafka lost records across a stop and a start"

    # a crash of Redis: what it acknowledged is in its append-only file already
    admin.set("services-script-acknowledged", "before-the-crash")
    services.kill_redis()
    assert services("status").returncode == 1
    services.ok("start", "redis")
    assert admin.get("services-script-acknowledged") == "before-the-crash", "an acknowledged write was lost"
    assert admin.get(STAGED_KEY) == "42"
    assert acl_rules(admin, "txdag") == rules["txdag"]

    # a crash of Kafka: each partition's log is fsynced before the broker acknowledges a write
    acked += produce(services.kafka, topic, [(i % 2, f"after-restart-{i}") for i in range(20)])
    services.kill_kafka()
    status = services("status")
    assert status.returncode == 1 and f"Kafka     127.0.0.1:{services.kafka_port} down" in status.stdout, \
        status.stdout
    services.ok("start", "kafka")
    assert read_all(services.kafka, topic) == sorted(acked), "acknowledged records lost in a crash"
    assert watermarks(services.kafka, topic, 0) == (0, 60)


def test_wipe_deletes_the_data_of_stopped_services_and_keeps_the_users(services) -> None:
    services.ok("start")
    admin, port = services.admin, services.redis_port
    admin.set("services-script-wiped", "x")
    admin.acl_setuser("kept-user", enabled=True, passwords=["+pw-kept"], keys=["services-*"], commands=["+get"])
    admin.execute_command("ACL", "SAVE")
    zk = services.zk()
    try:
        zk.create("/services-script-wiped", b"x")
    finally:
        zk.stop()
        zk.close()

    refused = services("wipe")
    assert refused.returncode == 1 and "stop it first" in refused.stderr, refused.stdout + refused.stderr
    services.ok("stop", "redis")  # ZooKeeper still runs: nothing is deleted, not even Redis's data
    refused = services("wipe")
    assert refused.returncode == 1 and "ZooKeeper" in refused.stderr, refused.stdout + refused.stderr
    services.ok("stop", "zk")  # Kafka still runs
    refused = services("wipe")
    assert refused.returncode == 1 and "Kafka" in refused.stderr, refused.stdout + refused.stderr
    services.ok("start")
    assert admin.get("services-script-wiped") == "x", "a refused wipe deleted Redis's data"
    create_topic(services.kafka, "services-script-wiped", 1)

    services.ok("stop")
    out = services.ok("wipe")
    assert "data deleted" in out and "users" in out
    assert not (services.kafka_dir / "data").exists(), "wipe kept Kafka's data"
    services.ok("start")
    topics = admin_client(services.kafka).list_topics(timeout=30).topics
    assert "services-script-wiped" not in topics, "wipe kept Kafka's topics"
    assert admin.get("services-script-wiped") is None, "wipe kept Redis's keys"
    assert admin.dbsize() == 0
    with login(port, "kept-user", "pw-kept") as user:
        assert user.get("services-script-wiped") is None
    zk = services.zk()
    try:
        assert zk.exists("/services-script-wiped") is None, "wipe kept ZooKeeper's znodes"
    finally:
        zk.stop()
        zk.close()


def start_like_an_older_services_sh(services: Services) -> None:
    """redis-server as services.sh started it before it kept data: no append-only file, --dir .run/redis-<port>/,
    its pid in services.sh's pid file (so that services.sh takes it for its own)."""
    redis_dir = services.redis_dir
    subprocess.run(["redis-server", "--port", str(services.redis_port), "--bind", "127.0.0.1", "--daemonize", "yes",
                    "--dir", str(redis_dir), "--aclfile", str(redis_dir / "users.acl"),
                    "--pidfile", str(redis_dir / "redis.pid"), "--logfile", str(redis_dir / "redis.log"),
                    "--save", "", "--appendonly", "no"], check=True, timeout=30)
    deadline = time.monotonic() + 10
    while True:
        try:
            services.admin.ping()
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline, "the old-style redis-server did not start"
            time.sleep(0.05)
    assert services.admin.config_get("appendonly")["appendonly"] == "no"


def test_a_redis_started_by_an_older_services_sh_keeps_its_data_and_gets_its_append_only_file(services) -> None:
    services.ok("start", "redis")  # the ACL file
    services.ok("stop", "redis")
    services.ok("wipe", "redis")
    admin = services.admin

    start_like_an_older_services_sh(services)
    admin.set("services-script-old", "restarted")
    status = services.ok("start", "redis")
    assert "without its append-only file" in status and "restart-redis" in status, status
    services.ok("restart-redis")
    assert admin.get("services-script-old") == "restarted"
    assert admin.config_get("appendonly")["appendonly"] == "yes"
    services.kill_redis()
    services.ok("start", "redis")
    assert admin.get("services-script-old") == "restarted", "restart-redis did not switch the append-only file on"

    # Again, while data/ holds the append-only file just written: the old server's dump is newer and wins.
    services.ok("stop", "redis")
    start_like_an_older_services_sh(services)
    admin.set("services-script-old", "stopped")
    stopped = services.ok("stop", "redis")
    assert "SHUTDOWN SAVE" in stopped and "is newer than the append-only file" in stopped, stopped
    services.ok("start", "redis")
    assert admin.get("services-script-old") == "stopped", "stop lost the data of a Redis without append-only file"
    assert [p.name.startswith("aof-replaced-") for p in (services.redis_dir / "data").iterdir()
            if p.name != "appendonlydir"] == [True], "the older append-only file was not set aside"
    assert admin.config_get("appendonly")["appendonly"] == "yes"
    assert not (services.redis_dir / "data" / "dump.rdb").exists(), "the dump was left beside the append-only file"
    services.kill_redis()
    services.ok("start", "redis")
    assert admin.get("services-script-old") == "stopped"

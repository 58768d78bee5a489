"""docker-compose.yaml's ``redis`` service command, run as it is (sh) with a local redis-server: no Docker.

Its ``/data`` (the volume) is a temporary directory, and the image's ``docker-entrypoint.sh`` a shim on PATH that
runs the rest of the command on a free loopback port. Checked: the ACL file lives on the volume, the admin logs in
(the file holds its SHA-256, not the password), a user added with ``txdag acl redis --apply`` (as txdag-init does)
and the data both survive a restart, and a new admin password in .env takes effect at the next start; a crash
(``docker kill``: SIGKILL) loses no write Redis acknowledged (append-only file, fsynced before each answer).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml
from support.servers import free_port

from txdag.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SHIM = '#!/bin/sh\n# the redis image\'s entrypoint, here\nexec "$@" --port "$TEST_REDIS_PORT" --bind 127.0.0.1\n'


def compose_redis_command(data: Path) -> list[str]:
    """The service's command with compose's ``$$`` escapes undone and the volume's mount point at ``data``."""
    command = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())["services"]["redis"]["command"]
    assert command[:2] == ["sh", "-c"] and "/data" in command[2], command
    assert "${" not in command[2], "the command would need compose's interpolation of a variable"
    return ["sh", "-c", command[2].replace("$$", "$").replace("/data", str(data))]


def acl_rules(client: redis.Redis, user: str) -> dict:
    """ACL GETUSER, its lists sorted: Redis lists a user's commands in an order that may change at a restart."""
    info = client.acl_getuser(user)
    assert info is not None, f"no user {user!r}"
    return {k: sorted(v) if isinstance(v, list) and all(isinstance(x, str) for x in v) else v
            for k, v in info.items()}


class ComposeRedis:
    def __init__(self, tmp_path: Path) -> None:
        self.data = tmp_path / "volume"
        self.data.mkdir()
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "docker-entrypoint.sh").write_text(SHIM)
        (bin_dir / "docker-entrypoint.sh").chmod(0o755)
        self.port = free_port()
        self.user, self.password = "compose-admin", secrets.token_hex(12)
        self.env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                    "TEST_REDIS_PORT": str(self.port)}
        self.process: subprocess.Popen[bytes] | None = None
        self.log = tmp_path / "redis.log"

    def start(self) -> None:
        env = {**self.env, "TXDAG_REDIS_ADMIN_USER": self.user, "TXDAG_REDIS_ADMIN_PASSWORD": self.password}
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(compose_redis_command(self.data), env=env, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 20
        while True:
            try:
                with self.admin() as client:
                    client.ping()
                return
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the compose redis command did not start: {self.log.read_text()[-2000:]}")
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # docker stop: SIGTERM, Redis saves and exits
            self.process.wait(timeout=30)

    def kill(self) -> None:
        """docker kill: SIGKILL, Redis writes nothing out."""
        assert self.process is not None and self.process.poll() is None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def admin(self, password: str | None = None) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, username=self.user,
                           password=password or self.password, decode_responses=True)

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


@pytest.fixture
def compose_redis(tmp_path: Path) -> Iterator[ComposeRedis]:
    server = ComposeRedis(tmp_path)
    server.start()
    yield server
    server.stop()


def test_the_user_txdag_init_saves_and_the_data_survive_a_restart(compose_redis, monkeypatch, capsys) -> None:
    acl_file = compose_redis.data / "users.acl"
    with compose_redis.admin() as admin:
        assert admin.config_get("aclfile")["aclfile"] == str(acl_file), "the ACL file is not on the volume"
        assert admin.config_get("appendonly")["appendonly"] == "yes"
        assert admin.config_get("appendfsync")["appendfsync"] == "always"
        assert admin.config_get("dir")["dir"] == str(compose_redis.data)
    assert acl_file.stat().st_mode & 0o077 == 0, "the ACL file is readable by others"
    assert compose_redis.password not in acl_file.read_text()
    with pytest.raises(redis.AuthenticationError):  # the default user is off
        redis.Redis(host="127.0.0.1", port=compose_redis.port).ping()

    # What txdag-init does: the topologies' user, through the admin, saved to the ACL file.
    monkeypatch.setenv("TXDAG_REDIS_ADMIN_USER", compose_redis.user)
    monkeypatch.setenv("TXDAG_REDIS_ADMIN_PASSWORD", compose_redis.password)
    monkeypatch.setenv("TOPOLOGIES_PW", "topologies-pw")
    assert main(["acl", "redis", "--dags", str(ROOT / "dags"), "--user", "txdag", "--password-env", "TOPOLOGIES_PW",
                 "--source-write", "--apply", compose_redis.url()]) == 0
    assert f"saved to {acl_file}" in capsys.readouterr().out
    with compose_redis.admin() as admin:
        rules = acl_rules(admin, "txdag")
        admin.set("txdag:stage:{word_count}:survivor", "42")

    compose_redis.stop()
    compose_redis.password, old_password = secrets.token_hex(12), compose_redis.password  # changed in .env
    compose_redis.start()

    with compose_redis.admin() as admin:
        assert acl_rules(admin, "txdag") == rules, "the topologies' user did not survive the restart"
        assert admin.get("txdag:stage:{word_count}:survivor") == "42", "the data did not survive the restart"
        assert sorted(admin.acl_users()) == ["compose-admin", "default", "txdag"]
    with pytest.raises(redis.AuthenticationError):
        compose_redis.admin(old_password).ping()
    with redis.Redis(host="127.0.0.1", port=compose_redis.port, username="txdag", password="topologies-pw") as user:
        assert user.get("txdag:stage:{word_count}:survivor") == b"42"
        with pytest.raises(redis.exceptions.NoPermissionError):
            user.get("not-a-topology-key")


def test_a_crash_loses_no_acknowledged_write_nor_a_saved_user(compose_redis) -> None:
    with compose_redis.admin() as admin:
        admin.acl_setuser("crash-user", enabled=True, passwords=["+crash-pw"], keys=["crash:*"], commands=["+get"])
        admin.execute_command("ACL", "SAVE")
        for i in range(200):  # one at a time, each acknowledged before the next
            admin.set(f"crash:{i}", str(i))
    compose_redis.kill()
    assert not list(compose_redis.data.glob("dump.rdb")), "a dump was written: this was not a crash"
    compose_redis.start()
    with compose_redis.admin() as admin:
        assert admin.mget([f"crash:{i}" for i in range(200)]) == [str(i) for i in range(200)], \
            "writes Redis acknowledged were lost in the crash"
    with redis.Redis(host="127.0.0.1", port=compose_redis.port, username="crash-user", password="crash-pw",
                     decode_responses=True) as user:
        assert user.get("crash:199") == "199"

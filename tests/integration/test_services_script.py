"""The README's service commands, run as written: ``bash scripts/services.sh start``, ``status``,
``restart-redis`` (keeps the data) and ``stop`` (then ``status`` says down and exits 1).

They run on a Redis and a ZooKeeper of this test's own, on free ports (TXDAG_REDIS_PORT, TXDAG_ZK_PORT), never
on the servers the other tests use; their .run/redis-<port>/ and .run/zk-<port>/ are removed at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import redis
from access import REDIS_URL
from support.servers import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_start_status_restart_redis_stop() -> None:
    if shutil.which("redis-server") is None or not Path("/usr/share/zookeeper/bin/zkServer.sh").exists():
        pytest.fail("redis-server and ZooKeeper are needed: run `bash scripts/setup.sh`", pytrace=False)
    redis_port, zk_port = free_port(), free_port()
    while zk_port == redis_port:
        zk_port = free_port()
    env = {**os.environ, "TXDAG_REDIS_PORT": str(redis_port), "TXDAG_ZK_PORT": str(zk_port)}

    def services(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "scripts/services.sh", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=180)

    admin = redis.Redis.from_url(REDIS_URL.rsplit("@", 1)[0] + f"@127.0.0.1:{redis_port}/0", socket_timeout=10)
    try:
        started = services("start")
        assert started.returncode == 0, started.stdout + started.stderr

        status = services("status")
        assert status.returncode == 0, status.stdout + status.stderr
        assert f"Redis     127.0.0.1:{redis_port} up (started here, pid" in status.stdout
        assert f"ZooKeeper 127.0.0.1:{zk_port} up (started here, pid" in status.stdout

        admin.set("services-script-test", "kept")
        restarted = services("restart-redis")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        assert admin.get("services-script-test") == b"kept"

        stopped = services("stop")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        status = services("status")
        assert status.returncode == 1, status.stdout + status.stderr
        assert f"Redis     127.0.0.1:{redis_port} down" in status.stdout
        assert f"ZooKeeper 127.0.0.1:{zk_port} down" in status.stdout
    finally:
        admin.close()
        services("stop")
        shutil.rmtree(ROOT / ".run" / f"redis-{redis_port}", ignore_errors=True)
        shutil.rmtree(ROOT / ".run" / f"zk-{zk_port}", ignore_errors=True)

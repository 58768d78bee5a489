"""A real Redis Cluster of three masters on free loopback ports, with access control like the dev Redis.

Each node is a redis-server with ``cluster-enabled yes``, its client and cluster-bus ports both picked free
(``cluster-port``, so port+10000 need not be free), the ``default`` user off and one admin user whose password
is only in memory here (the node's config file holds its SHA-256). The slots are split in three ranges with
``CLUSTER ADDSLOTSRANGE``, each node gets its own config epoch, node 0 MEETs the others, and ``start`` returns
once every node reports ``cluster_state:ok`` with three known nodes (what ``redis-cli --cluster create`` does,
without needing its prompts or its password on a command line).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import redis
from support.servers import free_port

SLOTS = 16384


class RedisClusterServers:
    """``start()`` / ``stop()``; ``config()`` is the ``redis_cluster`` provider config reaching it."""

    def __init__(self, workdir: Path, masters: int = 3, username: str = "txdag-admin") -> None:
        self.workdir = Path(workdir)
        self.masters = masters
        self.username = username
        self.password = secrets.token_urlsafe(18)
        self.ports: list[int] = []
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def nodes(self) -> list[str]:
        return [f"127.0.0.1:{p}" for p in self.ports]

    def config(self, **extra: Any) -> dict[str, Any]:
        return {"nodes": self.nodes, "username": self.username, "password": self.password, **extra}

    def node_client(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, username=self.username, password=self.password,
                           socket_connect_timeout=1, socket_timeout=5)

    def start(self, timeout: float = 30.0) -> None:
        buses = []
        for i in range(self.masters):
            port, bus = free_port(), free_port()
            self.ports.append(port)
            buses.append(bus)
            self.processes.append(self._spawn(i, port, bus))
        try:
            for port in self.ports:
                self._wait(lambda p=port: bool(self.node_client(p).ping()), timeout, f"node {port} to answer")
            self._assign_slots(buses)
            self._wait(self._formed, timeout, "the cluster to form")
        except BaseException:
            self.stop()
            raise

    def _spawn(self, index: int, port: int, bus: int) -> subprocess.Popen[bytes]:
        home = self.workdir / f"node-{index}"
        home.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(self.password.encode()).hexdigest()
        conf = home / "redis.conf"
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ncluster-enabled yes\ncluster-port {bus}\n"
            f"cluster-config-file {home / 'nodes.conf'}\ncluster-node-timeout 5000\nsave \"\"\nappendonly no\n"
            f"dir {home}\ndaemonize no\nuser default off\nuser {self.username} on #{digest} ~* &* +@all\n"
        )
        conf.chmod(0o600)
        with (home / "redis.log").open("ab") as log:
            return subprocess.Popen(["redis-server", str(conf)], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)

    def _assign_slots(self, buses: list[int]) -> None:
        step = SLOTS // self.masters
        for i, port in enumerate(self.ports):
            first, last = i * step, SLOTS - 1 if i == self.masters - 1 else (i + 1) * step - 1
            node = self.node_client(port)
            node.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
            node.execute_command("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
        seed = self.node_client(self.ports[0])
        for port, bus in zip(self.ports[1:], buses[1:]):
            seed.execute_command("CLUSTER", "MEET", "127.0.0.1", port, bus)

    def _formed(self) -> bool:
        for port in self.ports:
            info = self.node_client(port).execute_command("CLUSTER", "INFO")
            text = info.decode() if isinstance(info, bytes) else str(info)
            if "cluster_state:ok" not in text or f"cluster_known_nodes:{self.masters}" not in text:
                return False
        return True

    def _wait(self, ready: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.processes):
                raise RuntimeError(f"a Redis Cluster node exited while waiting for {what} (see {self.workdir})")
            try:
                if ready():
                    return
            except (redis.ConnectionError, redis.ResponseError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"timed out after {timeout}s waiting for {what} (see {self.workdir})")

    def stop(self) -> None:
        for process in self.processes:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
        self.processes.clear()

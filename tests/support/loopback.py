"""The loopback cluster of scripts/cluster.sh as the cluster tier runs it: on ports of the tests' own, started
once per session (tests/cluster/conftest.py) and wiped before and after."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit

from access import REDIS_URL

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "cluster.sh"
PORTS = {"TXDAG_CLUSTER_ZK_PORT": "2391", "TXDAG_CLUSTER_REDIS_PORT": "7401", "TXDAG_CLUSTER_SPARK_PORT": "7477",
         "TXDAG_CLUSTER_AIRFLOW_PORT": "8991", "TXDAG_CLUSTER_PG_PORT": "5691"}
ENV = {**os.environ, **PORTS}
ZK_PORTS = [2391, 2392, 2393]
REDIS_PORTS = list(range(7401, 7407))
RUN = REPO / ".run" / "cluster"


def run(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], env=ENV, capture_output=True, text=True, timeout=timeout)


def cluster(*args: str, timeout: float = 240) -> str:
    done = run(*args, timeout=timeout)
    assert done.returncode == 0, f"cluster.sh {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done.stdout


def user_shell(command: str, timeout: float = 300) -> str:
    """Run ``command`` in bash at the repository's root as docs/operations.md tells a user to: after evaluating the
    cluster's addresses and its Airflow's environment (connections, AIRFLOW_HOME, the DAG folder)."""
    script = ('eval "$(bash scripts/cluster.sh env)" && '
              'eval "$(AIRFLOW_HOME=$TXDAG_CLUSTER_AIRFLOW_HOME bash scripts/airflow.sh env)" && ' + command)
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done.stdout


def admin() -> dict[str, str]:
    """The Redis admin's login, which the cluster's nodes share with the single-node Redis."""
    url = urlsplit(REDIS_URL)
    return {"username": unquote(url.username or ""), "password": unquote(url.password or "")}


def node_pid(pid_file: Path) -> int:
    return int(pid_file.read_text().split()[0])


def zk_mode(port: int) -> str:
    """A ZooKeeper node's role, from its four-letter word srvr: leader, follower, or "" when it serves none."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.sendall(b"srvr")
        reply = b"".join(iter(lambda: s.recv(4096), b"")).decode()
    return next((ln.split(": ", 1)[1] for ln in reply.splitlines() if ln.startswith("Mode: ")), "")

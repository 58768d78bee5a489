"""The loopback cluster of scripts/cluster.sh as the cluster tier runs it: on ports of the tests' own, started
once per session (tests/cluster/conftest.py) and wiped before and after, with a DAG folder of the tier's own: a
user's project beside the shipped dags_cluster/ (user_project)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit

from access import REDIS_URL

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "cluster.sh"
PORTS = {"TXDAG_CLUSTER_ZK_PORT": "2391", "TXDAG_CLUSTER_REDIS_PORT": "7401", "TXDAG_CLUSTER_SPARK_PORT": "7477",
         "TXDAG_CLUSTER_KAFKA_PORT": "9591", "TXDAG_CLUSTER_AIRFLOW_PORT": "8991", "TXDAG_CLUSTER_PG_PORT": "5691"}
ZK_PORTS = [2391, 2392, 2393]
REDIS_PORTS = list(range(7401, 7407))
RUN = REPO / ".run" / "cluster"
AIRFLOW_HOME = RUN / f"airflow-{PORTS['TXDAG_CLUSTER_AIRFLOW_PORT']}"
DAGS = RUN / "dags"
ENV = {**os.environ, **PORTS, "TXDAG_CLUSTER_DAGS_FOLDER": str(DAGS)}
LANDING = RUN / "landing"  # the folder the user's spout reads
TOPIC = "cluster_words"  # the topic of the user's Kafka topology, on the cluster's broker
USER_DAG = """# A user's topology on the cluster's connections (as dags_cluster/word_count.py), by the cluster tier.
import json
import os

{imports}
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State

topology = TransactionalTopology(
    {name!r},
    source={source},
    job={job!r},
    states=[State("words", kind={kind!r}, namespace={name!r})],
    max_active_transactions=2,
    redis_conn_id="redis_cluster",
    spark_conn_id="spark_cluster",
    spark_conf=json.loads(os.environ.get("TXDAG_CLUSTER_SPARK_CONF") or "{{}}"),
)
dag = render(topology, dag_file=__file__)
"""
USER_TOPOLOGIES = {  # id: (import, source, state kind)
    "landing_words": ("from landing_files import LandingFiles\n", f"LandingFiles(folder={str(LANDING)!r}, max_files=2)",
                      "transactional"),
    "kafka_words": ("from txdag.spouts.kafka import KafkaSource\n", f"KafkaSource({TOPIC!r}, max_per_partition=6)",
                    "opaque"),
}


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


def user_project() -> None:
    """The tier's DAG folder, as a user's project has it: dags_cluster/'s DAG files (links to them: each resolves to
    the repository, its project root), the guide's example spout saved as a module beside them (a copy of
    examples/landing_files.py), and two topologies of the user's: that spout and a Kafka topic. Made before the
    cluster starts: cluster.sh limits the topologies' Redis user to the keys of the DAG folder's topologies."""
    shutil.rmtree(DAGS, ignore_errors=True)
    shutil.rmtree(LANDING, ignore_errors=True)
    DAGS.mkdir(parents=True)
    LANDING.mkdir()
    for shipped in sorted((REPO / "dags_cluster").glob("*.py")):
        (DAGS / shipped.name).symlink_to(shipped)
    shutil.copyfile(REPO / "examples" / "landing_files.py", DAGS / "landing_files.py")
    job = str(REPO / "spark_jobs" / "word_count.py")
    for name, (imports, source, kind) in USER_TOPOLOGIES.items():
        (DAGS / f"{name}.py").write_text(USER_DAG.format(name=name, imports=imports, source=source, job=job, kind=kind))

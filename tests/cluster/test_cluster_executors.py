"""Spark executors whose Python has no txdag (issue 17), on the loopback standalone cluster: the zip `txdag pyfiles`
builds travels with the job through the topology's spark_conf, in both modes: the process task's spark-submit to
spark:// (the provider's SparkSubmitOperator and an Airflow connection), and a Spark Connect server whose
executors are on the cluster. The states are on the cluster's Redis Cluster, the sentences on the single Redis.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from access import REDIS_URL
from support.loopback import RUN, admin, cluster, node_pid

from txdag import TransactionAttempt
from txdag.redisio import client_from_url
from txdag.spouts import SpoutContext
from txdag.spouts.samples import sample_sentences
from txdag.spouts.streams import StreamPartition, append_entries
from txdag.staging.store import Staging
from txdag.topology.definition import JobSpec, State, StreamsSource

REPO = Path(__file__).resolve().parents[2]
EXECUTOR_VENV = RUN / "executor-python"
JOB = REPO / "spark_jobs" / "word_count.py"
CONNECT_PORT = "15477"


@pytest.fixture(scope="module")
def executor_python() -> str:
    """A venv of this Python (PySpark wants the same major.minor on both sides) with pyarrow and nothing else: a
    .pth puts a folder on its path that holds a link to this venv's pyarrow only."""
    python = EXECUTOR_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(EXECUTOR_VENV)], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    import pyarrow

    arrow_only = EXECUTOR_VENV / "arrow-only"
    arrow_only.mkdir(exist_ok=True)
    if not (arrow_only / "pyarrow").exists():
        (arrow_only / "pyarrow").symlink_to(Path(pyarrow.__file__).parent)
    (Path(site) / "arrow-only.pth").write_text(f"{arrow_only}\n")
    has = subprocess.run([str(python), "-c", "import importlib.util as u, pyarrow; "
                          "print([m for m in ('txdag', 'redis', 'pyspark') if u.find_spec(m)])"],
                         capture_output=True, text=True)
    assert has.returncode == 0 and has.stdout.strip() == "[]", has.stdout + has.stderr
    return str(python)


@pytest.fixture(scope="module")
def pyfiles(executor_python: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The topology's spark_conf that `txdag pyfiles` prints, run as a user runs it."""
    out = tmp_path_factory.mktemp("pyfiles") / "txdag-pyfiles.zip"
    done = subprocess.run([str(Path(sys.executable).parent / "txdag"), "pyfiles", str(out), "--python",
                           executor_python, "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    conf = json.loads(done.stdout)["spark_conf"]
    assert conf == {"spark.submit.pyFiles": str(out), "spark.pyspark.python": executor_python}
    return conf


@pytest.fixture
def states_url(addresses: dict[str, str]) -> str:
    first, *others = addresses["TXDAG_CLUSTER_REDIS_NODES"].split(",")
    return f"redis://{admin()['username']}:{admin()['password']}@{first}/0?cluster=true&nodes={','.join(others)}"


def batch(name: str) -> tuple[JobSpec, Counter, redis.Redis]:
    """Sentences on two streams of the single Redis; the spec of txid 1 over them, its states on "states"."""
    source_client = redis.Redis.from_url(REDIS_URL)
    sentences = {f"{name}:s{i}": sample_sentences(120, seed=i) for i in (1, 2)}
    for stream, values in sentences.items():
        append_entries(StreamPartition(stream, source_client, stream), values)
    source = StreamsSource(tuple(sentences), opaque=True)
    metadata = source.build(SpoutContext(name, {"redis_default": source_client})).initialize_transaction(1, None)
    spec = JobSpec(name, TransactionAttempt(1, 1), metadata, source, (State("words", kind="opaque"),),
                   redis_conn_id="states")
    words = Counter(w for values in sentences.values() for s in values for w in s.split(" ") if w)
    return spec, words, source_client


def close(states: redis.Redis, source: redis.Redis, topology: str) -> None:
    """Delete the topology's staging from the cluster and close both clients."""
    for key in states.scan_iter(match=f"*{{{topology}}}*"):
        states.delete(key)
    states.close()
    source.close()


def shipped() -> set[Path]:
    """Every copy of the zip in the standalone workers' executor folders."""
    return set(RUN.glob("spark-7477-worker-*/work/**/txdag-pyfiles.zip"))


def workers_that_got_it(before: set[Path]) -> int:
    """How many workers' executors fetched the zip since ``before`` was taken."""
    return len({p.relative_to(RUN).parts[0] for p in shipped() - before})


def test_spark_submit_ships_txdag_to_executors_without_it(addresses, pyfiles, states_url, airflow_home,
                                                          monkeypatch):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from airflow.sdk.exceptions import AirflowException

    from txdag import TransactionalTopology
    from txdag.airflow.operators import ProcessOperator, submit_failure

    spec, words, source = batch(f"ex{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")  # as on an Airflow worker
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({
        "conn_type": "spark", "host": "spark://127.0.0.1", "port": 7477, "extra": {"deploy-mode": "client"}}))

    def submit(spark_conf: dict[str, str]) -> None:  # what ProcessOperator.execute does once it has a txid
        topology = TransactionalTopology(spec.topology, source=spec.source, job=str(JOB), states=list(spec.states),
                                         spark_conn_id="spark_cluster", redis_conn_id="states",
                                         spark_conf={"spark.executor.memory": "512m", **spark_conf})
        task = ProcessOperator(task_id="process", topology=topology)
        task.application_args = ["--job", spec.to_json()]
        task.env_vars = {"SPARK_LOCAL_IP": "127.0.0.1", "TXDAG_REDIS_URLS": json.dumps(
            {"redis_default": REDIS_URL, "states": states_url})}
        task.conf = {**task._driver_conf(), **task.conf}
        assert task.conf["spark.pyspark.driver.python"] == sys.executable, "the driver runs on txdag's Python"
        try:
            SparkSubmitOperator.execute(task, {})
        except AirflowException as exc:
            raise submit_failure(spec.topology, spec.tx, exc) from exc

    from txdag.txid.failure import JobFailed

    with pytest.raises(JobFailed, match=r"has no 'txdag'.*txdag pyfiles ZIP --python WORKERS_PYTHON"):
        submit({"spark.pyspark.python": pyfiles["spark.pyspark.python"]})  # the executors' Python, nothing shipped

    before = shipped()
    started = time.monotonic()
    submit(pyfiles)
    clean = time.monotonic() - started
    states = client_from_url(states_url)
    try:
        assert Staging(states, spec.topology).read(spec.tx) == {"words": dict(words)}
        assert workers_that_got_it(before) == 2, "both workers ran executors, and each fetched the zip"
    finally:
        close(states, source, spec.topology)

    spec, words, source = batch(f"ek{uuid.uuid4().hex[:8]}")  # again, a worker SIGKILLed while it runs a task
    killer = threading.Thread(target=kill_worker_in_a_task, args=("worker-1",), daemon=True)
    started = time.monotonic()
    killer.start()
    submit(pyfiles)
    killed = time.monotonic() - started
    killer.join(timeout=5)
    states = client_from_url(states_url)
    try:
        assert KILLED, "worker-1 was killed while a Python task ran on it"
        assert Staging(states, spec.topology).read(spec.tx) == {"words": dict(words)}, "the retried tasks rewrote it"
        print(f"Spark worker-1 SIGKILLed {KILLED[0]:.1f} s into the job, in a task: the job took {killed:.1f} s "
              f"against {clean:.1f} s without the kill")
    finally:
        close(states, source, spec.topology)
    assert "started: worker-1" in cluster("start", "spark")


KILLED: list[float] = []


def kill_worker_in_a_task(name: str, timeout: float = 120) -> None:
    """SIGKILL the whole session of standalone ``name`` (the worker, its executor, their Python workers) once a
    Python worker runs there: a machine that dies mid-task."""
    leader = node_pid(RUN / f"spark-7477-{name}" / "spark.pid")
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        session = subprocess.run(["ps", "-o", "args=", "-s", str(leader)], capture_output=True, text=True).stdout
        if "pyspark" in session:
            os.killpg(leader, signal.SIGKILL)
            KILLED.append(time.monotonic() - started)
            return
        time.sleep(0.05)


@pytest.fixture
def connect_server(addresses, executor_python) -> Iterator[str]:
    env = {"TXDAG_SPARK_CONNECT_PORT": CONNECT_PORT, "TXDAG_SPARK_CONNECT_MASTER": addresses[
        "TXDAG_CLUSTER_SPARK_MASTER"], "TXDAG_SPARK_CONNECT_PYTHON": executor_python}
    script = ["bash", str(REPO / "scripts" / "spark-connect.sh")]
    started = subprocess.run([*script, "start"], env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield f"sc://127.0.0.1:{CONNECT_PORT}"
    finally:
        subprocess.run([*script, "stop"], env={**os.environ, **env}, capture_output=True, timeout=120)


def test_a_connect_server_on_the_cluster_gets_txdag_per_session(connect_server, pyfiles, states_url):
    from pyspark.errors import PySparkException

    from txdag.spark.connect import run_connected

    spec, words, source = batch(f"ec{uuid.uuid4().hex[:8]}")
    states = client_from_url(states_url)
    clients = {"redis_default": source, "states": states}
    before = shipped()
    try:
        with pytest.raises(PySparkException, match="No module named 'txdag'"):  # nothing shipped: another session
            run_connected(spec, str(JOB), clients, connect_server, spark_conf={})
        result = run_connected(spec, str(JOB), clients, connect_server, spark_conf=pyfiles)
        assert result.batch_size == 240 and result.partials == {"words": len(words)}
        assert Staging(states, spec.topology).read(spec.tx) == {"words": dict(words)}
        assert workers_that_got_it(before) == 2, "the session's zip reached the executors on both workers"
    finally:
        close(states, source, spec.topology)

"""Exactly-once on the whole loopback cluster with parts of it killed (issue 17, item 4): dags_cluster's
tweets_analytics and the opaque word_count, run by Airflow's CeleryExecutor (two Celery workers), spark-submit to the
standalone master (executors without txdag), txids in the ZooKeeper ensemble, states on the Redis Cluster, sources on
the single Redis. Two runs of each DAG at a time (two txids in flight each) while the test SIGKILLs, one after the
other: a Celery worker running a process task, a Spark worker running a task, a Celery worker running a commit
task, the ZooKeeper leader, a Redis Cluster master. Each killed part is started again (cluster.sh start), as an
operator or a supervisor would. Then the states equal the ground truth, every txid is committed once in txid order,
and the test prints what each kill cost: the time from the kill to the next commit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
import redis
from access import ZK_AUTH
from support.loopback import AIRFLOW_HOME, PORTS, RUN, ZK_PORTS, admin, cluster, node_pid, user_shell, zk_mode
from support.runs import check_commits, counts

from txdag.airflow.api import AirflowAPI, unique_run_id
from txdag.analytics.tweets import MARKER_KEY, tweet_partials
from txdag.spouts.samples import sample_sentences, sample_tweets
from txdag.state.keys import JoinedKeyCodec
from txdag.zk.client import close_zk, connect_zk
from txdag.zk.store import TransactionStore

CELERY = AIRFLOW_HOME / "celery"
DAGS = ("tweets_analytics", "word_count")
STREAMS = ("sentences:0", "sentences:1")
KILL_TIMEOUT = 600  # seconds a kill waits for its moment (a process or a commit task running)
DRAIN_TIMEOUT = 1500


@dataclass
class Kill:
    what: str
    at: float  # time.monotonic() of the SIGKILL
    committed: int  # txids committed (both topologies) just before it
    cost: float | None = None  # seconds from the SIGKILL to the next commit


@pytest.fixture(scope="module")
def api(cluster_api: AirflowAPI) -> AirflowAPI:
    for dag in DAGS:
        cluster_api.wait_dag_parsed(dag, timeout=180)
    return cluster_api


@pytest.fixture(scope="module")
def single(addresses: dict[str, str]) -> Iterator[redis.Redis]:
    host, port = addresses["TXDAG_CLUSTER_SINGLE_REDIS"].split(":")
    client = redis.Redis(host=host, port=int(port), **admin())  # bytes: the spouts decode each value themselves
    yield client
    client.close()


def session_args(leader: int) -> list[str]:
    """The command lines of every process in session ``leader`` (a Celery worker or a Spark node, each its own)."""
    out = subprocess.run(["ps", "-o", "args=", "-s", str(leader)], capture_output=True, text=True).stdout
    return out.splitlines()


def celery_worker(n: int) -> int:
    return node_pid(CELERY / f"worker{n}.pid")


def kill_when(what: str, find: Callable[[], int | None], committed: Callable[[], int], *, session: bool = True,
              timeout: float = KILL_TIMEOUT) -> Kill:
    """SIGKILL the process (``session``: the whole session) ``find()`` returns once it returns one (polled every
    50 ms): a machine that dies."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        pid = find()
        if pid is not None:
            before = committed()
            (os.killpg if session else os.kill)(pid, signal.SIGKILL)
            return Kill(what, time.monotonic(), before)
        time.sleep(0.05)
    raise AssertionError(f"no moment to kill {what} came within {timeout:.0f} s")


def recovered(kill: Kill, committed: Callable[[], int], timeout: float = 300) -> None:
    """Wait for the next commit after ``kill`` (of either topology): what the kill cost."""
    while committed() <= kill.committed:
        assert time.monotonic() - kill.at < timeout, f"no commit within {timeout:.0f} s after the kill of {kill.what}"
        time.sleep(0.2)
    kill.cost = time.monotonic() - kill.at


def celery_worker_running(marker: Callable[[list[str]], bool]) -> Callable[[], int | None]:
    def find() -> int | None:
        for n in (1, 2):
            leader = celery_worker(n)
            if marker(session_args(leader)):
                return leader
        return None
    return find


def running_ti_ids(api: AirflowAPI, task_id: str) -> set[str]:
    ids: set[str] = set()
    for dag in DAGS:
        for run in api.runs(dag):
            if run["state"] in ("queued", "running"):
                ids |= {ti["id"] for ti in api.task_instances(dag, run["dag_run_id"]) if ti["task_id"] == task_id}
    return ids


class Driver(threading.Thread):
    """Keeps two runs of each DAG in flight (the scheduled and manual runs count too) until a run's coordinate is
    skipped (its source is drained), then waits for every run still in flight: the last txid may still be retrying
    its commit when a later run has found nothing to emit."""

    def __init__(self, api: AirflowAPI) -> None:
        super().__init__(daemon=True)
        self.api, self.runs = api, {dag: [] for dag in DAGS}  # type: ignore[var-annotated]
        self.error: Exception | None = None
        self.exhausted: set[str] = set()  # a run of the DAG found its source drained: no new runs
        self.drained: set[str] = set()  # and none of its runs is queued or running any more
        self.waited: dict[str, float] = {}  # seconds from a DAG's exhaustion to its drain
        self.checked: set[str] = set()  # successful runs whose coordinate was looked at
        self.since = datetime.now(UTC)  # made once the sources are seeded: a run started before found them empty

    def run(self) -> None:
        try:
            base = datetime.now(UTC) - timedelta(hours=1)
            triggered = 0
            while len(self.drained) < len(DAGS):
                for dag in set(DAGS) - self.drained:
                    runs = self.api.runs(dag)  # every run, whoever made it
                    self.runs[dag] = [r["dag_run_id"] for r in runs]
                    in_flight = sum(r["state"] in ("queued", "running") for r in runs)
                    done = [r["dag_run_id"] for r in runs if r["state"] == "success" and r["dag_run_id"] not in
                            self.checked and datetime.fromisoformat(r["start_date"]) > self.since]
                    self.checked.update(done)
                    if dag not in self.exhausted and any(
                            self.api.task_instance(dag, r, "coordinate")["state"] == "skipped" for r in done):
                        self.exhausted.add(dag)
                        self.waited[dag] = time.monotonic()
                    if dag in self.exhausted:
                        if in_flight == 0:
                            self.drained.add(dag)
                            self.waited[dag] = time.monotonic() - self.waited[dag]
                    elif in_flight < 2:
                        triggered += 1
                        self.api.trigger(dag, logical_date=base + timedelta(seconds=triggered),
                                         run_id=unique_run_id(dag))
                time.sleep(1)
        except Exception as exc:  # surfaced by the test
            self.error = exc


@pytest.fixture(scope="module")
def committed(addresses: dict[str, str]) -> Iterator[Callable[[], int]]:
    """How many txids the two topologies have committed (ZooKeeper), with a client that outlives the leader's kill."""
    client = connect_zk(addresses["TXDAG_CLUSTER_ZK_HOSTS"], auth=ZK_AUTH)
    stores = [TransactionStore(client, dag) for dag in DAGS]

    def count() -> int:
        return sum(s.read_topology()[0].committed_txid for s in stores if client.exists(s.path))
    yield count
    close_zk(client)


def test_exactly_once_on_the_cluster_while_parts_of_it_are_killed(addresses, api, single, states, committed) -> None:
    # The sources, seeded as docs/operations.md says (txdag seed, with the cluster's Airflow connections), and
    # their ground truth: the same samples.
    tweets = sample_tweets(1000, seed=17)  # 10 txids of <= 100: still running when the last kill comes
    sentences = {s: sample_sentences(200, seed=50 + i) for i, s in enumerate(STREAMS)}  # 5 txids of <= 40 each
    user_shell("txdag seed tweets --count 1000 --seed 17 && txdag seed words --count 400 --seed 50")
    assert single.mget([str(i) for i in range(1, 1002)]) == [t.encode() for t in tweets] + [None]
    assert [single.xlen(s) for s in STREAMS] == [200, 200]

    driver = Driver(api)
    for dag in DAGS:  # a run of each as docs/operations.md triggers it; the driver keeps two in flight
        user_shell(f"airflow dags trigger {dag}")
        manual = [r["dag_run_id"] for r in api.runs(dag) if r["run_type"] == "manual"]
        assert len(manual) == 1, f"{dag}: `airflow dags trigger` made the manual runs {manual}"
    driver.start()
    kills = []
    # A Celery worker running a process task: its Spark driver (the job's Python) is in the worker's session.
    kills.append(kill_when("Celery worker under process", celery_worker_running(
        lambda args: any("spark_jobs/" in a for a in args)), committed))
    cluster("start", "airflow")  # the worker back (the other one takes the retry meanwhile)
    recovered(kills[-1], committed)
    # A Spark worker while one of its executors runs a Python task.
    spark_worker = node_pid(RUN / f"spark-{PORTS['TXDAG_CLUSTER_SPARK_PORT']}-worker-1" / "spark.pid")
    kills.append(kill_when("Spark worker in a task", lambda: spark_worker if any(
        "pyspark" in a for a in session_args(spark_worker)) else None, committed))
    cluster("start", "spark")
    recovered(kills[-1], committed)
    # A Celery worker running a commit task (the task's process names its task instance id).
    commits: set[str] = set()
    listed = [0.0]

    def commit_running() -> int | None:
        if time.monotonic() - listed[0] > 1:  # the REST API once a second, the processes every 50 ms
            commits.update(running_ti_ids(api, "commit"))
            listed[0] = time.monotonic()
        return celery_worker_running(lambda args: any(a.startswith("airflow worker -- ") and a.split()[-1] in commits
                                                      for a in args))()
    kills.append(kill_when("Celery worker under commit", commit_running, committed))
    cluster("start", "airflow")
    recovered(kills[-1], committed)
    # The ZooKeeper leader, then a Redis Cluster master; each comes back (the master as a replica).
    leader = next(p for p in ZK_PORTS if zk_mode(p) == "leader")
    kills.append(kill_when(f"ZooKeeper leader ({leader})", lambda: node_pid(RUN / f"zk-{leader}" / "zookeeper.pid"),
                           committed, session=False))
    cluster("start", "zk")
    recovered(kills[-1], committed)
    master = states.get_node_from_key("users")  # the master of the users state's slot, and its replica
    replica = states.get_node_from_key("users", replica=True)
    assert replica is not None, f"the users slot's master {master.name} has no replica to take over"
    kills.append(kill_when(f"Redis Cluster master {master.port}", lambda: redis_pid(master.port), committed,
                           session=False))
    took_over(replica.name)  # the replica takes over, then the old master comes back as its replica
    cluster("start", "redis")
    recovered(kills[-1], committed)

    driver.join(timeout=DRAIN_TIMEOUT)
    assert not driver.is_alive(), f"not drained after {DRAIN_TIMEOUT} s: runs {driver.runs}"
    assert driver.error is None, driver.error

    client = connect_zk(addresses["TXDAG_CLUSTER_ZK_HOSTS"], auth=ZK_AUTH)
    try:  # first: a txid still in flight would show below as counts short by its batch
        done = {dag: check_commits(TransactionStore(client, dag)) for dag in DAGS}
    finally:
        close_zk(client)
    truth = tweet_partials(tweets)
    pair = JoinedKeyCodec(":", 2)  # compared as key tuples; a pair the codec refuses is a rejection, never stored
    pairs = {key: n for key, n in truth["users_hashtags"].items() if pair.clash(key) is None}
    assert counts(states, "users") == {k[0]: n for k, n in truth["users"].items()}
    assert counts(states, "hashtags") == {k[0]: n for k, n in truth["hashtags"].items()}
    assert {pair.decode(f): n for f, n in counts(states, "users_hashtags").items()} == pairs
    words = Counter(w for lines in sentences.values() for line in lines for w in line.split(" ") if w)
    assert counts(states, "word_count") == dict(words)

    assert states.get(MARKER_KEY) == str(len(done["tweets_analytics"]))
    for dag in DAGS:  # what the user reads with the CLI (docs/operations.md)
        txid = len(done[dag])
        assert f"committed up to txid {txid}, last txid {txid}, 0 in flight" in user_shell(f"txdag status {dag}")
    assert len(done["tweets_analytics"]) >= 10 and len(done["word_count"]) >= 5
    failed = {dag: [r for r in api.runs(dag) if r["state"] == "failed"] for dag in DAGS}
    assert failed == {dag: [] for dag in DAGS}, "a run failed for good: its retries did not recover it"
    retried = {dag: sum(ti["try_number"] > 1 for r in driver.runs[dag] for ti in api.task_instances(dag, r))
               for dag in DAGS}
    assert sum(retried.values()) >= 2, f"the Celery kills cost tries that were retried: {retried}"
    for kill in kills:
        print(f"{kill.what}: the next commit {kill.cost:.1f} s after the SIGKILL")
    for dag in DAGS:  # each retried task's tries: how long the scheduler took to declare a killed one dead
        for run in driver.runs[dag]:
            for ti in api.task_instances(dag, run):
                if ti["try_number"] > 1:
                    tries = [(t["try_number"], t["state"], t["start_date"], t["end_date"])
                             for t in api.task_tries(dag, run, ti["task_id"])]
                    print(f"{dag} {run} {ti['task_id']}: {tries}")
    print(f"txids committed: {({dag: len(t) for dag, t in done.items()})}; tasks retried: {retried}; runs still "
          f"in flight after a run found the source drained, for (s): {driver.waited}")


def redis_pid(port: int) -> int:
    return node_pid(RUN / f"redis-{port}" / "redis.pid")


def took_over(replica: str, timeout: float = 60) -> None:
    """Wait until ``replica`` (host:port) has become a master: the failover of its killed master is done."""
    host, port = replica.split(":")
    node = redis.Redis(host=host, port=int(port), decode_responses=True, **admin())
    try:
        started = time.monotonic()
        while node.execute_command("ROLE")[0] != "master":
            assert time.monotonic() - started < timeout, f"replica {replica} did not take over within {timeout:.0f} s"
            time.sleep(0.2)
    finally:
        node.close()

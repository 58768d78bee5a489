"""The loopback cluster of scripts/cluster.sh (issue 17): each part serves, and keeps serving when one node dies.

The script is run as a user runs it, on ports of the tests' own (clear of a development cluster). Each kill is a
SIGKILL of the node's process; the test then waits for the part to recover, checks that nothing acknowledged was
lost, starts the node again with the script, and checks that it rejoins.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from access import REDIS_URL, kazoo_auth
from kazoo.client import KazooClient
from redis.cluster import ClusterNode, RedisCluster
from support.loopback import ENV, REDIS_PORTS, RUN, ZK_PORTS, admin, cluster, node_pid, run, zk_mode


def wait_until(check: Callable[[], bool], seconds: float, what: str) -> float:
    """Seconds until ``check()`` holds; fails naming ``what`` after ``seconds``."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            if check():
                return time.monotonic() - started
        except Exception:  # a node still recovering refuses: try again
            pass
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {seconds:.0f} s")


def test_the_script_says_what_it_runs_and_the_env_names_every_node(addresses):
    assert addresses["TXDAG_CLUSTER_ZK_HOSTS"] == ",".join(f"127.0.0.1:{p}" for p in ZK_PORTS)
    assert addresses["TXDAG_CLUSTER_REDIS_NODES"] == ",".join(f"127.0.0.1:{p}" for p in REDIS_PORTS)
    assert addresses["TXDAG_CLUSTER_SPARK_MASTER"] == "spark://127.0.0.1:7477"
    assert addresses["TXDAG_CLUSTER_KAFKA_BOOTSTRAP"] == "127.0.0.1:9591"
    status = cluster("status")
    assert sorted(zk_mode(p) for p in ZK_PORTS) == ["follower", "follower", "leader"], status
    assert status.count("master, cluster ok") == 3 and status.count("slave, cluster ok") == 3, status
    assert "counts 2 live worker(s)" in status, status
    assert "Kafka     127.0.0.1:9591 up (started here" in status, status
    assert "Celery worker 1  pid" in status and "Celery worker 2  pid" in status, status
    assert "scheduler healthy triggerer healthy dag_processor healthy" in status, status
    again = cluster("start")  # everything answers: nothing is started twice
    assert "started nodes: none" in again and "started: none" in again, again
    refused = run("wipe")  # a running cluster's data is never deleted
    assert refused.returncode == 1 and "stop the cluster first" in refused.stderr, refused
    typo = run("start", "zookeeper")
    assert typo.returncode == 1, typo
    assert "unknown component 'zookeeper' (zk, redis, spark, kafka or airflow)" in typo.stderr, typo


def test_the_zookeeper_ensemble_keeps_every_write_when_its_leader_is_killed(addresses):
    zk = KazooClient(hosts=addresses["TXDAG_CLUSTER_ZK_HOSTS"], timeout=10, **kazoo_auth())
    zk.start(timeout=30)
    try:
        path = f"/txdag-cluster-test/{uuid.uuid4().hex}"
        zk.create(path, b"before", makepath=True)
        leader = next(p for p in ZK_PORTS if zk_mode(p) == "leader")
        os.kill(node_pid(RUN / f"zk-{leader}" / "zookeeper.pid"), signal.SIGKILL)
        elected = wait_until(lambda: any(zk_mode(p) == "leader" for p in ZK_PORTS if p != leader), 60,
                             "a new ZooKeeper leader")
        wait_until(lambda: zk.set(path, b"after") is not None, 60, "a write through the client after the kill")
        assert zk.get(path)[0] == b"after"
        print(f"ZooKeeper leader {leader} killed: new leader elected in {elected:.1f} s")
    finally:
        zk.stop()
        zk.close()
    assert f"started nodes: {ZK_PORTS.index(leader) + 1}" in cluster("start", "zk")
    assert zk_mode(leader) == "follower"
    alone = KazooClient(hosts=f"127.0.0.1:{leader}", timeout=10, **kazoo_auth())  # the restarted node has it all
    alone.start(timeout=30)
    try:
        assert alone.get(path)[0] == b"after"
    finally:
        alone.stop()
        alone.close()


def test_the_redis_cluster_fails_over_to_a_replica_and_keeps_the_replicated_writes(addresses):
    rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in REDIS_PORTS], **admin(),
                      socket_timeout=5)
    try:
        values = {f"txdag-cluster-test:{i}": str(i) for i in range(300)}  # keys in every master's slots
        for key, value in values.items():
            rc.set(key, value)
        primaries = rc.get_primaries()
        assert len(primaries) == 3
        for node in primaries:  # each master has its replica's acknowledgement of every write before the kill
            assert rc.execute_command("WAIT", 1, 2000, target_nodes=node) == 1, node
        victim = rc.get_node_from_key("txdag-cluster-test:0")
        assert victim.server_type == "primary"
        os.kill(node_pid(RUN / f"redis-{victim.port}" / "redis.pid"), signal.SIGKILL)
        took = wait_until(lambda: rc.get("txdag-cluster-test:0") == b"0" and rc.set("txdag-cluster-test:w", "1"),
                          60, f"a replica serving master {victim.port}'s slots")
        assert {k: rc.get(k).decode() for k in values} == values  # every acknowledged, replicated write survived
        print(f"Redis master {victim.port} killed: its replica served its slots after {took:.1f} s")
    finally:
        rc.close()
    assert f"started nodes: {victim.port}" in cluster("start", "redis")
    role = subprocess.run(["redis-cli", "--user", admin()["username"], "-p", str(victim.port), "role"],
                          env={**ENV, "REDISCLI_AUTH": admin()["password"]}, capture_output=True, text=True)
    assert role.stdout.splitlines()[0] == "slave", role  # the old master came back as its successor's replica


def test_a_topology_on_the_cluster_commits_exactly_once_through_a_state_master_kill(addresses, monkeypatch):
    """Seed 000's three states on the Redis Cluster (the tweets on the single-node Redis), ZooKeeper the ensemble:
    right after txid 2's commit is recorded, the master of the opaque state's slot is SIGKILLed. Every commit waited
    for a replica (WAIT), so its replica takes over with txid 2 in; the txids that meet the failover fail and are
    replayed, and the counts equal the ground truth."""
    import redis
    from access import ZK_AUTH

    from txdag.analytics.tweets import STATES, tweet_partials
    from txdag.errors import TxdagError
    from txdag.local import LocalTopology
    from txdag.protocol import Committed
    from txdag.redisio import client_from_url
    from txdag.spouts.samples import sample_tweets
    from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
    from txdag.state import JoinedKeyCodec, OpaqueMap, RedisBackingMap, TransactionalMap
    from txdag.state.keys import DEFAULT_KEY_CODEC
    from txdag.txid.coordinator import Coordinator, Emission
    from txdag.zk.client import connect_zk
    from txdag.zk.store import TransactionStore

    name = f"cl{uuid.uuid4().hex[:8]}"
    source = redis.Redis.from_url(REDIS_URL)
    tweets = sample_tweets(300, seed=17)
    append_tweets(source, tweets, prefix=f"{name}:")
    first, *others = addresses["TXDAG_CLUSTER_REDIS_NODES"].split(",")
    url = f"redis://{admin()['username']}:{admin()['password']}@{first}/0?cluster=true&nodes={','.join(others)}"
    rc = client_from_url(url, socket_timeout=5, socket_connect_timeout=2)
    topology_master = rc.get_node_from_key(f"{{{name}}}").name
    suffix = next(i for i in range(1000) if rc.get_node_from_key(f"{name}:hashtags{i}").name != topology_master)
    spaces = {s: f"{name}:{s}{suffix}" for s in STATES}  # the victim's slot holds no staging and no marker
    kinds = {"users": TransactionalMap, "hashtags": OpaqueMap, "users_hashtags": TransactionalMap}
    codecs = {"users_hashtags": JoinedKeyCodec(":", 2)}
    states = {s: kinds[s](RedisBackingMap(rc, spaces[s], key_codec=codecs.get(s, DEFAULT_KEY_CODEC))) for s in STATES}
    store = TransactionStore(connect_zk(addresses["TXDAG_CLUSTER_ZK_HOSTS"], auth=ZK_AUTH), name,
                             root=f"/txdag-cluster-test-{name}")
    spout = TweetsTransactionalSpout(source, prefix=f"{name}:", max_transaction_size=50, topology=name)
    topology = LocalTopology(Coordinator(store, spout, max_active_transactions=1), rc, states,
                             lambda records: tweet_partials(r.value for r in records))
    victim = rc.get_node_from_key(spaces["hashtags"])
    killed: list[float] = []

    leaders: list[int] = []

    def kill_after_txid_2(point, topology_id, tx):
        if point == "committed" and tx.txid == 2 and not killed:
            os.kill(node_pid(RUN / f"redis-{victim.port}" / "redis.pid"), signal.SIGKILL)
            killed.append(time.monotonic())
        if point == "committed" and tx.txid == 4 and not leaders:  # and the ZooKeeper leader, mid-run
            leaders.append(next(p for p in ZK_PORTS if zk_mode(p) == "leader"))
            os.kill(node_pid(RUN / f"zk-{leaders[0]}" / "zookeeper.pid"), signal.SIGKILL)
            killed.append(time.monotonic())

    def waits() -> dict[str, int]:  # WAIT commands each master served so far (a replica serves none)
        stats = rc.info("commandstats", target_nodes=rc.PRIMARIES)
        return {name: int((node.get("cmdstat_wait") or {}).get("calls", 0)) for name, node in stats.items()}

    monkeypatch.setattr("txdag.commit.phase.crash_if_requested", kill_after_txid_2)
    failures: list[str] = []
    waited = waits()
    try:
        for txid in range(1, 7):
            deadline = time.monotonic() + 90
            while True:
                try:
                    emission = topology.coordinate(f"run{txid}")
                    assert isinstance(emission, Emission), emission
                    topology.process(emission)
                    if isinstance(topology.commit(emission.tx), Committed):
                        break
                except TxdagError as exc:  # the failover: the txid failed and is replayed by its run
                    failures.append(f"txid {txid}: {type(exc).__name__}")
                    assert time.monotonic() < deadline, f"txid {txid} did not commit: {exc}"
                    time.sleep(0.3)
            if txid == 3:
                recovered = time.monotonic() - killed[0]
            if txid == 5:
                elected = time.monotonic() - killed[1]
        stored = {s: {codecs.get(s, DEFAULT_KEY_CODEC).decode(k.decode()): int(v)
                      for k, v in rc.hgetall(spaces[s]).items()} for s in STATES}
        assert stored == {s: dict(c) for s, c in tweet_partials(tweets).items()}
        assert topology.coordinator.status().topology.committed_txid == 6
        assert killed, "the master was killed (else the test tested nothing)"
        # per node: the killed master's count (earlier tests' WAITs too) drops out instead of being subtracted
        new_waits = sum(n - waited.get(name, 0) for name, n in waits().items())
        assert new_waits >= 4, f"the commits after the failover waited for the replicas (WAIT): {new_waits}"
        print(f"Redis master {victim.port} (opaque state's slot) killed after txid 2's commit: txid 3 committed "
              f"{recovered:.1f} s later; ZooKeeper leader {leaders[0]} killed after txid 4's: txid 5 committed "
              f"{elected:.1f} s later; {len(failures)} failed tries ({sorted(set(failures))})")
    finally:
        rc.close()
        source.close()
    assert f"started nodes: {victim.port}" in cluster("start", "redis")
    assert f"started nodes: {ZK_PORTS.index(leaders[0]) + 1}" in cluster("start", "zk")


JOB = textwrap.dedent("""
    import os, sys
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.appName("txdag-cluster-test").getOrCreate()
    rows = spark.sparkContext.parallelize(range(1000), 8).map(lambda x: (os.path.dirname(os.getcwd()), x)).collect()
    print("total", sum(x for _, x in rows))
    print("workers", len({d for d, _ in rows}))
""")


def test_a_spark_job_runs_on_both_standalone_workers(addresses, tmp_path):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    submit = Path(sys.executable).parent / "spark-submit"
    done = subprocess.run(
        [str(submit), "--master", addresses["TXDAG_CLUSTER_SPARK_MASTER"], "--executor-memory", "512m",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
         "--conf", "spark.driver.bindAddress=127.0.0.1", str(job)],
        env={**ENV, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}, capture_output=True,
        text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "total 499500" in done.stdout
    assert "workers 2" in done.stdout, done.stdout  # each worker's executor ran a share: two work folders


def test_a_key_value_state_commit_returns_once_a_replica_has_it(addresses, monkeypatch):
    """Seed 002's KeyValueState on the replicated cluster: each commit WAITs on its namespace's master, and a master
    SIGKILLed right after a commit leaves its replica with the committed values."""
    from txdag.state.kv import load_state

    config = {"nodes": addresses["TXDAG_CLUSTER_REDIS_NODES"].split(","), **admin()}
    state = load_state("redis_cluster", config, f"kv{uuid.uuid4().hex[:8]}")
    master = state.client.nodes_manager.get_node_from_slot(state.client.keyslot(state.spec.committed))

    def waits() -> int:
        stats = state.client.info("commandstats", target_nodes=master)
        return int((stats.get("cmdstat_wait") or {}).get("calls", 0))

    before = waits()
    for txid in (1, 2, 3):
        state.put(f"k{txid}", txid)
        state.prepare_commit(txid)
        assert state.commit(txid).outcome == "committed"
    assert waits() - before == 3, "one WAIT per commit, on the namespace's master"
    os.kill(node_pid(RUN / f"redis-{master.port}" / "redis.pid"), signal.SIGKILL)
    state.client.close()

    def committed() -> list[object]:  # a new client: the cluster may be down while the replica takes over
        again = load_state("redis_cluster", config, state.namespace)
        try:
            return [again.get(f"k{t}") for t in (1, 2, 3)]
        finally:
            again.client.close()

    took = wait_until(lambda: committed() == [1, 2, 3], 60, "the replica serving every committed value")
    print(f"KeyValueState master {master.port} killed after 3 commits: its replica served them {took:.1f} s later")
    assert f"started nodes: {master.port}" in cluster("start", "redis")


def test_the_marker_is_written_once_a_replica_has_every_state_of_the_commit(addresses):
    """A failover may take back a master's writes that no replica had. The marker says "this txid is in" for all
    the states, so it is written only once a replica of each state's master has them: else a replay trusting it
    would skip a state whose master lost the txid's writes (counts lost; the cluster e2e met it)."""
    from redis.crc import key_slot

    from txdag.redisio import client_from_url
    from txdag.state.base import StateKind
    from txdag.state.redis_backing import state_keys
    from txdag.state.redis_commit import EncodedPartials, apply_encoded

    first, *others = addresses["TXDAG_CLUSTER_REDIS_NODES"].split(",")
    login = admin()
    client = client_from_url(f"redis://{login['username']}:{login['password']}@{first}/0?cluster=true&nodes="
                             f"{','.join(others)}")
    name = uuid.uuid4().hex[:8]
    namespaces = [f"{name}:{i}" for i in range(12)]  # several slots, on more than one master

    def replicated() -> bool:  # a master killed by an earlier test is back as a replica, and the client knows it
        client.nodes_manager.initialize()
        return all(len(client.nodes_manager.slots_cache[key_slot(ns.encode())]) > 1 for ns in namespaces)
    wait_until(replicated, 60, "a replica for each master of the states' slots")  # else it is rightly not WAITed on
    masters = {client.get_node_from_key(ns).name for ns in namespaces}
    marker = f"{name}:marker"
    sent: list[tuple[str, str]] = []
    execute = client.execute_command

    def recording(*args, **kwargs):
        target = kwargs.get("target_nodes")
        node = target.name if target is not None and not isinstance(target, str) else client.get_node_from_key(
            str(args[1]) if len(args) > 1 else "").name
        sent.append((str(args[0]).upper(), node))
        return execute(*args, **kwargs)

    client.execute_command = recording  # type: ignore[method-assign]
    try:
        result = apply_encoded(client, 1, [EncodedPartials(ns, StateKind.TRANSACTIONAL, {"a": 1}) for ns in namespaces],
                               marker_key=marker)
        assert not result.already_committed and client.get(marker) == b"1"
    finally:
        client.execute_command = execute  # type: ignore[method-assign]
        for key in [marker, *(k for ns in namespaces for k in state_keys(ns))]:
            client.delete(key)
        client.close()
    assert len(masters) > 1, "the states' slots are on one master: not a test of several"
    marker_set = next(i for i, (command, _) in enumerate(sent) if command == "SET")
    waited = {node for command, node in sent[:marker_set] if command == "WAIT"}
    assert waited == masters, f"WAITed on {sorted(waited)} before the marker; the states are on {sorted(masters)}"

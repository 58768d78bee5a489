"""Exactly-once through infrastructure faults: Redis and ZooKeeper restarted, unreachable, or gone past the
ZooKeeper session timeout, at the worst moments of a txid; and a transactional stream partition down on replay.

Each test runs a topology over several txids against servers of its own (so a restart disturbs no other test),
injects the fault by wrapping the real call at that moment, lets the step fail or retry as it would, re-runs it the
way Airflow's retry would (coordinate the same run again, commit again), and checks the committed state against the
ground truth computed from the source, the order of the commits recorded in ZooKeeper, and that the error raised
during the outage names the service, its address and how to start it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest
import redis
from access import ZK_AUTH
from redis.backoff import ExponentialBackoff
from redis.retry import Retry
from support.servers import Proxy, ZooKeeperServer

from txdag.analytics.tweets import STATES, tweet_partials
from txdag.errors import CascadeError, ServiceUnavailable, SourceUnavailable
from txdag.local import LocalTopology
from txdag.protocol import AlreadyCommitted, Committed
from txdag.spouts import PartitionedTransactionalStreamSpout, StreamPartition, append_entries
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.state import JoinedKeyCodec, OpaqueMap, RedisBackingMap, TransactionalMap
from txdag.state.keys import DEFAULT_KEY_CODEC
from txdag.state.redis_commit import DEFAULT_CHUNK
from txdag.txid.coordinator import Coordinator, Emission, Wait
from txdag.zk.client import close_zk, connect_zk
from txdag.zk.records import TxStatus
from txdag.zk.store import TransactionStore

CODECS = {"users_hashtags": JoinedKeyCodec(":", 2)}


# -- servers and clients --------------------------------------------------------------------------------------


@pytest.fixture
def zk_server(tmp_path):
    server = ZooKeeperServer(tmp_path / "zk")
    server.start()
    yield server
    server.kill()


@pytest.fixture
def shared_zk(zk_hosts):
    """A client of the shared test ZooKeeper, for the tests that restart only Redis."""
    client = connect_zk(zk_hosts, auth=ZK_AUTH)
    yield client
    close_zk(client)


def connect(hosts: str, timeout: float):
    """connect_zk with a ``timeout``-second session, tried three times: on a loaded 2-core machine a freshly
    started JVM can be slow to hand out its first session, which is not what these tests are about."""
    for n in range(3):
        try:
            return connect_zk(hosts, auth=ZK_AUTH, timeout=timeout)
        except ServiceUnavailable:
            if n == 2:
                raise


def fast_redis(url: str) -> redis.Redis:
    """A client that gives up on a dead server within a second (redis-py's default retries for ~5 s)."""
    return redis.Redis.from_url(
        url, socket_timeout=2, socket_connect_timeout=1, retry=Retry(ExponentialBackoff(cap=0.2), 2)
    )


def wait_until(condition: Callable[[], bool], what: str, limit: float = 30.0) -> None:
    """Poll ``condition``; the limit only turns a hang into a failure, it asserts nothing about speed."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def bounded(step, limit: float = 60.0):
    """Run ``step`` in a thread: a call that hangs during an outage, instead of failing, fails the test."""
    result = {}

    def run():
        try:
            result["value"] = step()
        except BaseException as exc:  # handed to the test's thread
            result["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        raise AssertionError(f"the step hung for {limit:g}s during the outage instead of failing or carrying on")
    if "error" in result:
        raise result["error"]
    return result["value"]


def assert_names(error: BaseException, service: str, address: str) -> None:
    """The outage's message names the service, its address and how to start it; no raw client internals."""
    message = str(error)
    assert isinstance(error, ServiceUnavailable), f"{type(error).__name__}: {message}"
    assert service in message and address in message and "services.sh start" in message, message


# -- a tweets topology (seed 000) over LocalTopology ----------------------------------------------------------


def count_tweets(records):
    return tweet_partials(r.value for r in records)


def watch_commits(coordinator: Coordinator, commits: list[int]) -> None:
    """Append each txid to ``commits`` as its commit is recorded in ZooKeeper (the order the audit checks)."""
    record = coordinator.record_commit

    def recorded(tx):
        done = record(tx)
        if done:
            commits.append(tx.txid)
        return done

    coordinator.record_commit = recorded


def build(client, zk, root, name, *, max_size, commits, max_active=3, state=TransactionalMap):
    """The tweets topology; ``commits`` receives each txid whose commit was recorded in ZooKeeper just now."""
    spout = TweetsTransactionalSpout(client, prefix=f"{name}:", max_transaction_size=max_size, topology=name)
    coordinator = Coordinator(
        TransactionStore(zk, name, root=root), spout, max_active_transactions=max_active, lock_timeout=5
    )
    watch_commits(coordinator, commits)
    states = {
        s: state(RedisBackingMap(client, f"{name}:{s}", key_codec=CODECS.get(s, DEFAULT_KEY_CODEC))) for s in STATES
    }
    return LocalTopology(coordinator, client, states, count_tweets, marker_key=f"{name}:LAST_COMMITTED")


def committed_state(client, name):
    out = {}
    for s in STATES:
        codec = CODECS.get(s, DEFAULT_KEY_CODEC)
        out[s] = {codec.decode(k.decode()): int(v) for k, v in client.hgetall(f"{name}:{s}").items()}
    return out


def truth(tweets):
    return {s: dict(counter) for s, counter in tweet_partials(tweets).items()}


def drain(topology, prefix="rest"):
    """Coordinate, process and commit new runs until the spout has nothing left."""
    n = 0
    while isinstance(emission := topology.coordinate(f"{prefix}{n}"), Emission):
        topology.process(emission)
        assert isinstance(topology.commit(emission.tx), Committed)
        n += 1


def assert_exactly_once(topology, client, name, tweets, commits):
    """State == ground truth; every txid committed once, in order, no gap (the ZooKeeper records agree)."""
    assert committed_state(client, name) == truth(tweets)
    status = topology.coordinator.status()
    last = status.topology.last_txid
    assert status.topology.committed_txid == last and commits == list(range(1, last + 1))
    assert [r.txid for r in status.txids] == list(range(1, last + 1))
    assert all(r.status is TxStatus.COMMITTED for r in status.txids)
    committed_at = [max(h.at for h in r.history if h.status is TxStatus.COMMITTED) for r in status.txids]
    assert committed_at == sorted(committed_at), "ZooKeeper recorded the commits out of txid order"
    assert client.get(f"{name}:LAST_COMMITTED") == str(last).encode()
    assert client.keys(f"txdag:stage:{{{name}}}:*") == [], "staging of every attempt cleaned up"


def retry(step, tries: int = 5):
    """Airflow's task retry: run ``step`` again while it raises ServiceUnavailable (the outage is over, but a
    client may still be reconnecting)."""
    for n in range(tries):
        try:
            return step()
        except ServiceUnavailable:
            if n == tries - 1:
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


def commit_in_order(topology, runs):
    """Commit ``runs`` (run_id -> processed Emission, in txid order) the way Airflow's retries would: a commit that
    fails on an outage is retried; when the failure got recorded (txid FAILED, later ones with it), the runs from
    the failed one on are cleared with their future: re-emitted, processed, committed. Returns txid -> outcome."""
    runs, outcomes = dict(runs), {}
    for _ in range(5):
        try:
            status = {r.txid: r.status for r in topology.coordinator.status().txids}
            failed = [run for run, e in runs.items() if status[e.tx.txid] is TxStatus.FAILED]
            for run in list(runs)[list(runs).index(failed[0]) :] if failed else []:
                runs[run] = topology.coordinate(run)
                topology.process(runs[run])
            for e in runs.values():
                outcomes[e.tx.txid] = topology.commit(e.tx)
                assert isinstance(outcomes[e.tx.txid], Committed | AlreadyCommitted), outcomes[e.tx.txid]
            return outcomes
        except ServiceUnavailable:
            time.sleep(0.5)
    raise AssertionError(f"runs {list(runs)} did not commit after 5 retries")


# -- (a) Redis restarted ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["down", "bounce"])
def test_redis_restarted_between_emit_and_seal(second_redis, shared_zk, zk_root, prefix, mode):
    """Redis is SIGKILLed after txid 2's partials are staged and before its seal. ``down``: the seal fails, txid 2
    and the in-flight txid 3 fail, Redis comes back with its append-only data, both runs are re-emitted and
    commit. ``bounce``: Redis is back at once; the seal reconnects and nothing fails."""
    client = fast_redis(second_redis.url)
    tweets = [f"@u{i % 41} #h{i % 13} #t{i % 7} word" for i in range(300)]
    append_tweets(client, tweets, prefix=f"{prefix}:")
    commits: list[int] = []
    topology = build(client, shared_zk, zk_root, prefix, max_size=60, commits=commits)
    e1, e2, e3 = (topology.coordinate(f"run{n}") for n in (1, 2, 3))
    topology.process(e1)
    assert isinstance(topology.commit(e1.tx), Committed)
    topology.process(e3)

    seal = topology.staging.seal
    target = e2.tx

    def seal_after_a_crash(tx, counts):
        if tx == target:
            second_redis.kill()
            if mode == "bounce":
                second_redis.start()
        return seal(tx, counts)

    topology.staging.seal = seal_after_a_crash
    pid = second_redis.process.pid
    if mode == "bounce":
        topology.process(e2)
        assert second_redis.process.pid != pid, "Redis was restarted"
    else:
        with pytest.raises(ServiceUnavailable) as failed:
            topology.process(e2)
        assert_names(failed.value, "Redis", f"127.0.0.1:{second_redis.port}/0")
        assert "sealing the staging of txid 2 attempt 1" in str(failed.value)
        second_redis.start()
        assert client.hlen(f"txdag:stage:{{{prefix}}}:2:1:users"), "the partials written before the kill survived"
        records = {r.txid: r for r in topology.coordinator.status().txids}
        assert records[2].status is TxStatus.FAILED and "Redis at 127.0.0.1" in records[2].error
        assert records[3].status is TxStatus.FAILED and records[3].failed_by == 2
        with pytest.raises(CascadeError, match="txid 2 failed"):
            topology.commit(e3.tx)
        e2, e3 = topology.coordinate("run2"), topology.coordinate("run3")  # the runs cleared with their future
        assert (e2.tx.attempt, e3.tx.attempt) == (2, 2) and e2.replay
        topology.process(e3)
        topology.process(e2)
    for emission in (e2, e3):
        assert isinstance(topology.commit(emission.tx), Committed)
    drain(topology)
    assert_exactly_once(topology, client, prefix, tweets, commits)


@pytest.mark.parametrize(
    ("mode", "state"),
    [("down", TransactionalMap), ("down", OpaqueMap), ("bounce", TransactionalMap), ("after_apply", OpaqueMap)],
)
def test_redis_restarted_during_a_commit(second_redis, shared_zk, zk_root, prefix, mode, state, monkeypatch):
    """txid 2 holds ~10,000 keys, so its commit is several server-side script calls (a page of a state's staged
    partials each). ``down``: Redis dies after the first page; the commit fails naming Redis; the txid is
    re-emitted and its re-commit applies the remaining keys while the keys of the first page (already at txid 2)
    are not added twice. ``bounce``: Redis restarts between two pages (its script cache empty); the commit carries on.
    ``after_apply``: Redis dies after the last chunk, before ZooKeeper records the commit; the record lands, the
    cleanup fails, and the commit task's retry finds the txid committed and only cleans up."""
    client = fast_redis(second_redis.url)
    tweets = [f"@u{i} #h{i % 97} #g{i}" for i in range(6000)]  # unique users and tags: ~4 keys per tweet
    append_tweets(client, tweets, prefix=f"{prefix}:")
    commits: list[int] = []
    topology = build(client, shared_zk, zk_root, prefix, max_size=2500, commits=commits, state=state)
    e1, e2 = topology.coordinate("run1"), topology.coordinate("run2")
    for emission in (e1, e2):
        topology.process(emission)
    assert isinstance(topology.commit(e1.tx), Committed)
    assert sum(len(p) for p in topology.staging.read(e2.tx).values()) > 2 * DEFAULT_CHUNK

    calls, applied, faulty, commit_client = [], [], [mode != "after_apply"], client
    call_script = redis.commands.core.Script.__call__

    def call_with_fault(script, keys=None, args=None, client=None):  # every script of the commit's client
        result = call_script(script, keys=keys, args=args, client=client)
        if not faulty[0] or (client or script.registered_client) is not commit_client:
            return result
        calls.append(args[0])
        applied.append(result)
        if args[0] == "2" and calls.count("2") == 1:  # after txid 2's first chunk
            second_redis.kill()
            if mode == "bounce":
                second_redis.start()
        return result

    monkeypatch.setattr(redis.commands.core.Script, "__call__", call_with_fault)
    record = topology.coordinator.record_commit
    if mode == "after_apply":
        topology.coordinator.record_commit = lambda tx: (second_redis.kill(), record(tx))[1]
    pid = second_redis.process.pid
    if mode == "bounce":
        outcome = topology.commit(e2.tx)
        assert isinstance(outcome, Committed) and outcome.skipped == 0 and calls.count("2") >= 3
        assert second_redis.process.pid != pid, "Redis was restarted between two chunks"
    else:
        with pytest.raises(ServiceUnavailable) as failed:
            topology.commit(e2.tx)
        assert_names(failed.value, "Redis", f"127.0.0.1:{second_redis.port}/0")
        second_redis.start()
        faulty[0], topology.coordinator.record_commit = False, record
        if mode == "down":
            assert "committing txid 2" in str(failed.value)
            assert int(client.get(f"{prefix}:LAST_COMMITTED")) == 1, "the marker is written with the last chunk"
            assert commits == [1] and topology.coordinator.status().txids[1].status is TxStatus.FAILED
            e2 = topology.coordinate("run2")  # the failed commit is replayed from its run: same batch
            topology.process(e2)
            outcome = topology.commit(e2.tx)
            assert isinstance(outcome, Committed)
            if state is TransactionalMap:
                first_page = applied[calls.index("2")][1]  # {cursor, applied, skipped, bytes} of txid 2's first call
                assert first_page > 0 and outcome.skipped == first_page, "the first page's keys held txid 2 already"
        else:
            assert "cleaning the staging of txid 2" in str(failed.value) and commits == [1, 2]
            assert isinstance(topology.commit(e2.tx), AlreadyCommitted)  # the commit task's retry
    drain(topology)
    assert_exactly_once(topology, client, prefix, tweets, commits)


# -- (b) ZooKeeper restarted, or unreachable past the session timeout ----------------------------------------


def tweets_topology(redis_client, zk, prefix, commits, count=240, max_size=40):
    tweets = [f"@u{i % 23} #h{i % 11} text" for i in range(count)]
    append_tweets(redis_client, tweets, prefix=f"{prefix}:")
    return tweets, build(redis_client, zk, "/txdag", prefix, max_size=max_size, commits=commits)


@pytest.mark.parametrize("mode", ["down", "bounce"])
def test_zookeeper_restarted_during_coordination(redis_client, zk_server, prefix, mode):
    """ZooKeeper dies while the coordinator holds the topology lock and is about to allocate txid 2.
    ``down``: the allocation fails naming ZooKeeper; ZooKeeper comes back; the same run coordinated again gets
    txid 2, not a wait behind the lock node the failed step could not delete (it outlives the outage when the
    session does).
    ``bounce``: ZooKeeper restarts at once; the allocation waits for the reconnection, or fails naming ZooKeeper
    when the client reconnects too late (kazoo backs off between attempts) and the run's retry allocates txid 2."""
    zk = connect(zk_server.hosts, 3 if mode == "down" else 5)
    commits: list[int] = []
    tweets, topology = tweets_topology(redis_client, zk, prefix, commits)
    e1 = topology.coordinate("run1")
    spout = topology.coordinator.spout
    initialize = spout.initialize_transaction
    fired = []

    def initialize_then_crash(txid, prev):
        metadata = initialize(txid, prev)
        if txid == 2 and not fired:
            fired.append(txid)
            zk_server.kill()
            if mode == "bounce":
                zk_server.start()
        return metadata

    spout.initialize_transaction = initialize_then_crash
    if mode == "down":
        with pytest.raises(ServiceUnavailable) as failed:
            bounded(lambda: topology.coordinate("run2"))
        assert_names(failed.value, "ZooKeeper", zk_server.hosts)
        zk_server.start()
        wait_until(lambda: zk.connected, "the client to reconnect (Airflow's retry delay)")
    try:
        e2 = bounded(lambda: topology.coordinate("run2"))
    except ServiceUnavailable as exc:
        assert_names(exc, "ZooKeeper", zk_server.hosts)
        assert mode == "bounce", "ZooKeeper is back and the client connected: the retry must allocate"
        e2 = retry(lambda: topology.coordinate("run2"))
    assert fired and isinstance(e2, Emission) and e2.tx.txid == 2, e2
    again = topology.coordinate("run2")  # a retry of a coordinate task that did succeed re-emits the same txid
    assert (again.tx.txid, again.tx.attempt, again.metadata) == (2, e2.tx.attempt + 1, e2.metadata)
    e2 = again
    for emission in (e1, e2):
        topology.process(emission)
        assert isinstance(topology.commit(emission.tx), Committed)
    drain(topology)
    assert_exactly_once(topology, redis_client, prefix, tweets, commits)
    assert zk.get_children(topology.coordinator.store.lock_path) == [], "no lock node left behind"
    close_zk(zk)


@pytest.mark.parametrize("mode", ["down", "bounce"])
def test_zookeeper_restarted_during_a_commit(redis_client, zk_server, prefix, mode):
    """ZooKeeper dies after txid 2's partials are in Redis and before its commit is recorded. ``down``: the commit
    fails naming ZooKeeper; when it is back, the commit task's retry re-applies nothing and records the commit.
    ``bounce``: it restarts at once; the record lands after the reconnection, or the commit fails naming ZooKeeper and
    the retry (or the replay, if the failure got recorded) commits without adding anything twice."""
    zk = connect(zk_server.hosts, 3 if mode == "down" else 5)
    commits: list[int] = []
    tweets, topology = tweets_topology(redis_client, zk, prefix, commits)
    e1, e2, e3 = (topology.coordinate(f"run{n}") for n in (1, 2, 3))
    for emission in (e1, e2, e3):
        topology.process(emission)
    assert isinstance(topology.commit(e1.tx), Committed)
    record = topology.coordinator.record_commit
    fired = []

    def crash_then_record(tx):
        if tx.txid == 2 and not fired:
            fired.append(tx)
            zk_server.kill()
            if mode == "bounce":
                zk_server.start()
        return record(tx)

    topology.coordinator.record_commit = crash_then_record
    try:
        outcome = bounded(lambda: topology.commit(e2.tx))
    except ServiceUnavailable as exc:
        assert_names(exc, "ZooKeeper", zk_server.hosts)
        assert int(redis_client.get(f"{prefix}:LAST_COMMITTED")) == 2, "Redis holds txid 2, ZooKeeper does not"
        if mode == "down":
            zk_server.start()
            wait_until(lambda: zk.connected, "the client to reconnect (Airflow's retry delay)")
            assert topology.coordinator.status().txids[1].status is TxStatus.COMMITTING
        outcome = commit_in_order(topology, {"run2": e2, "run3": e3})[2]
        assert isinstance(outcome, Committed) and outcome.applied == 0, "the retry found every key at txid 2"
    else:
        assert mode == "bounce", "the commit cannot be recorded while ZooKeeper is down"
        assert isinstance(outcome, Committed) and outcome.applied > 0
    commit_in_order(topology, {"run3": e3})
    assert fired, "ZooKeeper was killed before the commit was recorded"
    drain(topology)
    assert_exactly_once(topology, redis_client, prefix, tweets, commits)
    close_zk(zk)


@pytest.fixture
def partitioned_zk(zk_server):
    """A client whose network to ZooKeeper can be cut (a proxy), a 2 s session, and an observer with a direct
    connection that sees the server side: when the first client's session has expired, its ephemerals vanish."""
    proxy = Proxy(zk_server.port)
    zk = connect(proxy.hosts, 2)
    observer = connect(zk_server.hosts, 10)
    yield proxy, zk, observer
    proxy.close()
    for client in (zk, observer):
        close_zk(client)


def test_zookeeper_session_expires_while_coordinating(redis_client, partitioned_zk, prefix):
    """The coordinator holds the lock and has planned txid 2 when its network to ZooKeeper goes for longer than its
    session: the lock node vanishes and another coordinator takes txid 2 meanwhile. When the network is back the
    first one must not allocate txid 2 a second time: its compare-and-set fails and it takes txid 3 (or its
    step fails naming ZooKeeper and the run's retry does); nothing is lost, nothing counted twice."""
    proxy, zk, observer = partitioned_zk
    commits: list[int] = []
    tweets, topology = tweets_topology(redis_client, zk, prefix, commits)
    other = build(redis_client, observer, "/txdag", prefix, max_size=40, commits=commits)
    e1 = topology.coordinate("run1")
    lock_path = topology.coordinator.store.lock_path
    spout = topology.coordinator.spout
    initialize = spout.initialize_transaction
    intruder: list[Emission] = []

    def initialize_while_partitioned(txid, prev):
        metadata = initialize(txid, prev)
        if txid == 2 and not intruder:
            assert len(observer.get_children(lock_path)) == 1, "we hold the lock"
            proxy.cut()
            wait_until(lambda: observer.get_children(lock_path) == [], "the session to expire (lock node gone)")
            intruder.append(other.coordinate("other-run"))
            proxy.heal()
        return metadata

    spout.initialize_transaction = initialize_while_partitioned
    try:
        mine = bounded(lambda: topology.coordinate("run2"))
    except ServiceUnavailable as exc:
        assert_names(exc, "ZooKeeper", proxy.hosts)
        mine = retry(lambda: topology.coordinate("run2"))
    assert intruder[0].tx.txid == 2 and isinstance(mine, Emission) and mine.tx.txid == 3, (intruder, mine)
    topology.process(e1)
    other.process(intruder[0])
    topology.process(mine)
    for t, emission in ((topology, e1), (other, intruder[0]), (topology, mine)):
        assert isinstance(t.commit(emission.tx), Committed)
    drain(topology)
    assert_exactly_once(topology, redis_client, prefix, tweets, commits)
    assert observer.get_children(lock_path) == [], "no lock node left behind"


def test_zookeeper_session_expires_during_a_commit(redis_client, partitioned_zk, prefix):
    """The commit of txid 2 applied its partials to Redis, then the committer's network to ZooKeeper goes for
    longer than its session. When it is back (with a new session) the commit is recorded, by this try or by the
    commit task's retry, and the retry re-applies nothing."""
    proxy, zk, observer = partitioned_zk
    commits: list[int] = []
    tweets, topology = tweets_topology(redis_client, zk, prefix, commits)
    e1, e2, e3 = (topology.coordinate(f"run{n}") for n in (1, 2, 3))
    for emission in (e1, e2, e3):
        topology.process(emission)
    assert isinstance(topology.commit(e1.tx), Committed)
    probe = zk.create("/probe", ephemeral=True, sequence=True)  # shows the observer when the session is gone
    record = topology.coordinator.record_commit

    def expire_then_record(tx):
        if tx.txid == 2 and observer.exists(probe):
            proxy.cut()
            wait_until(lambda: not observer.exists(probe), "the session to expire (ephemeral node gone)")
            proxy.heal()
        return record(tx)

    topology.coordinator.record_commit = expire_then_record
    try:
        outcome = bounded(lambda: topology.commit(e2.tx))
    except ServiceUnavailable as exc:
        assert_names(exc, "ZooKeeper", proxy.hosts)
        outcome = commit_in_order(topology, {"run2": e2, "run3": e3})[2]
        assert isinstance(outcome, Committed) and outcome.applied == 0, "the retry found every key at txid 2 already"
    assert isinstance(outcome, Committed) and not observer.exists(probe)
    commit_in_order(topology, {"run3": e3})
    drain(topology)
    assert_exactly_once(topology, redis_client, prefix, tweets, commits)


# -- (c) a transactional stream partition down while its txid is replayed ------------------------------------


def word_count(records):
    return {"words": Counter((word,) for record in records for word in record.value.split())}


class FailOnce:
    """The processing raises once on txid 2 (a task crash), so that txid 2 has to be replayed."""

    def __init__(self):
        self.failed = False

    def __call__(self, records):
        if not self.failed and any(r.value.startswith("b-second") for r in records):
            self.failed = True
            raise RuntimeError("injected crash of the process task")
        return word_count(records)


def test_transactional_stream_partition_down_during_a_replay(
    redis_url, redis_client, second_redis, shared_zk, zk_root, prefix
):
    """Partition "b" (its own redis-server) is down when txid 2 is replayed: a transactional spout cannot replay the
    same batch without it, so the replay fails with a message naming the topology, the txid, the partition and its
    address; nothing is committed, no new txid is allocated on top; when "b" is back, the replay re-reads exactly
    the same batch and the counts are exact."""
    parts = [
        StreamPartition.from_url("a", redis_url, f"{prefix}:a", timeout=0.5),
        StreamPartition.from_url("b", second_redis.url, f"{prefix}:b", timeout=0.5),
    ]
    a = [f"a{i} apple {'pear ' * (i % 3)}" for i in range(25)]
    b = [f"b{i} berry {'kiwi ' * (i % 4)}" for i in range(20)]
    b[5] = "b-second x"  # the first entry of b in txid 2
    append_entries(parts[0], a[:10])
    append_entries(parts[1], b[:10])
    spout = PartitionedTransactionalStreamSpout(parts, max_per_partition=5, topology=prefix)
    coordinator = Coordinator(TransactionStore(shared_zk, prefix, root=zk_root), spout, max_active_transactions=2)
    words = TransactionalMap(RedisBackingMap(redis_client, f"{prefix}:words"))
    commits: list[int] = []
    watch_commits(coordinator, commits)
    topology = LocalTopology(coordinator, redis_client, {"words": words}, FailOnce())

    e1 = topology.coordinate("run1")
    topology.process(e1)
    topology.commit(e1.tx)
    e2 = topology.coordinate("run2")
    assert e2.metadata["partitions"]["b"]["count"] == 5
    with pytest.raises(RuntimeError, match="injected crash"):
        topology.process(e2)
    after_txid_1 = redis_client.hgetall(f"{prefix}:words")

    second_redis.kill()
    for attempt in (2, 3):  # replayed (the run cleared) twice while "b" is down
        replay = topology.coordinate("run2")
        assert replay.tx.attempt == attempt and replay.metadata == e2.metadata, "the same batch, never a smaller one"
        with pytest.raises(SourceUnavailable) as down:
            topology.process(replay)
        message = str(down.value)
        assert f"topology {prefix!r}" in message and f"txid 2 attempt {attempt}" in message, message
        assert f"partition(s) 'b' at Redis 127.0.0.1:{second_redis.port}/0 unreachable" in message, message
        assert "cannot replay this batch" in message and "reachable again" in message, message
    record2 = coordinator.status().txids[1]
    assert record2.status is TxStatus.FAILED and "partition(s) 'b'" in record2.error
    later = topology.coordinate("run3")
    assert isinstance(later, Wait) and later.waiting_on == 2, "nothing is allocated on top of the failed txid"
    assert coordinator.status().topology.last_txid == 2 and commits == [1]
    assert redis_client.hgetall(f"{prefix}:words") == after_txid_1, "nothing committed while b was down"

    second_redis.start()  # "b" comes back with its entries; more data arrives on both partitions
    append_entries(parts[0], a[10:])
    append_entries(parts[1], b[10:])
    replay = topology.coordinate("run2")
    assert replay.tx.attempt == 4 and replay.metadata == e2.metadata
    topology.process(replay)
    assert isinstance(topology.commit(replay.tx), Committed)
    drain(topology)

    expected = Counter((w,) for line in a + b for w in line.split())
    stored = redis_client.hgetall(f"{prefix}:words")
    assert {DEFAULT_KEY_CODEC.decode(k.decode()): int(v) for k, v in stored.items()} == dict(expected)
    status = coordinator.status()
    assert commits == list(range(1, status.topology.last_txid + 1)) == [r.txid for r in status.txids]
    assert status.topology.committed_txid == status.topology.last_txid
    assert redis_client.keys(f"txdag:stage:{{{prefix}}}:*") == []

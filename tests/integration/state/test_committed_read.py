"""Readers never see part of a txid: txdag.state.committed reads a state as of the commit marker while the shipped
commit (apply_staged_state page by page, then write_marker, as txdag.commit.phase runs them) applies 100k keys, and
when that commit is SIGKILLed half way. Every txid adds 1 to every key, so a snapshot as of txid N holds N in every
key: any other value in a read is a mixed snapshot."""

import signal
import subprocess
import sys
import threading
import time

import pytest

from txdag.state import OpaqueMap, RedisBackingMap, StateKind, TransactionalMap, TransactionalValue
from txdag.state.committed import read_committed, scan_committed
from txdag.state.marker import read_marker
from txdag.state.redis_backing import aux_key
from txdag.state.redis_commit import StagedPartials, apply_staged

N = 100_000
SAMPLE = [f"k{i}" for i in range(0, N, 997)]  # keys from every page of the commit
KINDS = [StateKind.TRANSACTIONAL, StateKind.OPAQUE]


def stage(client, key):
    pipe = client.pipeline(transaction=False)
    for first in range(0, N, 10_000):
        pipe.hset(key, mapping={f"k{i}": 1 for i in range(first, min(first + 10_000, N))})
    pipe.execute()


def commit(client, prefix, kind, txid, page=5000):
    """One txid's commit as txdag.commit.apply makes it: the staged partials page by page, the marker last."""
    apply_staged(client, txid, [StagedPartials(f"{prefix}:s", kind, f"{prefix}:stage")], marker_key=f"{prefix}:m",
                 page=page, topology=prefix)


class Readers:
    """Reads in a tight loop beside the commits: the sample of keys, and every 50th read the whole state."""

    def __init__(self, client, prefix):
        self.backing = RedisBackingMap(client, f"{prefix}:s")
        self.marker, self.topology = f"{prefix}:m", prefix
        self.reads = self.mixed = self.during_a_commit = self.whole = 0
        self.naive_reads = self.naive_mixed = 0
        self.scans = self.spanning = 0
        self.stop, self.error = threading.Event(), None
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        try:
            self.poll()
        except Exception as exc:  # noqa: BLE001 - handed to the test, which fails with it
            self.error = exc

    def poll(self):
        while not self.stop.is_set():
            if self.reads % 50 == 24:
                self.scan()
            whole = self.reads % 50 == 49
            read = read_committed(self.backing, self.marker, self.topology, None if whole else SAMPLE)
            got = {v.value for v in read.values.values()}
            count = N if whole else len(SAMPLE)
            if read.txid is not None and (got != {read.txid} or len(read.values) != count) or \
                    read.txid is None and read.values:
                self.mixed += 1
            self.reads, self.whole = self.reads + 1, self.whole + whole
            self.during_a_commit += read.newer > 0
            raw = {v for v in self.backing.client.hmget(self.backing.namespace, SAMPLE)}  # what a plain HMGET sees
            self.naive_reads, self.naive_mixed = self.naive_reads + 1, self.naive_mixed + (len(raw) > 1)

    def scan(self):
        """A scan_committed read (what txdag state top does): every page as of one committed txid, all of them as
        of the same one unless a commit ended during the scan."""
        pages = list(scan_committed(self.backing, self.marker, self.topology))
        if any({v.value for v in page.values.values()} - {page.txid} for page in pages):
            self.mixed += 1
        self.scans += 1
        self.spanning += len({page.txid for page in pages}) > 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=120)
        if self.error is not None:
            raise AssertionError(f"a reader failed: {self.error!r}") from self.error

    def __str__(self):
        return (f"{self.reads} reads ({self.whole} of all {N} keys, and {self.scans} scans by pages, {self.spanning} "
                f"of which spanned a commit), {self.during_a_commit} made while a commit was half applied, mixed "
                f"snapshots seen: {self.mixed}; plain HMGET beside them: {self.naive_mixed} mixed of "
                f"{self.naive_reads}")


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.value)
def test_readers_polling_during_large_commits_never_see_part_of_a_txid(redis_client, prefix, kind):
    stage(redis_client, f"{prefix}:stage")
    with Readers(redis_client, prefix) as readers:
        for txid in range(1, 4):
            commit(redis_client, prefix, kind, txid)
            time.sleep(0.05)
    print(f"{kind.value}: {readers}")
    assert readers.mixed == 0, str(readers)
    assert readers.during_a_commit > 0, f"no read fell inside a commit, so none was put to the test: {readers}"
    final = read_committed(readers.backing, readers.marker, prefix)
    assert (final.txid, final.newer, {v.value for v in final.values.values()}, len(final.values)) == (3, 0, {3}, N)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.value)
def test_a_commit_killed_half_way_is_read_as_the_txid_before_it_until_its_replay_ends(redis_client, prefix, kind):
    stage(redis_client, f"{prefix}:stage")
    commit(redis_client, prefix, kind, 1)
    code = ("import sys, redis; from txdag.state import StateKind; "
            "from txdag.state.redis_commit import StagedPartials, apply_staged; "
            f"apply_staged(redis.Redis.from_url(sys.argv[1]), 2, [StagedPartials({prefix + ':s'!r}, "
            f"StateKind({kind.value!r}), {prefix + ':stage'!r})], marker_key={prefix + ':m'!r}, page=200)")
    url = redis_client.connection_pool.connection_kwargs
    dsn = f"redis://{url.get('username') or ''}:{url.get('password') or ''}@{url['host']}:{url['port']}/{url['db']}"
    with Readers(redis_client, prefix) as readers:
        job = subprocess.Popen([sys.executable, "-c", code, dsn])
        prevs = aux_key(f"{prefix}:s", "prev")
        deadline = time.monotonic() + 60
        while redis_client.hlen(prevs) < N // 4 and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        job.send_signal(signal.SIGKILL)
        job.wait()
        half = redis_client.hlen(prevs)
        assert 0 < half < N and read_marker(redis_client, f"{prefix}:m", prefix, "test") == 1, \
            f"the commit was not killed half way ({half} keys hold txid 2): make its pages smaller"
        time.sleep(0.5)  # readers read the half-applied state
        killed = read_committed(readers.backing, readers.marker, prefix)
        commit(redis_client, prefix, kind, 2)  # the replay completes it
        time.sleep(0.2)
    print(f"{kind.value}, killed with {half} of {N} keys applied: {readers}")
    assert (killed.txid, killed.newer, {v.value for v in killed.values.values()}, len(killed.values)) == \
        (1, half, {1}, N)
    assert readers.mixed == 0 and readers.during_a_commit > 0, str(readers)
    final = read_committed(readers.backing, readers.marker, prefix)
    assert (final.txid, {v.value for v in final.values.values()}) == (2, {2})


def test_a_transactional_state_written_by_its_map_state_keeps_the_value_before_the_txid(redis_client, prefix):
    """The Python map states' writes (Trident's updaters, reducers) go through the PUT script, which keeps the
    previous value of a transactional key too; a key new in the half-committed txid has no value before it."""
    backing = RedisBackingMap(redis_client, f"{prefix}:s")
    state = TransactionalMap(backing)
    for txid, values in [(1, {("a",): 5}), (2, {("a",): 7, ("b",): 1})]:
        state.begin_commit(txid)
        state.multi_put(list(values), list(values.values()))
        state.commit(txid)
        if txid == 1:
            redis_client.set(f"{prefix}:m", 1)
    read = read_committed(backing, f"{prefix}:m", prefix)
    assert (read.txid, read.newer, {k: (v.value, v.txid) for k, v in read.values.items()}) == (1, 2, {"a": (5, None)})
    assert backing.multi_get([("a",)]) == [TransactionalValue(2, 7)], "the state's own read is unchanged"
    redis_client.set(f"{prefix}:m", 2)
    read = read_committed(backing, f"{prefix}:m", prefix)
    assert {k: (v.value, v.txid) for k, v in read.values.items()} == {"a": (7, 2), "b": (1, 2)}


def test_an_opaque_value_as_of_the_marker_keeps_its_prev(redis_client, prefix):
    backing = RedisBackingMap(redis_client, f"{prefix}:s")
    state = OpaqueMap(backing)
    for txid in (1, 2):
        state.begin_commit(txid)
        state.multi_put([("a",)], [txid * 10])
        state.commit(txid)
    redis_client.set(f"{prefix}:m", 2)
    read = read_committed(backing, f"{prefix}:m", prefix, ["a", "nosuch"])
    assert {k: (v.value, v.txid, v.prev) for k, v in read.values.items()} == {"a": (20, 2, 10)}

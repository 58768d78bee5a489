"""Storm's coordinator scenarios against a real ZooKeeper: one DAG run = one txid."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from access import ZK_AUTH
from kazoo.client import KazooClient

from txdag.attempt import TransactionAttempt as TA
from txdag.errors import CascadeError, ConfigError, StaleAttemptError
from txdag.spouts.base import Batch, Record, SpoutKind
from txdag.txid.coordinator import (
    AlreadyCommitted,
    Busy,
    Coordinator,
    Emission,
    Go,
    NotReady,
    TransactionStateError,
    Wait,
)
from txdag.zk import TransactionStore, TxStatus, close_zk, connect_zk


class ListSpout:
    """Transactional: batches of ``size`` items of a list; a txid's metadata is {start, end} (end excluded)."""

    kind = SpoutKind.TRANSACTIONAL

    def __init__(self, items: list[Any], size: int = 2) -> None:
        self.items, self.size = items, size

    def is_ready(self, prev: dict | None) -> bool:
        return (prev["end"] if prev else 0) < len(self.items)

    def initialize_transaction(self, txid: int, prev: dict | None) -> dict:
        start = prev["end"] if prev else 0
        return {"start": start, "end": min(start + self.size, len(self.items))}

    def emit_batch(self, tx: TA, md: dict) -> Batch:
        return Batch(tx, [Record(str(i), self.items[i]) for i in range(md["start"], md["end"])])

    def batch_size(self, md: dict) -> int:
        return md["end"] - md["start"]


class OpaqueSpout:
    """Opaque: tuples 1..available; the next batch continues after the previous txid's ``last``."""

    kind = SpoutKind.OPAQUE

    def __init__(self, available: int = 1000, size: int = 50) -> None:
        self.available, self.size = available, size

    def is_ready(self, prev: dict | None) -> bool:
        return (prev["last"] if prev else 0) < self.available

    def initialize_transaction(self, txid: int, prev: dict | None) -> dict:
        first = (prev["last"] if prev else 0) + 1
        return {"first": first, "last": min(first + self.size - 1, self.available)}

    def emit_batch(self, tx: TA, md: dict) -> Batch:
        return Batch(tx, [Record(str(i), i) for i in range(md["first"], md["last"] + 1)])

    def batch_size(self, md: dict) -> int:
        return md["last"] - md["first"] + 1


@pytest.fixture
def store(zk_client: KazooClient, zk_root: str, prefix: str) -> TransactionStore:
    return TransactionStore(zk_client, prefix, root=zk_root)


def emit(coord: Coordinator, run_id: str) -> Emission:
    outcome = coord.coordinate(run_id)
    assert isinstance(outcome, Emission), outcome
    return outcome


def commit(coord: Coordinator, tx: TA) -> None:
    """Process and commit ``tx`` the way the DAG's tasks do (a commit that began before, and failed, resumes)."""
    began = coord.store.commit_begun(tx.txid)
    assert coord.mark_processed(tx)
    assert coord.begin_commit(tx) == Go(tx, resumed=began)
    assert coord.record_commit(tx)


def test_window_of_max_pending_txids(store: TransactionStore) -> None:
    coord = Coordinator(store, ListSpout(list(range(100))), max_active_transactions=3)
    txs = [emit(coord, f"r{i}").tx for i in (1, 2, 3)]
    assert txs == [TA(1, 1), TA(2, 1), TA(3, 1)]
    busy = coord.coordinate("r4")
    assert isinstance(busy, Busy) and "3 txid(s) uncommitted" in busy.reason
    assert busy.waiting_on == 1  # its commit frees a place: the run's task defers on it
    assert store.read_topology()[0].last_txid == 3  # Busy consumed nothing
    commit(coord, txs[0])
    assert emit(coord, "r4").tx == TA(4, 1)


def test_failing_txid_2_reemits_2_3_4_with_the_same_metadata(store: TransactionStore) -> None:
    coord = Coordinator(store, ListSpout(list(range(100))), max_active_transactions=4)
    first = {e.tx.txid: e for e in (emit(coord, f"r{i}") for i in (1, 2, 3, 4))}
    commit(coord, TA(1, 1))
    coord.mark_processed(TA(3, 1))
    assert coord.fail(TA(2, 1), "spark exit 1") == [2, 3, 4]
    snapshot = {r.txid: r for r in coord.status().txids}
    assert [(snapshot[t].status, snapshot[t].failed_by) for t in (2, 3, 4)] == [(TxStatus.FAILED, 2)] * 3
    wait = coord.coordinate("r5")  # nothing new on top of a failure
    assert isinstance(wait, Wait) and wait.waiting_on == 2 and not wait.replay
    assert "no new txid while txid 2 is failed (attempt 1, run 'r2': spark exit 1); run 'r5' consumed no txid" \
        in wait.reason and wait.reason.endswith(f"txdag replay {store.topology} --from 2")
    wait = coord.coordinate("r3")  # all runs cleared at once: 3 waits for 2's re-emission
    assert isinstance(wait, Wait) and wait.waiting_on == 2
    for run, txid in (("r2", 2), ("r3", 3), ("r4", 4)):
        again = emit(coord, run)
        assert again.tx == TA(txid, 2) and again.replay and again.metadata == first[txid].metadata
    for txid in (2, 3, 4):
        commit(coord, TA(txid, 2))
    assert store.read_topology()[0].committed_txid == 4


def test_processing_2_before_1_commits_nothing(store: TransactionStore) -> None:
    coord = Coordinator(store, ListSpout(list(range(10))), max_active_transactions=2)
    emit(coord, "r1"), emit(coord, "r2")
    assert coord.mark_processed(TA(2, 1))
    decision = coord.begin_commit(TA(2, 1))
    assert isinstance(decision, Wait) and decision.waiting_on == 1
    assert store.read_txid(2)[0].status is TxStatus.PROCESSED  # type: ignore[index]
    assert store.read_topology()[0].committed_txid == 0
    commit(coord, TA(1, 1))
    assert coord.check_commit(TA(2, 1)) == Go(TA(2, 1))


def test_a_failed_commit_of_3_reemits_3_onward(store: TransactionStore) -> None:
    coord = Coordinator(store, ListSpout(list(range(100))), max_active_transactions=4)
    for i in (1, 2, 3, 4):
        emit(coord, f"r{i}")
    commit(coord, TA(1, 1)), commit(coord, TA(2, 1))
    coord.mark_processed(TA(4, 1))
    assert coord.mark_processed(TA(3, 1)) and coord.begin_commit(TA(3, 1)) == Go(TA(3, 1))
    assert coord.fail(TA(3, 1), "redis went away during the commit") == [3, 4]
    with pytest.raises(CascadeError, match=r"txid 4 \(attempt 1\) cannot commit: txid 3 failed \(attempt 1: redis"):
        coord.check_commit(TA(4, 1))
    with pytest.raises(TransactionStateError, match="begin_commit"):
        coord.record_commit(TA(3, 1))
    assert [emit(coord, r).tx for r in ("r3", "r4")] == [TA(3, 2), TA(4, 2)]
    assert store.commit_begun(3) and not store.commit_begun(4)  # attempt 2 of 3 resumes a commit begun: Go resumed
    commit(coord, TA(3, 2)), commit(coord, TA(4, 2))


def test_stale_attempts_are_ignored(store: TransactionStore) -> None:
    coord = Coordinator(store, ListSpout(list(range(10))))
    emit(coord, "r1")
    assert emit(coord, "r1").tx == TA(1, 2)  # the run was cleared: attempt 2
    assert coord.mark_processed(TA(1, 1)) is False
    assert coord.fail(TA(1, 1), "late failure of the old attempt") == []
    with pytest.raises(StaleAttemptError, match="txid 1 attempt 1 is stale, the current attempt is 2"):
        coord.check_commit(TA(1, 1))
    assert coord.mark_processed(TA(1, 2))
    with pytest.raises(StaleAttemptError):
        coord.record_commit(TA(1, 1))
    commit(coord, TA(1, 2))


def test_commit_of_an_unprocessed_txid_is_refused(store: TransactionStore) -> None:
    coord = Coordinator(store, ListSpout(list(range(10))))
    emit(coord, "r1")
    with pytest.raises(TransactionStateError, match="never processed"):
        coord.begin_commit(TA(1, 1))
    with pytest.raises(TransactionStateError, match="no record"):
        coord.mark_processed(TA(7, 1))


def test_cleanup_keeps_exactly_the_last_txids(store: TransactionStore) -> None:
    coord = Coordinator(store, ListSpout(list(range(100))), keep_txids=3)
    for i in range(1, 7):
        commit(coord, emit(coord, f"r{i}").tx)
    assert store.list_txids() == [4, 5, 6]
    assert [r.txid for r in coord.status().txids] == [4, 5, 6]
    replay = emit(coord, "r1")  # a cleared old run: committed and rotated out, a no-op
    assert replay.already_committed and replay.tx.txid == 1


def test_a_restart_resumes_from_zookeeper(zk_hosts: str, zk_root: str, prefix: str) -> None:
    spout = ListSpout(list(range(100)), size=5)
    client = connect_zk(zk_hosts, auth=ZK_AUTH)
    coord = Coordinator(TransactionStore(client, prefix, root=zk_root), spout, max_active_transactions=2)
    commit(coord, emit(coord, "r1").tx)
    second = emit(coord, "r2")
    close_zk(client)

    client = connect_zk(zk_hosts, auth=ZK_AUTH)
    try:
        coord = Coordinator(TransactionStore(client, prefix, root=zk_root), spout, max_active_transactions=2)
        again = emit(coord, "r2")
        assert again.tx == TA(2, 2) and again.metadata == second.metadata == {"start": 5, "end": 10}
        assert emit(coord, "r3").metadata == {"start": 10, "end": 15}
    finally:
        close_zk(client)


def test_seed_003_opaque_example_skips_and_repeats_nothing(store: TransactionStore) -> None:
    spout = OpaqueSpout(size=50)
    coord = Coordinator(store, spout, max_active_transactions=2)
    a, b = emit(coord, "A"), emit(coord, "B")
    assert (a.metadata, b.metadata) == ({"first": 1, "last": 50}, {"first": 51, "last": 100})
    assert coord.fail(a.tx, "A failed") == [1, 2]  # and causes B to fail
    spout.size = 40  # a broker partition went away: A's batch shrinks
    a = emit(coord, "A")
    spout.size = 50
    b = emit(coord, "B")
    assert (a.metadata, b.metadata) == ({"first": 1, "last": 40}, {"first": 41, "last": 90})
    commit(coord, a.tx), commit(coord, b.tx)
    c = emit(coord, "C")
    assert c.metadata == {"first": 91, "last": 140}
    committed = [r.id for e in (a, b, c) for r in spout.emit_batch(e.tx, e.metadata).records]
    assert committed == [str(i) for i in range(1, 141)]


def test_opaque_reemission_recomputes_from_the_previous_txid(store: TransactionStore) -> None:
    spout = OpaqueSpout(size=10)
    coord = Coordinator(store, spout, max_active_transactions=3)
    emit(coord, "r1"), emit(coord, "r2")
    spout.size = 4
    assert emit(coord, "r2").metadata == {"first": 11, "last": 14}


def test_reemitting_the_same_batch_leaves_later_txids_valid(store: TransactionStore) -> None:
    """A retried process task re-emits its txid; with the same batch, the txids after it still commit."""
    coord = Coordinator(store, ListSpout(list(range(10))), max_active_transactions=3)
    emit(coord, "r1"), emit(coord, "r2"), emit(coord, "r3")
    coord.mark_processed(TA(3, 1))
    assert emit(coord, "r2").tx == TA(2, 2)
    assert store.read_txid(3)[0].status is TxStatus.PROCESSED  # type: ignore[index]
    commit(coord, TA(1, 1)), commit(coord, TA(2, 2))
    assert coord.begin_commit(TA(3, 1)) == Go(TA(3, 1))


def test_reemitting_a_different_batch_fails_later_txids(store: TransactionStore) -> None:
    spout = OpaqueSpout(size=10)
    coord = Coordinator(store, spout, max_active_transactions=3)
    emit(coord, "r1"), emit(coord, "r2")
    coord.mark_processed(TA(2, 1))
    spout.available = 5  # txid 1's replay reads fewer tuples: txid 2 no longer starts where it should
    assert emit(coord, "r1").metadata == {"first": 1, "last": 5}
    with pytest.raises(CascadeError, match=r"txid 2 \(attempt 1\) cannot commit: it failed .* its batch was "
                                           "planned before txid 1 was re-emitted with another batch"):
        coord.check_commit(TA(2, 1))
    assert store.read_txid(2)[0].failed_by == 1  # type: ignore[index]


def test_a_txid_failed_in_its_commit_commits_when_its_commit_runs_again(store: TransactionStore) -> None:
    coord = Coordinator(store, OpaqueSpout(size=10), max_active_transactions=3)
    first, second = emit(coord, "r1"), emit(coord, "r2")
    assert coord.mark_processed(first.tx) and coord.mark_processed(second.tx)
    assert coord.begin_commit(first.tx) == Go(first.tx)
    assert coord.fail(first.tx, "Redis unreachable") == [1, 2], "the commit failed for good: txid 2 with it"
    assert coord.begin_commit(first.tx) == Go(first.tx, resumed=True), "its commit task cleared: it resumes"
    assert coord.record_commit(first.tx)
    assert coord.begin_commit(second.tx) == Go(second.tx), "failed behind it, processed, planned on it: commits"
    assert coord.record_commit(second.tx)
    assert store.read_topology()[0].committed_txid == 2
    assert [store.read_txid(t)[0].attempt for t in (1, 2)] == [1, 1]  # type: ignore[index]


def test_a_failed_txid_planned_on_a_batch_that_was_replaced_is_not_committed(store: TransactionStore) -> None:
    spout = OpaqueSpout(size=10)
    coord = Coordinator(store, spout, max_active_transactions=3)
    emit(coord, "r1"), emit(coord, "r2")
    assert coord.mark_processed(TA(2, 1)) and coord.fail(TA(2, 1), "the job raised") == [2]
    spout.available = 5
    assert emit(coord, "r1").metadata == {"first": 1, "last": 5}, "txid 1 re-emitted with another batch"
    record = store.read_txid(2)[0]  # type: ignore[index]
    assert (record.status, record.failed_by, record.auto_replay) == (TxStatus.FAILED, 1, True)
    commit(coord, TA(1, 2))
    with pytest.raises(CascadeError, match="planned before txid 1 was re-emitted with another batch"):
        coord.begin_commit(TA(2, 1))
    assert [r.txid for r in coord.automatic_replays(1)] == [2], "txdag replays it itself"


def test_a_not_ready_spout_consumes_no_txid(store: TransactionStore) -> None:
    spout = ListSpout([])
    coord = Coordinator(store, spout)
    outcome = coord.coordinate("r1")
    assert isinstance(outcome, NotReady) and "consumes no txid" in outcome.reason
    assert store.read_topology()[0].last_txid == 0 and store.txid_of_run("r1") is None
    spout.items = ["x"]
    assert emit(coord, "r2").tx == TA(1, 1)


def test_reemitting_a_committed_txid_returns_the_stored_metadata(store: TransactionStore) -> None:
    spout = OpaqueSpout(size=10)
    coord = Coordinator(store, spout)
    first = emit(coord, "r1")
    commit(coord, first.tx)
    spout.size = 3
    again = emit(coord, "r1")
    assert again.already_committed and again.tx == TA(1, 2) and again.metadata == first.metadata
    assert store.read_txid(1)[0].status is TxStatus.COMMITTED  # type: ignore[index]
    assert isinstance(coord.begin_commit(again.tx), AlreadyCommitted)
    assert coord.record_commit(again.tx) is False
    assert coord.fail(again.tx, "late") == []


def test_a_committing_txid_is_frozen_for_an_opaque_spout(store: TransactionStore) -> None:
    spout = OpaqueSpout(size=10)
    coord = Coordinator(store, spout)
    first = emit(coord, "r1")
    assert coord.mark_processed(first.tx) and coord.begin_commit(first.tx) == Go(first.tx)
    spout.size = 3  # the commit task crashed; the run is cleared; the source changed meanwhile
    again = emit(coord, "r1")
    assert again.metadata == first.metadata and again.tx == TA(1, 2)
    coord.fail(again.tx, "crashed again")
    assert emit(coord, "r1").metadata == first.metadata  # still frozen after a failure
    history = store.read_txid(1)[0].history  # type: ignore[index]
    assert [(h.attempt, h.status.value) for h in history] == [
        (1, "emitted"), (1, "processed"), (1, "committing"), (2, "emitted"), (2, "failed"), (3, "emitted")]


def test_lock_held_elsewhere_gives_busy(store: TransactionStore) -> None:
    coord = Coordinator(store, ListSpout([1]), lock_timeout=0.3)
    store.ensure()
    other = store.lock()
    other.acquire()
    try:
        outcome = coord.coordinate("r1")
    finally:
        other.release()
    assert isinstance(outcome, Busy) and "lock" in outcome.reason and outcome.waiting_on is None  # rescheduled


def test_two_coordinators_racing_never_share_a_txid(zk_hosts: str, zk_root: str, prefix: str) -> None:
    clients = [connect_zk(zk_hosts, auth=ZK_AUTH) for _ in range(2)]
    coords = [Coordinator(TransactionStore(c, prefix, root=zk_root), ListSpout(list(range(1000))),
                          max_active_transactions=100) for c in clients]
    got: dict[str, int] = {}
    start = threading.Barrier(4)

    def run(coord: Coordinator, name: str) -> None:
        start.wait()
        for i in range(8):
            got[f"{name}-{i}"] = emit(coord, f"{name}-{i}").tx.txid

    threads = [threading.Thread(target=run, args=(coords[i % 2], f"w{i}")) for i in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        for c in clients:
            close_zk(c)
    assert sorted(got.values()) == list(range(1, 33))


def test_metadata_that_cannot_be_stored_is_refused_before_any_txid(store: TransactionStore) -> None:
    spout = ListSpout([1, 2])
    spout.initialize_transaction = lambda txid, prev: {"when": object()}  # type: ignore[method-assign]
    with pytest.raises(ConfigError, match="cannot be stored as JSON"):
        Coordinator(store, spout).coordinate("r1")
    assert store.read_topology()[0].last_txid == 0

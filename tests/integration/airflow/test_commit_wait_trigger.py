"""The trigger a waiting step defers on (txdag.airflow.triggers.TxidSettled), run as the triggerer runs it
(its ``run()`` in an event loop, the connection from AIRFLOW_CONN_*) against a real ZooKeeper: it fires when the txid
it waits on commits or fails (only commits, for a process step), not before; at its time limit otherwise; and a
ZooKeeper it cannot reach wakes the task (whose own step then names the service) at its time limit, instead of
raising in the triggerer or waking it in a loop."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from access import ZK_AUTH

from txdag.zk import TopologyRecord, TransactionStore, TxidRecord, TxStatus

AT = "2026-01-01T00:00:00.000+00:00"
CONN = "zk_trigger_test"


@pytest.fixture
def store(zk_client, zk_root, prefix, zk_hosts, monkeypatch) -> TransactionStore:
    """Txids 1 and 2 processed, none committed; the connection the trigger looks up."""
    host, port = zk_hosts.split(",")[0].split(":")
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", json.dumps({
        "conn_type": "zookeeper", "host": host, "port": int(port), "login": ZK_AUTH[0], "password": ZK_AUTH[1],
        "extra": {"root": zk_root}}))
    store = TransactionStore(zk_client, prefix, root=zk_root)
    store.ensure()
    for txid in (1, 2):
        topology, version = store.read_topology()
        store.allocate(TxidRecord.new(txid, f"run{txid}", {}, AT), topology, version)
        record, version = store.read_txid(txid)
        store.update([(record.moved(TxStatus.PROCESSED, AT), version)])
    return store


def first_event(trigger) -> dict:
    async def run() -> dict:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(run())


def trigger(prefix: str, waiting_on: int, limit: float, conn: str = CONN, committed_only: bool = False,
            earliest: float = 0.0, deferred_at: float | None = None):
    from txdag.airflow.triggers import TxidSettled

    return TxidSettled(prefix, conn, waiting_on, limit, committed_only, earliest, deferred_at)


def later(seconds: float, change) -> threading.Thread:
    thread = threading.Timer(seconds, change)
    thread.start()
    return thread


def commit(store: TransactionStore, txid: int) -> None:
    record, version = store.read_txid(txid)
    topology, topology_version = store.read_topology()
    store.update([(record.moved(TxStatus.COMMITTED, AT), version)],
                 (TopologyRecord(topology.last_txid, txid), topology_version))


def fail(store: TransactionStore, txid: int) -> None:
    record, version = store.read_txid(txid)
    store.update([(record.moved(TxStatus.FAILED, AT, failed_by=txid), version)])


@pytest.mark.parametrize("settle", [commit, fail], ids=["committed", "failed"])
def test_it_fires_when_the_txid_it_waits_on_settles(store, prefix, settle) -> None:
    changed = later(0.6, lambda: settle(store, 1))
    event = first_event(trigger(prefix, 1, limit=120))
    changed.join()
    assert event == {"waiting_on": 1, "why": "settled"}


def test_it_does_not_fire_for_a_later_txid_or_before_its_time_limit(store, prefix) -> None:
    """Txid 1 committing settles nothing for a commit that waits on txid 2: it runs to its time limit."""
    changed = later(0.2, lambda: commit(store, 1))
    event = first_event(trigger(prefix, 2, limit=1.5))
    changed.join()
    assert event == {"waiting_on": 2, "why": "time limit"}


def test_a_process_waiting_on_its_key_value_predecessor_wakes_on_its_commit_not_its_failure(store, prefix) -> None:
    """committed_only (the process step of a topology with key-value states): a failed txid 1 would only make the
    step wait again, so it does not fire the trigger (the time limit does); a committed one does."""
    changed = later(0.2, lambda: fail(store, 1))
    event = first_event(trigger(prefix, 1, limit=1.5, committed_only=True))
    changed.join()
    assert event == {"waiting_on": 1, "why": "time limit"}
    changed = later(0.2, lambda: commit(store, 2))
    assert first_event(trigger(prefix, 2, limit=120, committed_only=True)) == {"waiting_on": 2, "why": "settled"}
    changed.join()


def test_a_txid_already_settled_fires_at_once(store, prefix) -> None:
    commit(store, 1)
    assert first_event(trigger(prefix, 1, limit=120)) == {"waiting_on": 1, "why": "settled"}


def test_it_never_fires_before_the_deferral_has_been_reported(store, prefix) -> None:
    """A resumed task must not be running before the scheduler has the worker's report of its deferral (Airflow
    3.3 fails it then, apache/airflow#72716): a txid settled already still waits ``earliest`` seconds, and by
    default that is the worker's report interval plus a margin."""

    from txdag.airflow.triggers import REPORT_MARGIN, TxidSettled, earliest_default

    commit(store, 1)
    started = time.monotonic()
    assert first_event(trigger(prefix, 1, limit=120, earliest=1.0)) == {"waiting_on": 1, "why": "settled"}
    assert time.monotonic() - started >= 1.0
    started = time.monotonic()
    assert first_event(trigger(prefix, 2, limit=0.2, earliest=1.0)) == {"waiting_on": 2, "why": "time limit"}
    assert time.monotonic() - started >= 1.0  # a time limit shorter than that waits as long
    from airflow.configuration import conf

    assert earliest_default() == conf.getfloat("workers", "min_heartbeat_interval") + REPORT_MARGIN
    kwargs = TxidSettled(prefix, CONN, 1, 10).serialize()[1]
    assert kwargs["earliest"] is None and abs(kwargs["deferred_at"] - time.time()) < 5


def test_the_least_wait_and_the_time_limit_count_from_the_deferral_not_from_the_triggers_start(store, prefix) -> None:
    """The triggerer starts a trigger 1-2 s after the task deferred; that time counts: a trigger built (by the task
    that defers) ``earliest`` seconds ago fires at once on a settled txid, one built half of it ago waits the other
    half, and a time limit passed since the deferral ends the wait at once. The triggerer builds it again from its
    serialized arguments, which keep the deferral's time."""

    from txdag.airflow.triggers import TxidSettled

    commit(store, 1)
    deferred = TxidSettled(prefix, CONN, 1, 120, earliest=6.0, deferred_at=time.time() - 6.0)
    started = time.monotonic()
    rebuilt = TxidSettled(**deferred.serialize()[1])
    assert first_event(rebuilt) == {"waiting_on": 1, "why": "settled"}
    assert time.monotonic() - started < 4.0  # counted from the trigger's start: 6 s
    started = time.monotonic()
    assert first_event(trigger(prefix, 1, limit=120, earliest=3.0, deferred_at=time.time() - 1.5))["why"] == "settled"
    assert 1.3 <= time.monotonic() - started < 2.9
    started = time.monotonic()  # a deferral time ahead of the triggerer's clock waits no longer than earliest
    assert first_event(trigger(prefix, 1, limit=120, earliest=1.0, deferred_at=time.time() + 60))["why"] == "settled"
    assert 1.0 <= time.monotonic() - started < 2.5
    started = time.monotonic()  # txid 2 never settles: its limit, 8 s after a deferral 6 s ago, is 2 s away
    assert first_event(trigger(prefix, 2, limit=8, earliest=1.0, deferred_at=time.time() - 6.0))["why"] == "time limit"
    assert 1.8 <= time.monotonic() - started < 5.0  # counted from the trigger's start: 8 s


def test_a_zookeeper_it_cannot_reach_wakes_the_task_at_its_time_limit(store, prefix, monkeypatch, capfd) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_ZK_NOWHERE", json.dumps({
        "conn_type": "zookeeper", "host": "127.0.0.1", "port": 1, "extra": {"timeout": 1}}))
    event = first_event(trigger(prefix, 1, limit=2, conn="zk_nowhere"))
    assert event["waiting_on"] == 1 and "ServiceUnavailable" in event["why"], event
    said = capfd.readouterr().out  # the triggerer's log (structlog prints it)
    assert f"topology={prefix}: cannot watch txid 1 (ServiceUnavailable: ZooKeeper is not reachable" in said
    assert "the task looks again itself in" in said


@pytest.mark.parametrize("settle", [commit, fail], ids=["committed", "failed"])
def test_a_process_task_ends_once_its_predecessor_settles(store, settle) -> None:
    """What a process task does before it ends (txdag.airflow.operators.await_settled): it waits for txid - 1 to
    commit or fail, so that its commit task finds it settled and need not defer."""

    from txdag.airflow.operators import await_settled

    changed = later(0.6, lambda: settle(store, 1))
    waited, done = await_settled(store, 1, limit=30)
    changed.join()
    assert done and 0.5 <= waited < 5, waited
    started = time.monotonic()
    assert await_settled(store, 1, limit=30) == (pytest.approx(0.0, abs=0.2), True)  # settled already: one read
    assert time.monotonic() - started < 0.2


def test_a_predecessor_that_does_not_settle_delays_its_successor_only_up_to_the_limit(store) -> None:
    from txdag.airflow.operators import await_settled

    waited, done = await_settled(store, 2, limit=0.8)
    assert not done and 0.8 <= waited < 2, waited


def test_a_process_task_killed_while_it_waits_stops_waiting(store) -> None:
    """on_kill (a cleared or timed-out process task) sets the event the wait polls with: it ends at once."""
    from txdag.airflow.operators import await_settled

    stop = threading.Event()
    killed = later(0.5, stop.set)
    waited, done = await_settled(store, 2, limit=30, stop=stop)
    killed.join()
    assert not done and 0.4 <= waited < 2, waited


@pytest.fixture
def process_task(store, prefix, tmp_path):
    """A warm process operator of a topology whose ZooKeeper is this test's (CONN), and its task's runtime."""
    from txdag.airflow.operators import WarmProcessOperator
    from txdag.airflow.runtime import TopologyRuntime
    from txdag.topology.definition import State, TweetsSource
    from txdag.topology.topology import TransactionalTopology

    def make(conn: str = CONN):
        (tmp_path / "job.py").write_text("")
        topology = TransactionalTopology(prefix, source=TweetsSource(prefix=f"{prefix}:"), job=str(tmp_path / "job.py"),
                                         states=[State("users", namespace=f"{prefix}:users")],
                                         zookeeper_conn_id=conn, commit_poke_interval=30)
        task = WarmProcessOperator(task_id="process", topology=topology)
        task._stop_waiting = threading.Event()  # what process_txid arms as each try starts
        return task, TopologyRuntime(topology)

    return make


def test_the_process_operators_on_kill_ends_its_wait_for_the_predecessor(process_task, capfd) -> None:
    """before_the_commit as the process task runs it (txid 2 staged, txid 1 not committed), killed through the
    shipped operator's on_kill after 0.5 s: it returns then, not at its 15 s cap, and says so."""
    from txdag.airflow.operators import before_the_commit

    task, rt = process_task()
    with rt:
        rt.clients.store(rt.topology.topology_id, CONN).read_topology()  # connected before the clock starts
        killed = later(0.5, task.on_kill)
        started = time.monotonic()
        before_the_commit(task, rt, 2)
        killed.join()
        assert 0.4 <= time.monotonic() - started < 2
    assert "for txid 1 to commit or fail (not yet: killed while waiting)" in capfd.readouterr().out


def test_a_process_task_killed_during_its_job_does_not_wait_for_the_predecessor(process_task, capfd) -> None:
    """on_kill before the wait (during the job: the event is armed when the task starts) skips the wait."""
    from txdag.airflow.operators import before_the_commit

    task, rt = process_task()
    task.on_kill()
    with rt:
        started = time.monotonic()
        before_the_commit(task, rt, 2)
        assert time.monotonic() - started < 0.2
    assert "killed; not waiting for txid 1" in capfd.readouterr().out


def test_a_zookeeper_down_at_the_wait_leaves_it_to_the_commit_task(process_task, monkeypatch, capfd) -> None:
    """The wait is only a speed-up: a ZooKeeper it cannot reach is a warning, and the process task succeeds."""
    from txdag.airflow.operators import before_the_commit

    monkeypatch.setenv("AIRFLOW_CONN_ZK_NOWHERE", json.dumps({
        "conn_type": "zookeeper", "host": "127.0.0.1", "port": 1, "extra": {"timeout": 1}}))
    task, rt = process_task("zk_nowhere")
    with rt:
        before_the_commit(task, rt, 2)  # does not raise
    said = capfd.readouterr().out
    assert "txid=2: not waiting for txid 1 here (ServiceUnavailable: ZooKeeper is not reachable" in said, said
    assert "the commit task will" in said


def test_a_wait_whose_report_fails_leaves_it_to_the_commit_task(process_task, monkeypatch, capfd) -> None:
    """What the wait says about txid - 1 once it gives up is read from ZooKeeper too: any error there is the same
    warning, after the txid was staged, never the process task's failure."""
    from txdag.airflow import operators

    def unreadable(*args: object) -> str:
        raise ValueError("Invalid isoformat string: 'not a time'")

    monkeypatch.setattr(operators, "PREDECESSOR_WAIT", 0.5)
    monkeypatch.setattr(operators, "predecessor_note", unreadable)
    task, rt = process_task()
    with rt:
        operators.before_the_commit(task, rt, 2)  # does not raise
    said = capfd.readouterr().out
    assert "txid=2: not waiting for txid 1 here (ValueError: Invalid isoformat string" in said, said


def test_each_try_of_a_process_task_starts_with_its_own_unkilled_wait(process_task) -> None:
    """process_txid arms the event on_kill sets before anything else of the try: a kill during the job reaches it,
    and nothing of an earlier kill does."""
    from txdag.airflow.operators import process_txid

    class Stop(Exception):
        pass

    class FirstRead:  # the try's task instance, as far as process_txid gets before the clock matters
        def xcom_pull(self, task_ids: str) -> None:
            raise Stop(task_ids)

    task, _ = process_task()
    earlier = task._stop_waiting
    earlier.set()
    with pytest.raises(Stop):
        process_txid(task, {"ti": FirstRead(), "run_id": "manual__1"}, lambda rt, emission: None)
    assert task._stop_waiting is not earlier and not task._stop_waiting.is_set()
    task.on_kill()
    assert task._stop_waiting.is_set()

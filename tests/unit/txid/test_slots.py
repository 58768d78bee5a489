"""A run queued behind max_active_runs, named with the runs that hold the slots and the one that frees a slot
(txdag.txid.slots), as ``txdag status`` and the transactions page print it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from txdag.txid.report import topology_status, transactions_view
from txdag.txid.slots import queued_behind
from txdag.zk.records import TopologyRecord, TxidRecord, TxStatus

NOW = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)


def record(txid: int, status: TxStatus, minutes_ago: float = 1) -> TxidRecord:
    at = (NOW - timedelta(minutes=minutes_ago)).isoformat(timespec="milliseconds")
    rec = TxidRecord.new(txid, f"run{txid}", {"v": 1, "from": 100 * txid - 99, "quantity": 100}, at)
    return rec if status is TxStatus.EMITTED else rec.moved(status, at)


# The deadlock of issue 36: txid 25 committed, 26 processing; a replay from 25 cleared the runs of 25, 26 and 27.
# 25's and 26's runs are queued behind 27's (its commit waits for 26) and a new run waiting for a place.
TOPO = TopologyRecord(27, 25)
RECORDS = [record(25, TxStatus.COMMITTED), record(26, TxStatus.EMITTED, 8), record(27, TxStatus.PROCESSED)]
RUNS = {"run25": "queued", "run26": "queued", "run27": "running", "manual__new": "running"}


def test_a_replay_queued_behind_waiting_runs_names_the_holders_and_the_one_that_gives_its_slot_up() -> None:
    found = queued_behind(TopologyRecord(27, 24), [record(25, TxStatus.EMITTED), *RECORDS[1:]], RUNS, 2)
    assert found is not None and (found["queued"], found["held_by"]) == (["run25", "run26"], ["manual__new", "run27"])
    assert found["text"] == (
        "run run25 (txid 25, being replayed) and run run26 (txid 26, being replayed) are queued behind "
        "max_active_runs (2): the slots are held by run manual__new (coordinating: no txid yet, waiting for a place "
        "among max_active_transactions) and run run27 (txid 27: waits on txid 25 to commit first). They start when "
        "a slot frees: run manual__new gives its slot up (skipped, consuming no txid) at its next look, within the "
        "topology's commit_poke_interval, because the run of txid 25, which it waits on, is queued")


def test_the_lowest_txid_holder_frees_its_slot_when_nothing_before_it_is_queued() -> None:
    records = [record(26, TxStatus.EMITTED), record(27, TxStatus.PROCESSED), record(28, TxStatus.FAILED)]
    runs = {"run26": "running", "run27": "running", "run28": "queued"}
    found = queued_behind(TopologyRecord(28, 25), records, runs, 2)
    assert found is not None and found["frees"] == "run run26 frees its slot once txid 26 commits"
    assert found["text"].startswith("run run28 (txid 28, being replayed) is queued behind max_active_runs (2): the "
                                    "slots are held by run run26 (txid 26: waits on its process task (attempt 1)) "
                                    "and run run27 (txid 27: waits on txid 26 to commit first). It starts when")


def test_runs_that_all_wait_for_the_queued_head_are_said_to_free_no_slot() -> None:
    records = [record(26, TxStatus.EMITTED), record(27, TxStatus.PROCESSED), record(28, TxStatus.PROCESSED)]
    runs = {"run26": "queued", "run27": "running", "run28": "running"}
    found = queued_behind(TopologyRecord(28, 25), records, runs, 2)
    assert found is not None and found["frees"] == (
        "no holder frees one by itself, as each waits for txid 26 to commit, whose run is queued behind them")


def test_a_free_slot_or_a_paused_dag_is_the_wait_and_no_queued_run_is_none() -> None:
    runs = {"run27": "running", "manual__new": "queued"}
    free = queued_behind(TOPO, RECORDS, runs, 2)
    assert free is not None and free["text"] == (
        "run manual__new (a new run, no txid yet) is queued with a run slot free (1 of 2 held): Airflow's scheduler "
        "starts it at its next loop (unless the scheduler is down)")
    paused = queued_behind(TOPO, RECORDS, RUNS, 2, paused=True)
    assert paused is not None and paused["text"].endswith("are queued: the DAG is paused, so Airflow starts no run "
                                                          "until it is unpaused")
    assert queued_behind(TOPO, RECORDS, {"run27": "running", "run26": "running"}, 2) is None


def test_status_and_the_page_say_the_same_and_a_queued_head_is_not_stalled_on_its_task() -> None:
    status = topology_status(TOPO, RECORDS, "tw", 0, now=NOW, runs=RUNS, max_active_runs=2, paused=False)
    view = transactions_view("tw", TOPO, RECORDS, now=NOW, runs=RUNS, max_active_runs=2, paused=False)
    assert status["run_slots"] == view["run_slots"] and status["run_slots"]["held_by"] == ["manual__new", "run27"]
    assert status["stalled"] == [] and view["stalled"] == []  # 8 min processing, but its run never started
    assert [r["waits_on"] for r in status["in_flight"]] == ["its run to start (queued in Airflow)",
                                                            "txid 26 to commit first"]
    unread = topology_status(TOPO, RECORDS, "tw", 0, now=NOW)  # Airflow not read: ZooKeeper's view alone
    assert unread["run_slots"] is None and unread["stalled"][0].endswith("to retry it now: txdag retry tw 26")

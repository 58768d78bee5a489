"""The figures of ``txdag status`` and the UI's transactions page, computed from txid records alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from txdag.txid.report import commits_per_minute, failures, phase, phase_seconds, transactions_view
from txdag.zk.records import TopologyRecord, TxidRecord, TxStatus

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def at(minutes_ago: float) -> str:
    return (NOW - timedelta(minutes=minutes_ago)).isoformat(timespec="milliseconds")


def record(txid: int, status: TxStatus, *, committed_ago: float | None = None, failed_by: int | None = None,
           attempt: int = 1) -> TxidRecord:
    rec = TxidRecord.new(txid, f"manual__{txid}", {"v": 1, "from": 100 * txid - 99, "quantity": 100}, at(60))
    if committed_ago is not None:
        rec = rec.moved(TxStatus.PROCESSED, at(committed_ago + 1)).moved(TxStatus.COMMITTING, at(committed_ago + 1))
        return rec.moved(TxStatus.COMMITTED, at(committed_ago))
    if status is TxStatus.FAILED:
        return rec.moved(status, at(5), failed_by=failed_by or txid, error=f"boom in {failed_by or txid}")
    return rec.moved(status, at(1), attempt=attempt) if status is not TxStatus.EMITTED else rec


def test_phases_say_what_a_txid_waits_for() -> None:
    assert phase(record(4, TxStatus.EMITTED), 3) == "processing"
    assert phase(record(4, TxStatus.PROCESSED), 3) == "processed"  # next to commit
    assert phase(record(5, TxStatus.PROCESSED), 3) == "waiting to commit"  # txid 4 is not committed yet
    assert phase(record(4, TxStatus.COMMITTING), 3) == "committing"
    assert phase(record(4, TxStatus.FAILED), 3) == "failed"


def test_commits_per_minute_counts_first_commits_in_the_window() -> None:
    records = [record(1, TxStatus.COMMITTED, committed_ago=30), record(2, TxStatus.COMMITTED, committed_ago=9),
               record(3, TxStatus.COMMITTED, committed_ago=2), record(4, TxStatus.EMITTED)]
    replayed = records[1].moved(TxStatus.COMMITTED, at(1), attempt=2)  # a replay of a committed txid: not a commit
    assert commits_per_minute(records, NOW) == 0.2
    assert commits_per_minute([records[0], replayed, records[2]], NOW) == 0.2
    assert commits_per_minute(records, NOW, timedelta(minutes=60)) == 0.05
    assert commits_per_minute([], NOW) == 0.0


def test_phase_seconds_are_the_newest_committed_txids_as_first_committed() -> None:
    retried = (TxidRecord.new(2, "manual__2", {}, at(10)).moved(TxStatus.EMITTED, at(9), attempt=2)
               .moved(TxStatus.PROCESSED, at(8.5)).moved(TxStatus.COMMITTING, at(8)).moved(TxStatus.COMMITTED, at(7.5)))
    records = [record(1, TxStatus.COMMITTED, committed_ago=20), retried, record(3, TxStatus.PROCESSED)]
    assert phase_seconds(records) == {"process": 30.0, "wait": 30.0, "commit": 30.0, "total": 150.0}
    replayed = retried.moved(TxStatus.EMITTED, at(2), attempt=3).moved(TxStatus.COMMITTED, at(1))  # adds no time
    assert phase_seconds([records[0], replayed]) == phase_seconds(records)
    assert phase_seconds([record(1, TxStatus.COMMITTED, committed_ago=20)]) == {
        "process": 2340.0, "wait": 0.0, "commit": 60.0, "total": 2400.0}
    assert phase_seconds([record(3, TxStatus.PROCESSED)]) == phase_seconds([]) == {}


def test_failures_group_the_cascade_behind_the_failed_txid() -> None:
    records = [record(3, TxStatus.COMMITTED, committed_ago=20), record(4, TxStatus.FAILED),
               record(5, TxStatus.FAILED, failed_by=4), record(6, TxStatus.FAILED, failed_by=4)]
    assert [(f["txid"], f["cascade"], f["error"]) for f in failures(records, "t")] == [(4, [5, 6], "boom in 4")]


def test_view_lists_in_flight_coordinating_runs_failed_and_every_kept_txid() -> None:
    records = [record(1, TxStatus.COMMITTED, committed_ago=3), record(2, TxStatus.PROCESSED),
               record(3, TxStatus.EMITTED), record(4, TxStatus.FAILED)]
    runs = {"manual__1": "success", "manual__2": "running", "manual__3": "running", "manual__4": "failed",
            "scheduled__x": "queued", "old__y": "success"}
    view = transactions_view("t", TopologyRecord(4, 1), records, now=NOW, runs=runs, lag=7, paused=False)
    assert (view["committed_txid"], view["last_txid"], view["lag"], view["paused"]) == (1, 4, 7, False)
    assert [(r["txid"], r["phase"], r["run_id"]) for r in view["in_flight"]] == [
        (None, "coordinating", "scheduled__x"), (2, "processed", "manual__2"), (3, "processing", "manual__3")]
    assert [f["txid"] for f in view["failed"]] == [4]
    assert [(r["txid"], r["batch_size"], r["batch"], r["run_state"]) for r in view["txids"]] == [
        (4, 100, "ids 301..400", "failed"), (3, 100, "ids 201..300", "running"),
        (2, 100, "ids 101..200", "running"), (1, 100, "ids 1..100", "success")]
    assert view["txids"][0]["metadata"] == {"v": 1, "from": 301, "quantity": 100}
    assert view["commits_per_minute"] == 0.1
    assert view["phase_seconds"]["commit"] == 60.0

"""What a txid in flight waits on, and when the head of the line counts as stalled (txdag.txid.waits)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from txdag.attempt import TransactionAttempt
from txdag.txid.decisions import Wait, commit_decision
from txdag.txid.report import topology_status
from txdag.txid.waits import STALLED_AFTER, duration, stalled, waits_on
from txdag.zk.records import TopologyRecord, TxidRecord, TxStatus

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def record(txid: int, status: TxStatus, seconds_ago: float, attempt: int = 1) -> TxidRecord:
    at = (NOW - timedelta(seconds=seconds_ago)).isoformat(timespec="milliseconds")
    rec = TxidRecord.new(txid, f"manual__{txid}", {"from": 1, "quantity": 1}, at)
    return rec if status is TxStatus.EMITTED else rec.moved(status, at, attempt=attempt)


def test_each_phase_names_what_it_waits_on() -> None:
    assert waits_on(record(4, TxStatus.EMITTED, 5), 3) == "its process task (attempt 1)"
    assert waits_on(record(4, TxStatus.PROCESSED, 5, attempt=2), 3) == "its commit task (attempt 2)"
    assert waits_on(record(5, TxStatus.PROCESSED, 5), 3) == "txid 4 to commit first"
    assert waits_on(record(4, TxStatus.COMMITTING, 5), 3) == "its commit task (attempt 1)"


def test_only_the_head_of_the_line_past_the_threshold_is_stalled() -> None:
    past = STALLED_AFTER.total_seconds() + 1
    assert stalled(record(4, TxStatus.EMITTED, past), 3, NOW)
    assert not stalled(record(4, TxStatus.EMITTED, past - 2), 3, NOW)
    assert not stalled(record(5, TxStatus.PROCESSED, past * 10), 3, NOW)  # behind txid 4: not its own task


def test_durations_read_short() -> None:
    assert [duration(timedelta(seconds=s)) for s in (0, 59, 243, 7500)] == ["0 s", "59 s", "4 min 03 s", "2 h 05 min"]


def test_status_names_the_wait_and_the_retry_command_of_a_stalled_txid() -> None:
    records = [record(4, TxStatus.EMITTED, 300), record(5, TxStatus.PROCESSED, 20)]
    status = topology_status(TopologyRecord(5, 3), records, "tw", 0, now=NOW)
    assert [(r["txid"], r["waits_on"], r["for"]) for r in status["in_flight"]] == [
        (4, "its process task (attempt 1)", "5 min 00 s"), (5, "txid 4 to commit first", "20 s")]
    [advice] = status["stalled"]
    assert "txid 4 (attempt 1, run manual__4) has waited on its process task for 5 min 00 s" in advice
    assert advice.endswith("to retry it now: txdag retry tw 4")
    assert topology_status(TopologyRecord(5, 3), records[1:], "tw", 0, now=NOW)["stalled"] == []


def test_a_head_whose_run_failed_in_airflow_is_stuck_at_once_and_retry_goes_on() -> None:
    records = [record(4, TxStatus.COMMITTING, 20), record(5, TxStatus.PROCESSED, 20)]
    runs = {"manual__4": "failed", "manual__5": "running"}
    [advice] = topology_status(TopologyRecord(5, 3), records, "tw", 0, now=NOW, runs=runs)["stalled"]
    assert "txid 4 (attempt 1, run manual__4) is committing here since" in advice
    assert "but its run failed in Airflow and nothing recorded that here (its last commit try killed" in advice
    assert "(its failed task cleared): txdag retry tw 4; if it is failed here by then" in advice
    assert topology_status(TopologyRecord(5, 3), records, "tw", 0, now=NOW)["stalled"] == [], "20 s: not yet"
    later = {"manual__4": "running", "manual__5": "failed"}
    assert topology_status(TopologyRecord(5, 3), records, "tw", 0, now=NOW, runs=later)["stalled"] == [], \
        "only the head of the line"


def test_a_waiting_commit_says_what_its_predecessor_is_doing() -> None:
    ago = (NOW - datetime.now(UTC)).total_seconds()  # the commit decision compares with the clock
    records = {4: record(4, TxStatus.EMITTED, ago + 90), 5: record(5, TxStatus.PROCESSED, ago + 3)}
    decision = commit_decision("tw", TransactionAttempt(5, 1), 3, records)
    assert isinstance(decision, Wait) and decision.waiting_on == 4
    assert "waits for txid 4 to commit (committed: 3); txid 4 is processing (attempt 1, run manual__4) for" in (
        decision.reason) and "for 1 min 30 s" in decision.reason
    assert decision.reason.endswith("; if its task died: txdag retry tw 4")  # 90 s: stalled

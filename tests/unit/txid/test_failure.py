"""A failed txid as an operator reads it: the headline of its error (also of records older txdag wrote with the
whole spark-submit output), the ways out as commands, and the rules of accept-missing, without services."""

from __future__ import annotations

import pytest

from txdag.attempt import TransactionAttempt as TA
from txdag.txid.failure import headline, job_failure, job_line, ways_out
from txdag.txid.holes import refusal
from txdag.zk.records import TxidRecord, TxStatus

OLD_RECORD = (  # what fail_txid recorded before: the provider's exception, the job's JSON, the driver's output
    "process failed: Cannot execute: spark-submit --master local[2] --name txdag-t app.py --job "
    "'{\"v\":1,\"topology\":\"t\"}'. Error code is: 1.\nLast spark-submit output:\n"
    + "25/11/24 15:00:00 INFO SparkContext: noise\n" * 12
    + "txdag job failed: topology=t txid=8 attempt=2: BatchReadError: topology 't' txid 8 attempt 2: key '506' is "
    "missing; Ways out: ... `txdag accept-missing t 8 --confirm --replay` ...\n"
    + "25/11/24 15:00:01 INFO ShutdownHookManager: Shutdown hook called\n")


def test_the_headline_of_an_old_record_is_the_jobs_own_line() -> None:
    assert headline(OLD_RECORD) == ("process failed: the Spark job failed: BatchReadError: topology 't' txid 8 "
                                    "attempt 2: key '506' is missing; Ways out: ... `txdag accept-missing t 8 "
                                    "--confirm --replay` ...")


def test_the_headline_of_any_other_error_is_its_first_line_cut_to_a_bound() -> None:
    assert headline("commit failed: boom\nTraceback ...") == "commit failed: boom"
    assert headline(None) == "" and headline("  \n one \n") == "one"
    long = headline("x" * 5000)
    assert len(long) == 1000 and long.endswith("…")


def test_job_line_reads_the_last_line_of_the_job_and_none_without_one() -> None:
    assert job_line(OLD_RECORD).startswith("BatchReadError: topology 't' txid 8 attempt 2: key '506'")
    assert job_line("Error code is: 137.\nkilled") is None
    assert job_line("txdag job failed: oddly shaped") == "oddly shaped"


def test_a_job_failure_names_topology_txid_attempt_and_the_replay_command() -> None:
    said = job_failure("t", TA(8, 2), "ValueError: bad row")
    assert said == ("topology 't' txid 8 attempt 2: the Spark job failed: ValueError: bad row. A transient failure "
                    "is replayed automatically; one that will recur fails the txid: fix the cause, then replay: "
                    "txdag replay t --from 8")


def test_ways_out_of_a_hole_are_restore_accept_and_reset_and_of_anything_else_replay() -> None:
    assert [w["command"] for w in ways_out("t", 8, OLD_RECORD)] == [
        "txdag replay t --from 8", "txdag accept-missing t 8 --confirm --replay", "txdag reset t --confirm"]
    assert [w["command"] for w in ways_out("t", 3, "commit failed: boom")] == ["txdag replay t --from 3"]


def rec(status: TxStatus, *, commit_begun: bool = False) -> TxidRecord:
    r = TxidRecord.new(8, "run8", {"v": 1, "from": 501, "quantity": 10}, "now")
    if status is not TxStatus.EMITTED:
        r = r.moved(status, "now", failed_by=8 if status is TxStatus.FAILED else None)
    return r if not commit_begun else r.moved(TxStatus.COMMITTING, "now").moved(TxStatus.FAILED, "now", failed_by=8)


@pytest.mark.parametrize(("record", "committed", "why"), [
    (rec(TxStatus.COMMITTED), 8, "is committed: its batch is in the states, and accepting ids as missing now "
                                 "would rewrite history"),
    (rec(TxStatus.FAILED), 9, "is committed"),  # below committed_txid whatever its record says
    (None, 9, "is committed"),  # rotated out of ZooKeeper: only committed txids are
    (rec(TxStatus.FAILED, commit_begun=True), 7, "commit has begun, so its batch is frozen"),
    (rec(TxStatus.EMITTED), 7, "is emitted, not failed: a hole is accepted only in a failed txid"),
    (rec(TxStatus.PROCESSED), 7, "is processed, not failed"),
])
def test_accept_missing_is_refused_where_it_would_break_the_guarantee(record, committed, why) -> None:
    assert why in (refusal("t", record, 8, committed) or "")


def test_accept_missing_is_allowed_for_a_failed_txid_on_its_own_or_behind_another() -> None:
    assert refusal("t", rec(TxStatus.FAILED), 8, 7) is None
    behind = TxidRecord.new(8, "run8", {}, "now").moved(TxStatus.FAILED, "now", failed_by=6)
    assert refusal("t", behind, 8, 5) is None


def test_a_missing_module_on_the_executors_says_how_to_ship_it():
    from txdag.txid.failure import with_missing_module

    spark = "An exception was thrown from the Python worker:\nTraceback ...\nModuleNotFoundError: No module named '{}'"
    shipped = with_missing_module(spark.format("txdag.spark"))
    assert shipped.splitlines()[0].endswith("the Python running the job has no 'txdag': on a cluster whose "
                                            "executors have no txdag, ship it with `txdag pyfiles ZIP --python "
                                            "WORKERS_PYTHON` and the topology's spark_conf "
                                            '{"spark.submit.pyFiles": ZIP})')
    assert "install it on every worker" in with_missing_module(spark.format("pyarrow")).splitlines()[0]
    assert "has no 'numpy': install it there" in with_missing_module(spark.format("numpy"))
    assert with_missing_module("KeyError: 'x'") == "KeyError: 'x'"

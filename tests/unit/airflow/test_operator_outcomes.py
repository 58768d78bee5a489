"""The Airflow tasks turn each step outcome into a skip, a reschedule (never holding the pool slot), a failure
without retries, or a result: the mapping, checked without Airflow running (txdag.airflow.operators)."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from functools import partial
from types import SimpleNamespace

import pytest

from txdag.attempt import TransactionAttempt as TA
from txdag.errors import SourceUnavailable
from txdag.protocol import (
    AlreadyCommitted,
    Busy,
    Committed,
    Emission,
    NotReady,
    OwnerChanged,
    Processed,
    Refused,
    SourceDown,
    Superseded,
    Wait,
)

pytestmark = pytest.mark.usefixtures("airflow_home")
TOPOLOGY = SimpleNamespace(topology_id="topo", commit_poke_interval=7)
TASK = SimpleNamespace(log=logging.getLogger("test.operators"))


@pytest.fixture(scope="module")
def ops():
    from airflow.sdk.exceptions import AirflowFailException, AirflowRescheduleException, AirflowSkipException

    from txdag.airflow import operators

    return SimpleNamespace(m=operators, Fail=AirflowFailException, Reschedule=AirflowRescheduleException,
                           Skip=AirflowSkipException)


def refusal(ops, outcome):
    return ops.m.coordinate_refusal(TASK, TOPOLOGY, "run1", outcome)


def test_a_run_with_nothing_to_read_is_skipped(ops) -> None:
    exc = refusal(ops, NotReady("nothing to read"))
    assert isinstance(exc, ops.Skip) and "nothing to read" in str(exc)


def test_a_run_refused_behind_a_failed_txid_fails_without_retries_never_a_green_skip(ops) -> None:
    """It consumed no txid, yet it must be red in the UI: its message names the failed txid and the way out."""
    reason = "no new txid while txid 3 is failed (attempt 2, run 'r3': boom); Ways out: ...: txdag replay t --from 3"
    exc = refusal(ops, Wait(reason, 3, replay=False))
    assert isinstance(exc, ops.Fail) and not isinstance(exc, ops.Skip) and str(exc) == reason


@pytest.mark.parametrize("outcome", [Busy("lock held"), Wait("txid 2 is failed", 2, replay=True)])
def test_a_run_that_waits_is_rescheduled_about_the_poke_interval_later(ops, outcome) -> None:
    exc = refusal(ops, outcome)
    assert isinstance(exc, ops.Reschedule)
    assert 5 < (exc.reschedule_date - datetime.now(UTC)).total_seconds() <= 7


def test_a_run_waiting_for_a_place_among_max_active_transactions_defers_until_the_oldest_settles(ops,
                                                                                                 caplog) -> None:
    """No fixed sleep: a run that finds max_active_transactions txids uncommitted (a backfill ignores the DAG's
    max_active_runs) resumes as soon as the oldest of them commits, or fails (then it is refused, naming it)."""
    from airflow.sdk.exceptions import TaskDeferred

    topology = SimpleNamespace(topology_id="topo", commit_poke_interval=7, zookeeper_conn_id="zk_topo")
    with caplog.at_level(logging.INFO, logger=TASK.log.name):
        exc = ops.m.coordinate_refusal(TASK, topology, "run1", Busy("2 txid(s) uncommitted (txids 5..6)", 5))
    assert isinstance(exc, TaskDeferred) and exc.method_name == "resume"
    assert exc.trigger.serialize() == ("txdag.airflow.triggers.TxidSettled", {
        "topology_id": "topo", "zookeeper_conn_id": "zk_topo", "waiting_on": 5, "limit": 7, "committed_only": False,
        "earliest": None, "deferred_at": pytest.approx(time.time(), abs=30)})
    assert "run=run1: waiting (2 txid(s) uncommitted (txids 5..6)); deferred: back once txid 5 is committed or " \
           "failed, at the latest in 7s" in caplog.text


def test_a_source_down_fails_the_try_so_that_airflow_retries_it(ops) -> None:
    exc = refusal(ops, SourceDown("partition(s) 'b' unreachable"))
    assert isinstance(exc, SourceUnavailable) and not isinstance(exc, ops.Fail)
    assert "partition(s) 'b'" in str(exc)


def test_a_definition_that_is_not_the_owner_fails_without_retries_naming_the_change(ops) -> None:
    exc = refusal(ops, OwnerChanged("state 'words' namespace: 'a' -> 'b'; run `txdag topology accept topo`"))
    assert isinstance(exc, ops.Fail) and "txdag topology accept topo" in str(exc)


EMITTED = {"txid": 4, "attempt": 1, "metadata": {"n": 1}, "replay": False, "already_committed": False,
           "batch_size": 3}


SPARK_SUBMIT_FAILED = (
    "Cannot execute: spark-submit --master local[2] --name txdag-t spark_jobs/job.py --job '{\"v\":1}'. Error code "
    "is: 1.\nLast spark-submit output:\n" + "25/11/24 INFO SparkContext: noise\n" * 5
    + "txdag job failed: topology=t txid=8 attempt=2: BatchReadError: topology 't' txid 8 attempt 2: key '506' is "
    "missing; Ways out: ... `txdag accept-missing t 8 --confirm --replay` ...\n"
    + "25/11/24 INFO ShutdownHookManager: Shutdown hook called\n")


def test_a_failed_spark_submit_raises_txdags_own_error_first(ops) -> None:
    """The provider's exception (the command, the job's JSON, the driver's output) stays behind txdag's message."""
    from airflow.sdk.exceptions import AirflowException

    error = ops.m.submit_failure("t", TA(8, 2), AirflowException(SPARK_SUBMIT_FAILED))
    message = str(error)
    assert message.startswith("topology 't' txid 8 attempt 2: the Spark job failed: BatchReadError: topology 't' "
                              "txid 8 attempt 2: key '506' is missing")
    assert "txdag accept-missing t 8 --confirm --replay" in message and message.endswith("txdag replay t --from 8")
    assert "\n" not in message and "spark-submit --master" not in message and "INFO" not in message


def test_a_spark_submit_that_died_before_the_job_spoke_says_so(ops) -> None:
    from airflow.sdk.exceptions import AirflowException

    died = AirflowException("Cannot execute: spark-submit --job '{}'. Error code is: 137.\nLast spark-submit output:\n"
                            "25/11/24 INFO Executor: noise")
    message = str(ops.m.submit_failure("t", TA(8, 1), died))
    assert "spark-submit failed with exit code 137 before the job could say why" in message
    assert "its output is in this task's log" in message and "Executor" not in message


def test_warm_mode_gives_the_same_shape_of_message(ops) -> None:
    from txdag.errors import BatchReadError

    cause = BatchReadError("topology 't' txid 8 attempt 2: key '506' is missing; Ways out: ...")
    cold = ops.m.submit_failure("t", TA(8, 2), RuntimeError(SPARK_SUBMIT_FAILED))
    warm = ops.m.warm_failure("t", TA(8, 2), cause)
    assert str(warm).startswith("topology 't' txid 8 attempt 2: the Spark job failed: BatchReadError: topology 't' "
                                "txid 8 attempt 2: key '506' is missing")
    assert str(warm).split(": key '506'")[0] == str(cold).split(": key '506'")[0]
    assert str(warm).endswith("txdag replay t --from 8") and type(warm) is type(cold)


def test_processed_pushes_the_attempt_it_processed(ops) -> None:
    reemitted = Emission(TA(4, 2), {"n": 2}, replay=True)
    got = ops.m.process_result(TASK, TOPOLOGY, TA(4, 1), EMITTED, Processed(reemitted))
    assert (got["txid"], got["attempt"], got["metadata"], got["batch_size"]) == (4, 2, {"n": 2}, 3)


def test_process_of_a_committed_txid_passes_the_emission_on(ops) -> None:
    assert ops.m.process_result(TASK, TOPOLOGY, TA(4, 1), EMITTED, AlreadyCommitted(TA(4, 1), "done")) == EMITTED


def test_process_waiting_for_a_key_value_predecessor_defers_until_it_commits(ops, caplog) -> None:
    """No fixed sleep: the process of txid 4 (key-value states read as of txid 3) defers on a trigger that fires
    once txid 3 is committed; a failed txid 3 does not fire it (the step would only wait again), the time limit
    does."""
    from airflow.sdk import BaseOperator
    from airflow.sdk.exceptions import TaskDeferred

    task = SimpleNamespace(log=TASK.log, defer=partial(BaseOperator.defer, None))
    topology = SimpleNamespace(topology_id="topo", commit_poke_interval=7, zookeeper_conn_id="zk_topo")
    with caplog.at_level(logging.INFO, logger=TASK.log.name), pytest.raises(TaskDeferred) as deferred:
        ops.m.process_result(task, topology, TA(4, 1), EMITTED, Wait("read as of txid 3", 3, replay=True))
    assert deferred.value.method_name == "resume"
    assert deferred.value.trigger.serialize() == ("txdag.airflow.triggers.TxidSettled", {
        "topology_id": "topo", "zookeeper_conn_id": "zk_topo", "waiting_on": 3, "limit": 7, "committed_only": True,
        "earliest": None, "deferred_at": pytest.approx(time.time(), abs=30)})
    assert "read as of txid 3; deferred: back once txid 3 is committed, at the latest in 7s" in caplog.text


@pytest.mark.parametrize("kind", ["CoordinateOperator", "ProcessOperator", "WarmProcessOperator", "CommitOperator"])
def test_every_task_that_defers_resumes_by_running_its_step_again(ops, kind) -> None:
    operator = getattr(ops.m, kind)
    assert operator.resume.__qualname__ == f"{kind}.resume"
    calls = []
    fake = SimpleNamespace(execute=lambda context: calls.append(context) or {"txid": 4})
    assert operator.resume(fake, {"run_id": "r"}, {"waiting_on": 3, "why": "settled"}) == {"txid": 4}
    assert calls == [{"run_id": "r"}]


def test_process_and_commit_of_a_changed_definition_wait_writing_nothing(ops, caplog) -> None:
    """A txid coordinated under the owner, whose DAG file changed meanwhile: neither step fails the txid (that would
    cascade); both wait for the change to be accepted or undone, and say so as a warning."""
    changed = OwnerChanged("state 'words' namespace: 'a' -> 'b'; run `txdag topology accept topo`")
    with caplog.at_level(logging.WARNING, logger=TASK.log.name):
        with pytest.raises(ops.Reschedule):
            ops.m.process_result(TASK, TOPOLOGY, TA(4, 1), EMITTED, changed)
        with pytest.raises(ops.Reschedule):
            ops.m.commit_result(TASK, TOPOLOGY, TA(4, 1), changed)
    assert caplog.text.count("txid=4 attempt=1: state 'words' namespace: 'a' -> 'b'") == 2


def test_a_superseded_process_fails_without_retries_with_its_reason(ops) -> None:
    with pytest.raises(ops.Fail, match="txid 4 attempt 1: processed, but the txid moved on"):
        ops.m.process_result(TASK, TOPOLOGY, TA(4, 1), EMITTED,
                             Superseded(TA(4, 1), "topology 'topo' txid 4 attempt 1: processed, but the txid moved on"))


@pytest.mark.parametrize(("outcome", "status", "applied"), [
    (Committed(TA(4, 1), applied=12, skipped=2), "committed", 12),
    (AlreadyCommitted(TA(4, 1), "txid 4 is committed"), "already committed", 0),
])
def test_a_commit_returns_its_status(ops, outcome, status, applied) -> None:
    assert ops.m.commit_result(TASK, TOPOLOGY, TA(4, 1), outcome) == {"txid": 4, "attempt": 1, "status": status,
                                                                        "applied": applied}


def test_a_commit_waiting_for_its_predecessor_defers_until_it_settles(ops, caplog) -> None:
    """No fixed sleep: the commit of txid 4 defers on a trigger that fires once txid 3 is committed or failed (or
    after the poke interval), then runs its step again; a deferred task holds no worker and no pool slot."""
    from airflow.sdk import BaseOperator
    from airflow.sdk.exceptions import TaskDeferred

    task = SimpleNamespace(log=TASK.log, defer=partial(BaseOperator.defer, None))
    topology = SimpleNamespace(topology_id="topo", commit_poke_interval=7, zookeeper_conn_id="zk_topo")
    with caplog.at_level(logging.INFO, logger=TASK.log.name), pytest.raises(TaskDeferred) as deferred:
        ops.m.commit_result(task, topology, TA(4, 1), Wait("txid 4 waits for txid 3 to commit", 3, replay=True))
    assert deferred.value.method_name == "resume"
    assert deferred.value.trigger.serialize() == ("txdag.airflow.triggers.TxidSettled", {
        "topology_id": "topo", "zookeeper_conn_id": "zk_topo", "waiting_on": 3, "limit": 7, "committed_only": False,
        "earliest": None, "deferred_at": pytest.approx(time.time(), abs=30)})
    assert "txid 4 waits for txid 3 to commit; deferred: back once txid 3 is committed or failed, at the latest " \
           "in 7s" in caplog.text


@pytest.mark.parametrize("outcome", [
    Refused(TA(4, 1), "txid 4 (attempt 1) cannot commit: txid 2 failed; replay txid 2 and later", failed_txid=2),
    Refused(TA(4, 1), "txid 4 attempt 1 was never processed (status emitted)"),
    Superseded(TA(4, 1), "txid 4 attempt 1 is stale, the current attempt is 2"),
])
def test_a_refused_commit_fails_without_retries_naming_why(ops, outcome) -> None:
    with pytest.raises(ops.Fail) as failed:
        ops.m.commit_result(TASK, TOPOLOGY, TA(4, 1), outcome)
    assert str(failed.value) == outcome.reason

"""The coordinator's pure rules: commit decisions, cascades, frozen metadata (no ZooKeeper needed)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from txdag.attempt import TransactionAttempt as TA
from txdag.errors import CascadeError, StaleAttemptError
from txdag.spouts.base import SpoutKind
from txdag.txid.coordinator import (
    AlreadyCommitted,
    Go,
    TransactionStateError,
    Wait,
    cascade,
    commit_decision,
    frozen_metadata,
    lowest_failed,
)
from txdag.txid.decisions import NotProcessedError, key_value_wait
from txdag.zk.records import TxidRecord, TxStatus, digest_of

AT = "2024-01-01T00:00:00.000+00:00"


def rec(txid: int, status: TxStatus = TxStatus.PROCESSED, attempt: int = 1, **changes: object) -> TxidRecord:
    base = TxidRecord.new(txid, f"run{txid}", {"n": txid}, AT)
    if attempt != 1:
        changes["attempt"] = attempt
    return base.moved(status, AT, **changes) if status is not TxStatus.EMITTED or changes else base


def records(*recs: TxidRecord) -> dict[int, TxidRecord]:
    return {r.txid: r for r in recs}


def test_next_txid_processed_may_commit() -> None:
    assert commit_decision("t", TA(3, 1), 2, records(rec(3))) == Go(TA(3, 1))


def test_committing_txid_may_commit_again_after_a_crash() -> None:
    assert commit_decision("t", TA(3, 1), 2, records(rec(3, TxStatus.COMMITTING))) == Go(TA(3, 1))


def test_processed_before_its_predecessor_waits_on_it() -> None:
    decision = commit_decision("t", TA(2, 1), 0, records(rec(1, TxStatus.EMITTED), rec(2)))
    assert isinstance(decision, Wait) and decision.waiting_on == 1
    assert "txid 1" in decision.reason


def test_committed_txid_is_a_no_op() -> None:
    assert isinstance(commit_decision("t", TA(2, 1), 2, records(rec(2, TxStatus.COMMITTED))), AlreadyCommitted)
    assert isinstance(commit_decision("t", TA(3, 1), 2, records(rec(3, TxStatus.COMMITTED))), AlreadyCommitted)


def test_stale_attempt_is_refused_naming_the_current_one() -> None:
    with pytest.raises(StaleAttemptError, match="txid 3 attempt 1 is stale, the current attempt is 2"):
        commit_decision("t", TA(3, 1), 2, records(rec(3, attempt=2)))


def test_failed_predecessor_cascades_naming_it() -> None:
    failed = rec(2, TxStatus.FAILED, failed_by=2, error="spark exit 1")
    with pytest.raises(CascadeError, match=r"txid 4 \(attempt 1\) cannot commit: txid 2 failed \(attempt 1: "
                                           r"spark exit 1\); replay txid 2 and later"):
        commit_decision("t", TA(4, 1), 1, records(failed, rec(3), rec(4)))
    with pytest.raises(CascadeError) as refused:
        commit_decision("t", TA(4, 1), 1, records(failed, rec(3), rec(4)))
    assert refused.value.failed_txid == 2, "the outcome of the commit step names the txid to replay first"


def test_own_failure_before_processing_refuses_the_commit() -> None:
    with pytest.raises(CascadeError, match=r"txid 3 \(attempt 1\) cannot commit: it failed \(attempt 1: x\), and "
                                           "attempt 1 failed before its batch was processed: clear its whole run"):
        commit_decision("t", TA(3, 1), 2, records(rec(3, TxStatus.FAILED, failed_by=3, error="x")))


def failed_in_commit(txid: int, **changes: object) -> TxidRecord:
    processed = replace(rec(txid, TxStatus.COMMITTING), planned_on=digest_of({"n": txid - 1}))  # rec's metadata
    return processed.moved(TxStatus.FAILED, AT, **{"failed_by": txid, "error": "redis", **changes})


def test_a_txid_failed_after_processing_commits_when_its_commit_runs_again() -> None:
    committed = rec(2, TxStatus.COMMITTED)
    assert commit_decision("t", TA(3, 1), 2, records(committed, failed_in_commit(3))) == Go(TA(3, 1))
    cascaded = replace(rec(4), planned_on=digest_of({"n": 3})).moved(TxStatus.FAILED, AT, failed_by=3, error="x")
    assert commit_decision("t", TA(4, 1), 3, records(rec(3, TxStatus.COMMITTED), cascaded)) == Go(TA(4, 1)), \
        "failed behind it, processed"
    wait = commit_decision("t", TA(4, 1), 2, records(committed, rec(3, TxStatus.EMITTED), cascaded))
    assert isinstance(wait, Wait) and wait.waiting_on == 3, "not before its predecessor commits"


def test_a_failed_txid_planned_after_another_batch_of_its_predecessor_does_not_commit() -> None:
    replanned = replace(rec(2, TxStatus.COMMITTED), metadata={"n": 2, "more": True})
    with pytest.raises(CascadeError, match="not known to follow txid 2's as it stands"):
        commit_decision("t", TA(3, 1), 2, records(replanned, failed_in_commit(3)))
    old = failed_in_commit(3, planned_on=None)  # a record of a txdag that did not keep planned_on
    with pytest.raises(CascadeError, match="or recorded by an older txdag"):
        commit_decision("t", TA(3, 1), 2, records(rec(2, TxStatus.COMMITTED), old))
    first = failed_in_commit(1, planned_on=None)
    assert commit_decision("t", TA(1, 1), 0, records(first)) == Go(TA(1, 1)), "txid 1 follows nothing"


def test_a_failed_txid_whose_batch_is_void_or_stale_does_not_commit() -> None:
    void = failed_in_commit(4).moved(TxStatus.FAILED, AT, failed_by=3, error="re-emitted", auto_replay=True)
    with pytest.raises(CascadeError, match="planned before txid 3 was re-emitted with another batch: txdag re-emits "
                                           "txid 4 itself once txid 3 commits"):
        commit_decision("t", TA(4, 1), 3, records(void))
    with pytest.raises(StaleAttemptError):
        commit_decision("t", TA(3, 1), 2, records(failed_in_commit(3, attempt=2)))


def test_a_commit_behind_a_failed_txid_names_clearing_its_commit() -> None:
    with pytest.raises(CascadeError, match="txid 3 failed .* or, when txid 3 failed in its commit, clear its commit "
                                           r"task \(with its future runs: this commit waits for it\)") as refused:
        commit_decision("t", TA(4, 1), 2, records(rec(2, TxStatus.COMMITTED), failed_in_commit(3), rec(4)))
    assert refused.value.failed_txid == 3


def test_never_processed_is_an_error() -> None:
    with pytest.raises(TransactionStateError, match="never processed"):
        commit_decision("t", TA(3, 1), 2, records(rec(3, TxStatus.EMITTED)))
    with pytest.raises(NotProcessedError):  # its own class: the commit step refuses it without failing the txid
        commit_decision("t", TA(3, 1), 2, records(rec(3, TxStatus.EMITTED)))


def test_key_value_states_make_processing_wait_for_the_predecessor_commit() -> None:
    wait = key_value_wait("t", TA(5, 2), 3, key_values=True)
    assert isinstance(wait, Wait) and wait.waiting_on == 4 and wait.replay
    assert "txid 5 attempt 2: its key-value states are read as of txid 4, which is not committed yet " \
           "(committed: 3)" in wait.reason


@pytest.mark.parametrize(("committed", "key_values"), [(4, True), (5, True), (9, True), (0, False), (3, False)])
def test_processing_goes_on_when_the_predecessor_is_committed_or_there_is_no_key_value_state(
        committed: int, key_values: bool) -> None:
    assert key_value_wait("t", TA(5, 1), committed, key_values=key_values) is None


def test_the_first_txid_never_waits() -> None:
    assert key_value_wait("t", TA(1, 1), 0, key_values=True) is None


def test_lowest_failed_picks_the_first() -> None:
    recs = [rec(5, TxStatus.FAILED, failed_by=4, error="x"), rec(4, TxStatus.FAILED, failed_by=4, error="x"),
            rec(3)]
    assert lowest_failed(recs).txid == 4  # type: ignore[union-attr]
    assert lowest_failed([rec(3)]) is None


def test_cascade_fails_later_uncommitted_txids_only() -> None:
    later = [rec(2), rec(3, TxStatus.EMITTED), rec(4, TxStatus.FAILED, failed_by=4, error="own"),
             rec(5, TxStatus.COMMITTED), rec(1)]
    failed = cascade(later, failed_by=1, error="txid 1 failed", at=AT)
    assert [r.txid for r in failed] == [2, 3]
    assert all(r.status is TxStatus.FAILED and r.failed_by == 1 and r.error == "txid 1 failed" for r in failed)


def test_metadata_is_frozen_for_transactional_spouts_and_once_a_commit_began() -> None:
    assert frozen_metadata(SpoutKind.TRANSACTIONAL, rec(1, TxStatus.FAILED, failed_by=1, error="x"))
    assert not frozen_metadata(SpoutKind.OPAQUE, rec(1, TxStatus.FAILED, failed_by=1, error="x"))
    assert frozen_metadata(SpoutKind.OPAQUE, rec(1, TxStatus.COMMITTING))
    begun = rec(1, TxStatus.COMMITTING).moved(TxStatus.FAILED, AT, failed_by=1, error="commit failed")
    assert frozen_metadata(SpoutKind.OPAQUE, begun)


def test_a_reemission_with_another_batch_marks_later_txids_for_automatic_replay() -> None:
    from txdag.txid.decisions import cascade

    later = cascade([rec(3), rec(4, TxStatus.EMITTED), rec(5, TxStatus.FAILED, failed_by=5, error="x"),
                     rec(6, TxStatus.COMMITTED)], 2, "why", AT, auto_replay=True)
    assert [(r.txid, r.status, r.failed_by, r.auto_replay) for r in later] == [
        (3, TxStatus.FAILED, 2, True), (4, TxStatus.FAILED, 2, True), (5, TxStatus.FAILED, 2, True)], \
        "a txid failed already is marked too: its batch was planned on the old one"
    assert later[2].error == "why (it had failed: x)", "its own failure is kept in the message"
    assert cascade(later, 2, "again", AT, auto_replay=True) == [], "marked once"
    assert not any(r.auto_replay for r in cascade([rec(3)], 2, "a real failure", AT))
    assert not later[0].moved(TxStatus.EMITTED, AT, attempt=2).auto_replay, "leaving FAILED clears it"


def test_automatic_replays_are_the_marked_txids_right_after_the_commit_in_order() -> None:
    from txdag.txid.decisions import automatic_replays

    marked = [rec(n, TxStatus.FAILED, failed_by=2, error="re-emitted", auto_replay=True) for n in (3, 4)]
    assert [r.txid for r in automatic_replays(2, [marked[1], marked[0]])] == [3, 4]
    assert automatic_replays(1, marked) == [], "not before the txid they follow is committed"
    real = rec(4, TxStatus.FAILED, failed_by=4, error="boom")
    assert [r.txid for r in automatic_replays(2, [marked[0], real])] == [3], "a real failure waits for an operator"
    assert automatic_replays(2, [rec(3)]) == []

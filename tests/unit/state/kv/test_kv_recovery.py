"""What recovery does given each namespace's committed and prepared txids (seed 002 "Recovery"), without a server.
How the scripts' errors read: tests/unit/test_luascripts.py."""

from __future__ import annotations

import pytest

from txdag.state.kv import KVStateError, RecoveryPlan, Txids, plan_recovery


def test_nothing_prepared_nothing_to_do():
    assert plan_recovery([Txids("a", 4, None), Txids("b", 4, None)]) == RecoveryPlan("nothing")
    assert plan_recovery([Txids("a", 0, None)]).action == "nothing"


def test_prepared_everywhere_is_committed():
    plan = plan_recovery([Txids("a", 4, 5), Txids("b", 4, 5)])
    assert plan == RecoveryPlan("commit", 5, ("a", "b"))
    assert "committed txid 5 in a, b" in str(plan)


def test_a_crash_between_two_commits_finishes_the_commit():
    assert plan_recovery([Txids("a", 5, None), Txids("b", 4, 5)]) == RecoveryPlan("commit", 5, ("b",))


def test_a_single_prepared_namespace_is_committed():
    assert plan_recovery([Txids("a", 0, 1)]) == RecoveryPlan("commit", 1, ("a",))


def test_a_crash_during_the_prepare_phase_is_rolled_back():
    plan = plan_recovery([Txids("a", 4, 5), Txids("b", 4, None), Txids("c", 4, 5)])
    assert plan == RecoveryPlan("rollback", 5, ("a", "c"))
    assert "rolled back txid 5" in str(plan) and "not prepared in every namespace" in str(plan)


def test_a_namespace_that_never_saw_earlier_txids_counts_by_its_prepare():
    assert plan_recovery([Txids("old", 9, 10), Txids("new", 0, 10)]).action == "commit"
    assert plan_recovery([Txids("old", 9, 10), Txids("new", 0, None)]).action == "rollback"


def test_impossible_states_are_refused_not_guessed():
    with pytest.raises(KVStateError, match="different prepared txids"):
        plan_recovery([Txids("a", 4, 5), Txids("b", 5, 6)])
    with pytest.raises(KVStateError, match=r"committed in \['b'\].*neither in \['c'\]"):
        plan_recovery([Txids("a", 4, 5), Txids("b", 5, None), Txids("c", 4, None)])

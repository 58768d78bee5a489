"""What recovery does given each namespace's committed and prepared txids (seed 002 "Recovery"), and how the
scripts' errors read, without a server."""

from __future__ import annotations

import pytest
import redis

from txdag.errors import BatchReadError, ConfigError, StaleAttemptError, TxidOrderError
from txdag.state.kv import KVStateError, RecoveryPlan, Txids, plan_recovery
from txdag.state.kv.errors import raise_kv_error


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


@pytest.mark.parametrize(("reply", "kind", "words"), [
    ("TXDAG_KV_BEHIND ns:a 3 7", TxidOrderError, ["txid 3", "txid 7", "ns:a"]),
    ("TXDAG_KV_SERIALIZERS ns:a base64,base64 json,json", ConfigError,
     ["base64,base64", "txdag state migrate ns:a --key-serializer json --value-serializer json"]),
    ("TXDAG_KV_MIGRATING ns:a json,utf8", KVStateError, ["--key-serializer json --value-serializer utf8"]),
    ("TXDAG_KV_OTHER_PREPARED ns:a 4 5", KVStateError, ["txid 4 is prepared", "txid 5 cannot"]),
    ("TXDAG_KV_STALE ns:a 5 1 2", StaleAttemptError, ["attempt 2 of txid 5", "attempt 1 is stale"]),
    ("TXDAG_KV_NOT_STAGED ns:a 5 1", BatchReadError, ["txid 5 attempt 1", "replay txid 5"]),
    ("TXDAG_KV_LOST ns:a 5 1 9 10", BatchReadError, ["holds 9 keys, sealed with 10"]),
    ("TXDAG_KV_NOT_PREPARED ns:a 5 none", KVStateError, ["txid 5 cannot commit", "prepared: none"]),
    ("TXDAG_KV_PREPARED ns:a 5", KVStateError, ["txid 5 is prepared", "then migrate"]),
])
def test_script_errors_name_the_namespace_and_txids(reply, kind, words):
    with pytest.raises(kind) as caught:
        raise_kv_error(redis.ResponseError(f"{reply} script: abc, on @user_script:12."))
    for word in words:
        assert word in str(caught.value)


def test_other_errors_pass_through():
    other = redis.ResponseError("WRONGTYPE Operation against a key")
    with pytest.raises(redis.ResponseError) as caught:
        raise_kv_error(other)
    assert caught.value is other

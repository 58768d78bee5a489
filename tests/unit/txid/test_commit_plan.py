"""What a commit writes is decided without a store (txid.decisions.plan_commit): the staging read before ZooKeeper
decided counts only where the commit goes ahead, the outputs must be the topology's, and the marker must agree."""

from __future__ import annotations

import pytest

from txdag.attempt import TransactionAttempt
from txdag.errors import ConfigError, StoreWentBackwards
from txdag.txid.decisions import AlreadyCommitted, CommitRead, Go, plan_commit

TX = TransactionAttempt(4, 2)
OUTPUTS = {"counts": ("spec", "key")}
STORE = "Redis 127.0.0.1:6391 key 'm'"


def test_a_txid_committed_already_only_deletes_its_staging_whatever_the_read_raised() -> None:
    done = AlreadyCommitted(TX, "committed up to 4")
    plan = plan_commit("t", done, CommitRead({}, 0, ConnectionError("gone")), None, STORE, ["counts"])
    assert plan.done is done and plan.outputs == {}


def test_the_staging_read_error_is_raised_where_the_commit_goes_ahead() -> None:
    missing = ConfigError("no sealed staging")
    with pytest.raises(ConfigError) as raised:
        plan_commit("t", Go(TX), CommitRead({}, 0, missing), 3, STORE, ["counts"])
    assert raised.value is missing


def test_outputs_of_states_the_topology_does_not_have_are_named() -> None:
    read = CommitRead({**OUTPUTS, "gone": ("spec", {}), "also": ("spec", {})}, 10)
    with pytest.raises(ConfigError, match=r"topology 't' .*unknown states \['also', 'gone'\].*\['counts'\]"):
        plan_commit("t", Go(TX), read, 3, STORE, ["counts"])


@pytest.mark.parametrize(("marker", "resumed", "held"), [(3, False, False), (3, True, False), (4, True, True)])
def test_the_marker_says_whether_the_outputs_are_in_already(marker: int, resumed: bool, held: bool) -> None:
    plan = plan_commit("t", Go(TX, resumed), CommitRead(OUTPUTS, 10), marker, STORE, ["counts"])
    assert (plan.tx, plan.outputs, plan.read_bytes, plan.held, plan.resumed, plan.done) == (
        TX, OUTPUTS, 10, held, resumed, None)


@pytest.mark.parametrize(("marker", "resumed"), [(None, False), (2, True), (4, False), (5, True)])
def test_a_marker_that_disagrees_with_zookeeper_halts_before_anything_is_written(marker: int | None,
                                                                                 resumed: bool) -> None:
    with pytest.raises(StoreWentBackwards, match="topology 't'"):
        plan_commit("t", Go(TX, resumed), CommitRead(OUTPUTS, 10), marker, STORE, ["counts"])


def test_without_a_marker_nothing_is_held() -> None:
    assert not plan_commit("t", Go(TX), CommitRead(OUTPUTS), None, None, ["counts"]).held

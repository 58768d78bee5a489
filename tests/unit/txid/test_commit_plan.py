"""What a commit writes is decided without a store (txid.decisions.plan_commit, check_outputs): a txid committed
already only deletes its staging, the marker must agree with ZooKeeper, and the outputs must be the topology's."""

from __future__ import annotations

import pytest

from txdag.attempt import TransactionAttempt
from txdag.errors import ConfigError, StoreWentBackwards
from txdag.txid.decisions import AlreadyCommitted, Go, check_outputs, plan_commit

TX = TransactionAttempt(4, 2)
STORE = "Redis 127.0.0.1:6391 key 'm'"


def test_a_txid_committed_already_only_deletes_its_staging_whatever_the_marker() -> None:
    done = AlreadyCommitted(TX, "committed up to 4")
    plan = plan_commit("t", done, 9, STORE)
    assert plan.done is done and not plan.held


@pytest.mark.parametrize(("marker", "resumed", "held"), [(3, False, False), (3, True, False), (4, True, True)])
def test_the_marker_says_whether_the_outputs_are_in_already(marker: int, resumed: bool, held: bool) -> None:
    plan = plan_commit("t", Go(TX, resumed), marker, STORE)
    assert (plan.tx, plan.held, plan.resumed, plan.done) == (TX, held, resumed, None)


@pytest.mark.parametrize(("marker", "resumed"), [(None, False), (2, True), (4, False), (5, True)])
def test_a_marker_that_disagrees_with_zookeeper_halts_before_anything_is_written(marker: int | None,
                                                                                 resumed: bool) -> None:
    with pytest.raises(StoreWentBackwards, match="topology 't'"):
        plan_commit("t", Go(TX, resumed), marker, STORE)


def test_without_a_marker_nothing_is_held() -> None:
    assert not plan_commit("t", Go(TX), None, None).held


def test_outputs_of_states_the_topology_does_not_have_are_named() -> None:
    check_outputs("t", TX, ["counts"], ["counts", "sink"])
    named = r"topology 't' .*outputs \['also', 'gone'\] are neither states nor sinks .*\['counts'\]"
    with pytest.raises(ConfigError, match=named):
        check_outputs("t", TX, ["counts", "gone", "also"], ["counts"])

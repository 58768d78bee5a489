"""The states' assets on the Airflow side (txdag.airflow.assets): what a DAG schedules on, the commit task's outlet,
the events a commit adds (through Airflow's own outlet-event accessors), and the provider's URI handler."""

from __future__ import annotations

import pytest

from txdag.attempt import TransactionAttempt as TA
from txdag.errors import ConfigError
from txdag.protocol import AlreadyCommitted, Committed, Refused, Wait
from txdag.topology.definition import KeyValue, State, TweetsSource
from txdag.topology.topology import TransactionalTopology

pytestmark = pytest.mark.usefixtures("airflow_home")


@pytest.fixture(scope="module")
def topology(tmp_path_factory) -> TransactionalTopology:
    job = tmp_path_factory.mktemp("job") / "job.py"
    job.write_text("")
    return TransactionalTopology("tweets", source=TweetsSource(), job=str(job),
                                 states=[State("hashtags"), State("users")], key_values=[KeyValue("seen")])


def test_a_states_asset_is_its_uri_by_topology_or_by_id_and_airflows_own_spelling_is_the_same(topology) -> None:
    from airflow.sdk import Asset

    from txdag.airflow import state_asset

    asset = state_asset(topology, "hashtags")
    assert (asset.name, asset.uri) == ("txdag://tweets/hashtags", "txdag://tweets/hashtags")
    assert state_asset("tweets", "hashtags") == asset == Asset("txdag://tweets/hashtags")
    assert state_asset(topology, "seen").uri == "txdag://tweets/seen"  # a key-value state is a state too


def test_a_state_the_topology_does_not_have_is_refused_naming_its_states(topology) -> None:
    from txdag.airflow import state_asset

    with pytest.raises(ConfigError, match=r"topology 'tweets' has no state 'hashtag': its states are "
                                          r"\['hashtags', 'users', 'seen'\]"):
        state_asset(topology, "hashtag")


def test_airflow_refuses_a_txdag_uri_that_names_no_state_through_the_providers_handler() -> None:
    from airflow.sdk import Asset

    with pytest.raises(ValueError, match="names no txdag state"):
        Asset("txdag://tweets")


def test_the_commit_task_declares_the_topologys_alias_as_its_only_outlet(topology) -> None:
    from airflow.sdk import AssetAlias

    from txdag.airflow.rendering import _build

    tasks = _build(topology).task_dict
    assert tasks["commit"].outlets == [AssetAlias("txdag:tweets:commits")]
    assert tasks["coordinate"].outlets == tasks["process"].outlets == []


def added(topology: TransactionalTopology, outcome) -> list[tuple[str, dict]]:
    """The asset events ``announce`` adds, as Airflow's task runner collects them (its own accessors)."""
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from txdag.airflow.assets import announce, commits_alias

    events = OutletEventAccessors()
    announce({"outlet_events": events}, topology, outcome)
    return [(e.dest_asset_key.uri, e.extra) for e in events[commits_alias("tweets")].asset_alias_events]


def test_a_commit_adds_one_event_per_state_naming_the_txid_its_attempt_and_the_keys_written(topology) -> None:
    events = added(topology, Committed(TA(3, 2), applied=5, skipped=2))
    assert events == [(f"txdag://tweets/{s}", {"topology": "tweets", "state": s, "txid": 3, "attempt": 2, "keys": 7})
                      for s in ("hashtags", "users", "seen")]


@pytest.mark.parametrize("outcome", [AlreadyCommitted(TA(3, 3), "txid 3 is committed"), Wait("txid 2", 2),
                                     Refused(TA(3, 1), "txid 2 failed", 2)])
def test_a_replay_of_a_committed_txid_or_a_commit_that_did_not_happen_adds_no_event(topology, outcome) -> None:
    assert added(topology, outcome) == []

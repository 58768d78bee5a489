"""The states' assets on the Airflow side (txdag.airflow.assets): what a DAG schedules on, the commit task's outlet,
the events a commit adds (through Airflow's own outlet-event accessors), and the provider's URI handler."""

from __future__ import annotations

from datetime import timedelta

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

    with pytest.raises(ValueError, match="names no txdag state or source"):
        Asset("txdag://tweets/hashtags/x")


def test_a_topologys_own_uri_is_its_source_asset_as_airflow_spells_it() -> None:
    from airflow.sdk import Asset

    from txdag.airflow.assets import source_asset

    assert source_asset("tweets") == Asset("txdag://tweets") and source_asset("tweets").watchers == []
    assert (source_asset("tweets").name, source_asset("tweets").uri) == ("txdag://tweets", "txdag://tweets/")


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


@pytest.mark.parametrize("schedule, timetable", [(None, "AssetTriggeredTimetable"), ("@hourly", "AssetOrTimeSchedule"),
                                                 ("*/5 * * * *", "AssetOrTimeSchedule")])
def test_a_topology_that_drains_is_scheduled_on_its_source_watched_by_the_triggerer_beside_its_schedule(
        topology, tmp_path, schedule, timetable) -> None:
    from dataclasses import replace

    from txdag.airflow.rendering import _build
    from txdag.airflow.triggers import SourceBacklog
    from txdag.txid.backlog import Backlog

    drains = replace(topology, schedule=schedule, max_active_transactions=3,
                     drain=Backlog(entries=500, wait=timedelta(minutes=2), poll=3))
    dag = _build(drains, str(tmp_path / "tweets.py"))
    assert type(dag.timetable).__name__ == timetable
    if schedule is not None:
        assert dag.timetable.timetable.expression == schedule.replace("@hourly", "0 * * * *")
    [source] = dag.timetable.asset_condition.objects
    assert source.name == "txdag://tweets" and [w.name for w in source.watchers] == ["txdag-tweets-backlog"]
    watcher = source.watchers[0].trigger
    name, kwargs = watcher.serialize()
    assert name == "txdag.airflow.triggers.SourceBacklog"
    assert kwargs == {"topology_id": "tweets", "dag_file": str(tmp_path / "tweets.py"), "entries": 500,
                      "wait_seconds": 120.0, "poll": 3.0, "max_active": 3}
    assert SourceBacklog(**kwargs).serialize() == (name, kwargs)  # the triggerer rebuilds it from these
    assert type(_build(topology, str(tmp_path / "tweets.py")).timetable).__name__ == "NullTimetable"  # as before


def test_a_draining_topologys_schedule_keeps_the_timezone_of_its_start_date(topology, tmp_path) -> None:
    from dataclasses import replace
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from txdag.airflow.rendering import _build
    from txdag.txid.backlog import Backlog

    paris = replace(topology, schedule="0 6 * * *", drain=Backlog(),
                    start_date=datetime(2026, 1, 1, tzinfo=ZoneInfo("Europe/Paris")))
    assert _build(paris, str(tmp_path / "tweets.py")).timetable.timetable.timezone.name == "Europe/Paris"


def test_drain_is_refused_without_the_dag_file_and_as_anything_but_a_backlog(topology) -> None:
    from dataclasses import replace

    from txdag.airflow.rendering import _build
    from txdag.txid.backlog import Backlog

    with pytest.raises(ConfigError, match=r"topology 'tweets': drain needs the DAG file.*dag_file=__file__"):
        _build(replace(topology, drain=Backlog()))
    with pytest.raises(ConfigError, match=r"topology 'tweets': drain must be a txdag.txid.backlog.Backlog"):
        replace(topology, drain=100)


@pytest.mark.parametrize("schedule", ["@once", "@continuous", ["an asset"]])
def test_drain_beside_a_schedule_it_cannot_join_is_refused_naming_what_it_takes(topology, tmp_path, schedule) -> None:
    from dataclasses import replace

    from txdag.airflow.rendering import _build
    from txdag.txid.backlog import Backlog

    with pytest.raises(ConfigError, match=r"with drain, schedule must be None, a cron expression, a preset or a "):
        _build(replace(topology, schedule=schedule, drain=Backlog()), str(tmp_path / "tweets.py"))


@pytest.mark.parametrize(("schedule", "reason"), [("99 * * * *", "out of range"), ("*/0 * * * *", "step '0'"),
                                                  (timedelta(0), "must be positive")])
def test_drain_beside_a_schedule_airflow_cannot_run_is_refused(topology, tmp_path, schedule, reason) -> None:
    """Airflow checks a plain schedule when it loads the DAG, not the timetable inside an asset-or-time schedule,
    whose scheduler would then fail on it: render checks it."""
    from dataclasses import replace

    from txdag.airflow.rendering import _build
    from txdag.txid.backlog import Backlog

    with pytest.raises(ConfigError, match=rf"topology 'tweets': schedule .* is not one Airflow can run: .*{reason}"):
        _build(replace(topology, schedule=schedule, drain=Backlog()), str(tmp_path / "tweets.py"))

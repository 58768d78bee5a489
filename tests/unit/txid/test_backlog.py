"""When a source's backlog starts a txid by itself (txdag.txid.backlog): the definition's checks, and the watch's
decision poll by poll, from what the trigger reads (entries waiting, the last txid begun, txids in flight)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from txdag.errors import ConfigError
from txdag.txid.backlog import REARM_SECONDS, RUN_CREATED_SECONDS, Backlog, BacklogWatch


@pytest.mark.parametrize("kwargs, says", [
    ({"entries": 0}, "entries must be an int >= 1"), ({"entries": True}, "entries must be an int >= 1"),
    ({"wait": 5}, "wait must be a datetime.timedelta >= 0"), ({"wait": timedelta(seconds=-1)}, "wait must be"),
    ({"poll": 0}, "poll must be a finite number of seconds >= 0.1"), ({"poll": 1e-9}, "seconds >= 0.1"),
    ({"poll": "5"}, "poll must be"),
    ({"poll": float("nan")}, "poll must be"), ({"poll": float("inf")}, "poll must be"),
])
def test_a_backlog_that_could_never_fire_sensibly_is_refused_saying_what_to_write(kwargs, says) -> None:
    with pytest.raises(ConfigError, match=says):
        Backlog(**kwargs)


def watch(entries: int = 100, wait: float = 30.0, max_active: int = 2) -> BacklogWatch:
    return BacklogWatch(entries, wait, max_active)


def test_enough_entries_fire_at_once_and_no_entries_never() -> None:
    w = watch()
    assert not w.observe(0.0, 0, 0, 0, 0)
    assert w.observe(1.0, 100, 0, 0, 0)


def test_fewer_entries_fire_once_they_have_waited_the_wait_counted_from_the_poll_that_saw_them() -> None:
    w = watch(wait=30.0)
    assert not w.observe(10.0, 5, 0, 0, 0)
    assert not w.observe(39.0, 5, 0, 0, 0)
    assert w.observe(40.0, 5, 0, 0, 0)


def test_a_source_emptied_meanwhile_starts_the_wait_over() -> None:
    w = watch(wait=30.0)
    assert not w.observe(0.0, 5, 0, 0, 0)
    assert not w.observe(20.0, 0, 0, 0, 0)  # a scheduled run took them
    assert not w.observe(25.0, 5, 0, 0, 0)
    assert not w.observe(50.0, 5, 0, 0, 0)
    assert w.observe(55.0, 5, 0, 0, 0)


def test_no_fire_while_the_topologys_txids_in_flight_are_at_its_maximum() -> None:
    w = watch(max_active=2)
    assert not w.observe(0.0, 500, 7, 2, 2)
    assert w.observe(1.0, 500, 7, 1, 1)


def test_after_a_fire_it_waits_for_that_run_to_begin_its_txid_then_fires_again_for_what_is_left() -> None:
    w = watch(max_active=3)
    assert w.observe(0.0, 500, 7, 0, 0)
    assert not w.observe(1.0, 500, 7, 0, 1)  # the run is queued: another event would start a run for the same batch
    assert not w.observe(2.0, 500, 7, 0, 1)
    assert w.observe(3.0, 400, 8, 1, 1)  # txid 8 began: 400 entries are still waiting


def test_a_fired_run_that_never_came_is_given_up_once_the_dag_has_no_active_run() -> None:
    w = watch()
    assert w.observe(0.0, 500, 7, 0, 0)
    assert not w.observe(1.0, 500, 7, 0, 1)  # its run is queued
    assert not w.observe(RUN_CREATED_SECONDS - 1, 500, 7, 0, 0)  # not created yet, maybe
    assert w.observe(RUN_CREATED_SECONDS, 500, 7, 0, 0)  # a paused DAG (Airflow dropped the event), a failed run


def test_runs_that_never_come_in_a_row_are_given_up_twice_as_late_each_time_until_one_comes() -> None:
    w, t = watch(), 0.0
    for time_to_give_up in (10, 20, 40, 80, 120, 120):  # a DAG that cannot start a run: not an event every 10 s
        assert w.observe(t, 500, 7, 0, 0)
        assert not w.observe(t + time_to_give_up - 1, 500, 7, 0, 0)
        t += time_to_give_up
    assert w.observe(t, 500, 7, 0, 0)
    assert w.observe(t + 1, 400, 8, 1, 1)  # txid 8 began: the next run that never comes is given up at 10 s again
    assert not w.observe(t + 1 + RUN_CREATED_SECONDS - 1, 400, 8, 0, 0)
    assert w.observe(t + 1 + RUN_CREATED_SECONDS, 400, 8, 0, 0)


def test_a_fired_run_that_never_begins_is_given_up_after_the_rearm_time_whatever_else_runs() -> None:
    w = watch(max_active=3)
    assert w.observe(0.0, 500, 7, 0, 0)
    assert not w.observe(REARM_SECONDS - 1, 500, 7, 1, 1)  # another run holds the DAG's slots meanwhile
    assert w.observe(REARM_SECONDS, 500, 7, 1, 1)


def test_no_fire_while_runs_are_active_up_to_the_maximum_even_before_they_begin_their_txids() -> None:
    w = watch(max_active=2)
    assert not w.observe(0.0, 500, 7, 0, 2)  # two runs queued or running, no txid of theirs yet
    assert w.observe(1.0, 500, 7, 0, 1)


def test_no_fire_while_a_txid_after_the_committed_one_has_failed_its_replay_comes_first() -> None:
    w = watch()
    assert not w.observe(0.0, 500, 7, 0, 0, failed=True)  # a new run would be refused behind it
    assert w.observe(1.0, 500, 7, 0, 0, failed=False)


def test_what_is_left_after_a_run_began_waits_anew_before_a_small_batch() -> None:
    w = watch(entries=100, wait=30.0)
    assert w.observe(0.0, 150, 0, 0, 0)
    assert not w.observe(1.0, 50, 1, 1, 1)  # txid 1 took 100; 50 wait, counted from now
    assert not w.observe(30.0, 50, 1, 0, 0)
    assert w.observe(31.0, 50, 1, 0, 0)

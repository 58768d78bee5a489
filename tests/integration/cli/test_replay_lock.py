"""Two replays of one topology (issue 37): the second sees the first. While one clears the runs it holds the
topology's replay lock in ZooKeeper, so another is refused (exit 4) naming it; once it is done, a replay of runs it
set going again is refused too, and allowed once they are not queued or running any more."""

from __future__ import annotations

import threading

import pytest
from test_cli import env, ran, run  # noqa: F401  (fixtures and the runner of the CLI tests)

from txdag.cli import exits

pytestmark = pytest.mark.usefixtures("airflow_home")


class FakeAirflow:
    """Airflow's REST API as far as a replay goes: the runs it clears, and the state each run is in."""

    def __init__(self, state: str = "queued") -> None:
        self.cleared: list[str] = []
        self.state = state
        self.inside = threading.Event()  # a clear is under way
        self.go_on = threading.Event()
        self.go_on.set()

    def clear_run(self, dag_id, run_id, **_):
        self.inside.set()
        assert self.go_on.wait(30)
        self.cleared.append(run_id)

    def run(self, dag_id, run_id):
        return {"dag_run_id": run_id, "state": self.state}


@pytest.fixture
def airflow(monkeypatch):
    fake = FakeAirflow()
    monkeypatch.setattr("txdag.cli.ops.airflow_api", lambda: fake)
    return fake


def test_a_replay_while_another_clears_the_same_runs_is_refused_naming_it(ran, airflow, capsys, prefix):  # noqa: F811
    airflow.go_on.clear()
    first: list[int] = []
    thread = threading.Thread(target=lambda: first.append(run(capsys, "replay", prefix, "--from", "4")[0]))
    thread.start()
    assert airflow.inside.wait(30)
    code, out, err = run(capsys, "replay", prefix, "--from", "4")
    airflow.go_on.set()
    thread.join(30)
    assert code == exits.REFUSED and out == "", out
    assert err.startswith(f"txdag replay: topology {prefix!r}: a replay of it is in progress (txdag replay {prefix} "
                          "--from 4 by "), err
    assert f"Wait for it to finish, then see `txdag status {prefix}`" in err
    assert first == [exits.OK] and airflow.cleared == ["run4", "run5"]  # each run cleared once


def test_a_replay_of_runs_a_replay_set_going_again_is_refused_until_they_stop(ran, airflow, capsys,  # noqa: F811
                                                                              prefix):
    assert run(capsys, "replay", prefix, "--from", "4")[0] == exits.OK
    code, out, err = run(capsys, "replay", prefix, "--from", "4")  # run4 is queued again: the replay is under way
    assert code == exits.REFUSED and airflow.cleared == ["run4", "run5"], out + err
    assert f"topology {prefix!r}: a replay from txid 4 cleared the runs of txids 4..5 at " in err
    assert "txid 4's run run4 is queued again in Airflow: the replay is already under way" in err
    assert f"Wait for it: `txdag status {prefix}`; replay again only if it fails" in err
    assert run(capsys, "replay", prefix, "--from", "5")[0] == exits.REFUSED  # run5 was cleared by it too
    airflow.state = "failed"  # it failed again: a new replay is what helps
    code, out, err = run(capsys, "replay", prefix, "--from", "4")
    assert code == exits.OK and airflow.cleared == ["run4", "run5"] * 2, out + err
    assert run(capsys, "replay", prefix, "--from", "4", "--dry-run")[0] == exits.OK  # a dry run lists, takes no lock

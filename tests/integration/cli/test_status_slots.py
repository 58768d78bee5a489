"""``txdag status TOPOLOGY`` names a run queued behind max_active_runs and the runs that hold the slots, from
Airflow's REST API (a fake of it here: the real one is in the e2e tier); the ZooKeeper side is real."""

from __future__ import annotations

import json

import pytest
from access import ZK_AUTH
from test_cli import env, run  # noqa: F401  (fixtures and the runner of the CLI tests)

from txdag.spouts import SpoutContext
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import append_tweets
from txdag.topology.topology import load_definitions
from txdag.txid.coordinator import Coordinator
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore

pytestmark = pytest.mark.usefixtures("airflow_home")


class FakeAirflow:
    """Airflow's REST API as far as status goes: the DAG's record and its runs in the states asked for."""

    def __init__(self, runs: dict[str, str]) -> None:
        self.states = runs
        self.asked: list[dict] = []

    def dag(self, dag_id):
        return {"dag_id": dag_id, "max_active_runs": 2, "is_paused": False}

    def runs(self, dag_id, **params):
        self.asked.append(params)
        return [{"dag_run_id": r, "state": s} for r, s in self.states.items() if s in params["state"]]


def test_status_names_the_run_queued_behind_max_active_runs_and_the_runs_holding_the_slots(
        env, zk_hosts, zk_root, prefix, tmp_path, capsys, monkeypatch):  # noqa: F811
    append_tweets(env, sample_tweets(50, seed=1), prefix=f"{prefix}:")
    definition = load_definitions(tmp_path / "dags")[0][prefix]
    store = TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root)
    coordinator = Coordinator(store, definition.source.build(SpoutContext(prefix, {"redis_default": env})),
                              max_active_transactions=2)
    coordinator.coordinate("a")  # txid 1: its run cleared by a replay, queued
    coordinator.mark_processed(coordinator.coordinate("b").tx)  # txid 2: its commit waits for txid 1
    airflow = FakeAirflow({"a": "queued", "b": "running", "c": "running", "old": "success"})
    monkeypatch.setattr("txdag.cli.ops.airflow_api", lambda timeout=30.0: airflow)
    code, out, err = run(capsys, "status", prefix)
    assert code == 0 and err == "", err
    assert ("QUEUED: run a (txid 1, being replayed) is queued behind max_active_runs (2): the slots are held by run b "
            "(txid 2: waits on txid 1 to commit first) and run c (coordinating: no txid yet, waiting for a place "
            "among max_active_transactions). It starts when a slot frees: run c gives its slot up") in out
    assert airflow.asked == [{"state": ["queued", "running"]}]
    code, out, _ = run(capsys, "status", prefix, "--json")
    data = json.loads(out)
    assert (data["run_slots"]["queued"], data["run_slots"]["held_by"], data["airflow_error"]) == (["a"], ["b", "c"],
                                                                                                  None)
    assert data["in_flight"][0]["waits_on"] == "its run to start (queued in Airflow)"
    store.client.stop()

"""A topology's states are Airflow assets (issue 35 item 2): a DAG scheduled on ``state_asset(topology, state)``
runs once per committed txid, the txid, its attempt and the keys written in the triggering event's extra; a replay
of a committed txid (its whole run cleared, or its commit task alone) adds no event: the downstream DAG runs again
only for the next txid, and each state's asset holds one event per txid (Airflow's REST API). Each task's
"Transaction" extra link leads to its txid's row on the Transactions page (issue 35 item 3).
"""

from __future__ import annotations

import time

import pytest
import redis
from conftest import REPO, AirflowInstance

from txdag.airflow.api import unique_run_id
from txdag.spouts import append_tweets
from txdag.spouts.samples import sample_tweets

pytestmark = pytest.mark.own_topologies  # no wait for the hour's scheduled runs (conftest)

TOPOLOGY, DOWNSTREAM, PREFIX, BATCH = "assets_tweets", "assets_downstream", "assets:", 20
STATES = ("users", "hashtags", "users_hashtags")
DAG_FILE = f"""# An Airflow DAG: the tweets job, warm, whose states are assets
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology(
    {TOPOLOGY!r},
    source=TweetsSource(prefix={PREFIX!r}, max_transaction_size={BATCH}),
    job={str(REPO / "spark_jobs" / "tweets_analytics.py")!r},
    states=[
        State("users", namespace="assets_users"),
        State("hashtags", namespace="assets_hashtags"),
        State("users_hashtags", key_fields=2, separator=":", namespace="assets_users_hashtags"),
    ],
    spark_mode="connect",
)
dag = render(topology, dag_file=__file__)
"""
DOWNSTREAM_FILE = f"""# An Airflow DAG scheduled on a txdag state: it runs once per committed txid
from airflow.sdk import DAG, task

from txdag.airflow import state_asset

HASHTAGS = state_asset({TOPOLOGY!r}, "hashtags")

with DAG(dag_id={DOWNSTREAM!r}, schedule=[HASHTAGS], tags=["txdag-e2e"]) as dag:

    @task
    def report(**context) -> None:
        print("downstream saw txids", [e.extra["txid"] for e in context["triggering_asset_events"][HASHTAGS]])

    report()
"""


def asset_events(airflow: AirflowInstance, state: str) -> list[dict]:
    """The extras of the events of ``state``'s asset, oldest first."""
    uri = f"txdag://{TOPOLOGY}/{state}"
    # only_active=false: an asset only the commit's alias produces, which no DAG schedules on (users), is marked
    # inactive by Airflow's clean-up of unreferenced assets between two events; its events stay
    found = airflow.api.get("/assets", uri_pattern=uri, only_active="false")["assets"]
    assets = [a for a in found if a["uri"] == uri]
    assert len(assets) == 1, assets
    events = airflow.api.get("/assets/events", asset_id=assets[0]["id"], order_by="timestamp", limit=100)
    return [e["extra"] for e in events["asset_events"]]


def downstream_txids(airflow: AirflowInstance, runs: int, timeout: float = 120) -> list[list[int]]:
    """Once the downstream DAG has ``runs`` finished runs: the txids of each run's triggering events, run by run."""
    deadline = time.monotonic() + timeout
    while True:
        found = airflow.api.runs(DOWNSTREAM)
        if len(found) >= runs and all(r["state"] in ("success", "failed") for r in found):
            break
        assert time.monotonic() < deadline, f"{len(found)} downstream runs, not {runs}, after {timeout} s: {found}"
        time.sleep(1)
    assert {r["state"] for r in found} == {"success"}, found
    seen = {r["dag_run_id"]: [e["extra"]["txid"] for e in airflow.api.get(
        f"/dags/{DOWNSTREAM}/dagRuns/{r['dag_run_id']}/upstreamAssetEvents")["asset_events"]] for r in found}
    print(f"{DOWNSTREAM} runs against the txids of their events: {seen}")  # shown with -s
    return list(seen.values())


def commit_txid(airflow: AirflowInstance) -> str:
    run = airflow.api.trigger(TOPOLOGY, run_id=unique_run_id(TOPOLOGY))
    assert airflow.api.wait_run(TOPOLOGY, run, timeout=300) == "success"
    return run


def test_a_dag_scheduled_on_a_state_runs_once_per_committed_txid_and_never_for_a_replay(airflow: AirflowInstance,
                                                                                        store_of) -> None:
    append_tweets(redis.Redis.from_url(airflow.redis_url), sample_tweets(4 * BATCH, seed=35), prefix=PREFIX)
    airflow.add_dag_file(f"{TOPOLOGY}.py", DAG_FILE)
    downstream = airflow.dags_folder / "extra" / f"{DOWNSTREAM}.py"  # a plain DAG: not for add_dag_file to run
    downstream.with_suffix(".tmp").write_text(DOWNSTREAM_FILE)
    downstream.with_suffix(".tmp").replace(downstream)
    try:
        for dag_id in (TOPOLOGY, DOWNSTREAM):
            airflow.api.wait_dag_parsed(dag_id, timeout=120)
            airflow.api.unpause(dag_id)

        runs = []
        for txid in (1, 2, 3):  # one at a time: Airflow folds the events it finds at once into one run
            runs.append(commit_txid(airflow))
            assert downstream_txids(airflow, txid) == [[t] for t in range(1, txid + 1)]
        first = asset_events(airflow, "hashtags")
        assert [e["txid"] for e in first] == [1, 2, 3] and {e["attempt"] for e in first} == {1}, first
        assert all(e["keys"] > 0 and e["topology"] == TOPOLOGY and e["state"] == "hashtags" for e in first), first
        log = airflow.api.task_log(DOWNSTREAM, airflow.api.runs(DOWNSTREAM)[0]["dag_run_id"], "report")
        assert "downstream saw txids [1]" in log, log[-2000:]
        log = airflow.api.task_log(TOPOLOGY, runs[0], "commit")
        assert "txid=1 attempt=1: an event for the asset of each state (txdag://assets_tweets/users," in log, log
        for txid, run in enumerate(runs, 1):  # each task's "Transaction" link: its txid's row on the page
            row = f"{TOPOLOGY}-txid-{txid}"
            for task in ("coordinate", "process", "commit"):
                links = airflow.api.get(f"/dags/{TOPOLOGY}/dagRuns/{run}/taskInstances/{task}/links")["extra_links"]
                assert links == {"Transaction": f"{airflow.base_url}/txdag/#{row}"}, (task, links)
            page = airflow.api.session.get(f"{airflow.base_url}/txdag/", timeout=60)
            assert page.status_code == 200 and f'<tr id="{row}" data-row-txid="{txid}">' in page.text

        airflow.api.clear_run(TOPOLOGY, runs[1])  # the UI's clear of a committed run: txid 2 is replayed
        assert airflow.api.wait_run(TOPOLOGY, runs[1], timeout=300) == "success"
        airflow.api.clear(TOPOLOGY, runs[2], task_ids=["commit"])  # its commit task alone
        assert airflow.api.wait_run(TOPOLOGY, runs[2], timeout=300) == "success"
        for run in runs[1:]:
            commit_log = airflow.api.task_log(TOPOLOGY, run, "commit",
                                              airflow.api.task_instance(TOPOLOGY, run, "commit")["try_number"])
            assert "already committed" in commit_log and "no asset event" in commit_log, commit_log[-2000:]
        assert store_of(TOPOLOGY).read_txid(2)[0].attempt == 2  # the replay re-emitted txid 2

        runs.append(commit_txid(airflow))  # the next txid: its event, and none for the replays before it
        assert downstream_txids(airflow, 4) == [[1], [2], [3], [4]]
        for state in STATES:
            events = asset_events(airflow, state)
            assert [(e["txid"], e["attempt"]) for e in events] == [(1, 1), (2, 1), (3, 1), (4, 1)], (state, events)
    finally:
        airflow.api.pause(DOWNSTREAM)
        downstream.unlink(missing_ok=True)

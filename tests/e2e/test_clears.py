"""The UI's own ways to replay a failed txid, through the REST API as the UI calls it, and `txdag retry` on a txid
whose run failed while ZooKeeper has it in flight (issue 36 items 3 and 4). A topology of its own with
``retries=0``; e2e_data.FAULTS kills every try of a commit (the commit task retries twice whatever ``retries``
says) and a Spark job once:

- txid 1's commit is killed three times: its run fails, and no callback runs for a killed try, so ZooKeeper still
  has txid 1 committing; txid 2's commit, waiting for it, records the failure (cascade: txid 2 fails too, after it
  was processed). Clearing only ``commit`` of txid 1 with *Future* commits both with the attempts they failed with:
  nothing is processed again;
- txid 3's commit is killed three times: ``txdag status`` names it (its run failed in Airflow) and advises
  ``txdag retry``, which clears the failed commit, which commits it;
- txid 4's Spark job is killed: clearing only ``commit`` changes nothing (Airflow marks it upstream_failed again);
  clearing only ``process`` processes attempt 2 and the run fails again (its commit stays upstream_failed);
  ``txdag retry`` clears that commit, which commits it;
- a run queued behind ``max_active_runs`` is named by ``txdag status`` with the runs that hold the slots;
- txid 5's Spark job is killed with txid 6 in flight: clearing ``coordinate`` with its downstream tasks and *Future*
  (the whole runs) re-emits both and commits them.

docs/operations.md ("The UI's ways to replay") says the same.
"""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime, timedelta

import pytest
import redis
from conftest import REPO, AirflowInstance
from e2e_runs import RUN_TIMEOUT
from support.runs import check_commits, counts

from txdag.airflow.api import unique_run_id
from txdag.analytics.tweets import tweet_partials
from txdag.spouts import append_tweets
from txdag.spouts.samples import sample_tweets
from txdag.zk.records import TxStatus

pytestmark = pytest.mark.own_topologies  # no wait for the hour's scheduled runs (conftest)

TOPOLOGY, PREFIX, BATCH = "e2e_clears", "clears:", 20
DAG_FILE = f"""# An Airflow DAG (Airflow's safe mode parses only files that say so): the tweets job, no retries.
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology(
    {TOPOLOGY!r},
    source=TweetsSource(prefix={PREFIX!r}, max_transaction_size={BATCH}),
    job={str(REPO / "spark_jobs" / "tweets_analytics.py")!r},
    states=[
        State("users", namespace="clears_users"),
        State("hashtags", namespace="clears_hashtags"),
        State("users_hashtags", key_fields=2, separator=":", namespace="clears_users_hashtags"),
    ],
    max_active_transactions=2,
    retries=0,
    schedule=None,
)
dag = render(topology, dag_file=__file__)
"""
STATES = {"users": "clears_users", "hashtags": "clears_hashtags"}


def statuses(store, txids: range) -> dict[int, tuple[TxStatus, int]]:  # noqa: ANN001 - a TransactionStore
    return {t: (r.status, r.attempt) for t, (r, _) in store.read_txids(txids).items()}


def txdag(airflow: AirflowInstance, *args: str) -> subprocess.CompletedProcess:
    """The ``txdag`` command against this Airflow, as a user runs it."""
    env = {**airflow.env, "TXDAG_AIRFLOW_URL": airflow.base_url, "TXDAG_AIRFLOW_PASSWORD": airflow.password}
    return subprocess.run([str(REPO / ".venv" / "bin" / "txdag"), *args], env=env, capture_output=True, text=True,
                          timeout=120)


def tries(airflow: AirflowInstance, run: str, task: str) -> int:
    return len(airflow.api.task_tries(TOPOLOGY, run, task))


def test_clearing_commit_alone_commits_a_failed_txid_and_clearing_process_reprocesses_it(airflow, store_of) -> None:
    api, store = airflow.api, store_of(TOPOLOGY)
    airflow.add_dag_file(f"{TOPOLOGY}.py", DAG_FILE)
    api.wait_dag_parsed(TOPOLOGY, timeout=120)
    api.unpause(TOPOLOGY)
    admin = redis.Redis.from_url(airflow.redis_url)
    tweets = sample_tweets(4 * BATCH, seed=36)
    append_tweets(admin, tweets, prefix=PREFIX)
    base = datetime.now(UTC) - timedelta(minutes=10)
    run: list[str] = []

    def trigger() -> str:
        run.append(api.trigger(TOPOLOGY, logical_date=base + timedelta(seconds=len(run)),
                               run_id=unique_run_id(TOPOLOGY)))
        return run[-1]

    # 1. txid 1's commit killed at every try; txid 2's commit finds txid 1's run failed and records it.
    assert api.wait_run(TOPOLOGY, trigger(), timeout=RUN_TIMEOUT) == "failed"
    assert statuses(store, range(1, 2)) == {1: (TxStatus.COMMITTING, 1)}, "no callback runs for a killed try"
    assert api.wait_run(TOPOLOGY, trigger(), timeout=RUN_TIMEOUT) == "failed"
    assert statuses(store, range(1, 3)) == {1: (TxStatus.FAILED, 1), 2: (TxStatus.FAILED, 1)}
    assert any(h.status is TxStatus.PROCESSED for h in store.read_txid(2)[0].history)  # type: ignore[index]
    cleared = api.clear(TOPOLOGY, run[0], task_ids=["commit"], include_future=True)
    assert {(ti["dag_run_id"], ti["task_id"]) for ti in cleared} == {(run[0], "commit"), (run[1], "commit")}
    assert [api.wait_run(TOPOLOGY, r, timeout=RUN_TIMEOUT) for r in run] == ["success", "success"]
    assert statuses(store, range(1, 3)) == {1: (TxStatus.COMMITTED, 1), 2: (TxStatus.COMMITTED, 1)}
    assert [tries(airflow, r, "process") for r in run] == [1, 1], "nothing was processed again"

    # 2. txid 3's commit killed at every try: `txdag retry` clears the failed commit, which commits it.
    assert api.wait_run(TOPOLOGY, trigger(), timeout=RUN_TIMEOUT) == "failed"
    assert statuses(store, range(3, 4)) == {3: (TxStatus.COMMITTING, 1)}
    status = txdag(airflow, "status", TOPOLOGY)
    assert "its run failed in Airflow and nothing recorded that here (its last commit try killed" in status.stdout and (
        f"txdag retry {TOPOLOGY} 3") in status.stdout, status.stdout + status.stderr
    retry = txdag(airflow, "retry", TOPOLOGY, "3")
    assert retry.returncode == 0 and "commit try 3 (failed" in retry.stdout and " cleared" in retry.stdout, \
        retry.stdout + retry.stderr
    assert api.wait_run(TOPOLOGY, run[2], timeout=RUN_TIMEOUT) == "success"
    assert statuses(store, range(3, 4)) == {3: (TxStatus.COMMITTED, 1)}

    # 3. txid 4's Spark job killed: clearing only its commit changes nothing; clearing only process processes it
    # (attempt 2), its commit stays upstream_failed; `txdag retry` clears that commit, which commits it.
    assert api.wait_run(TOPOLOGY, trigger(), timeout=RUN_TIMEOUT) == "failed"
    assert statuses(store, range(4, 5)) == {4: (TxStatus.FAILED, 1)}
    api.clear(TOPOLOGY, run[3], task_ids=["commit"])
    assert api.wait_run(TOPOLOGY, run[3], timeout=RUN_TIMEOUT) == "failed"
    assert api.task_instance(TOPOLOGY, run[3], "commit")["state"] == "upstream_failed"
    assert statuses(store, range(4, 5)) == {4: (TxStatus.FAILED, 1)}
    api.clear(TOPOLOGY, run[3], task_ids=["process"])  # without its downstream commit: processed, not committed
    assert api.wait_run(TOPOLOGY, run[3], timeout=RUN_TIMEOUT) == "failed"
    assert api.task_instance(TOPOLOGY, run[3], "commit")["state"] == "upstream_failed"
    assert statuses(store, range(4, 5)) == {4: (TxStatus.PROCESSED, 2)}
    retry = txdag(airflow, "retry", TOPOLOGY, "4")
    assert retry.returncode == 0 and "commit try" in retry.stdout and "(upstream_failed" in retry.stdout, \
        retry.stdout + retry.stderr
    assert api.wait_run(TOPOLOGY, run[3], timeout=RUN_TIMEOUT) == "success"
    assert statuses(store, range(4, 5)) == {4: (TxStatus.COMMITTED, 2)}

    check_commits(store, expected_last=4)

    # 4. Two runs hold both run slots (their coordinate waits for the pool, held at 0 slots); a third is queued:
    # `txdag status` names the wait and the runs that hold the slots.
    api.update_pool(f"txdag_{TOPOLOGY}", 0)
    try:
        holders = [trigger(), trigger()]
        deadline = time.monotonic() + RUN_TIMEOUT
        while {api.run(TOPOLOGY, r)["state"] for r in holders} != {"running"}:
            assert time.monotonic() < deadline, f"runs {holders} never started"
            time.sleep(0.5)
        queued = trigger()
        status = txdag(airflow, "status", TOPOLOGY)
    finally:
        api.update_pool(f"txdag_{TOPOLOGY}", 1)
    holding = " and ".join(f"run {r} (coordinating: no txid yet)" for r in sorted(holders))
    assert (f"QUEUED: run {queued} (a new run, no txid yet) is queued behind max_active_runs (2): the slots are held "
            f"by {holding}") in status.stdout, status.stdout + status.stderr
    assert [api.wait_run(TOPOLOGY, r, timeout=RUN_TIMEOUT) for r in run[4:]] == ["success"] * 3, "nothing to read"

    # 5. txid 5's Spark job killed while txid 6 is in flight: clearing coordinate with its downstream tasks and
    # Future (the whole runs of txids 5 and 6) re-emits both, in txid order, and commits them.
    more = sample_tweets(2 * BATCH, seed=37)
    append_tweets(admin, more, prefix=PREFIX)
    tweets += more
    pair = [trigger(), trigger()]
    assert [api.wait_run(TOPOLOGY, r, timeout=RUN_TIMEOUT) for r in pair] == ["failed", "failed"]
    assert {t: status for t, (status, _) in statuses(store, range(5, 7)).items()} == {
        5: TxStatus.FAILED, 6: TxStatus.FAILED}, "txid 6 was allocated beside txid 5 and failed with it"
    cleared = api.clear(TOPOLOGY, pair[0], task_ids=["coordinate"], include_downstream=True, include_future=True)
    assert {(ti["dag_run_id"], ti["task_id"]) for ti in cleared} == {
        (r, task) for r in pair for task in ("coordinate", "process", "commit")}
    assert [api.wait_run(TOPOLOGY, r, timeout=RUN_TIMEOUT) for r in pair] == ["success", "success"]
    assert statuses(store, range(5, 7)) == {5: (TxStatus.COMMITTED, 2), 6: (TxStatus.COMMITTED, 2)}
    check_commits(store, expected_last=6)
    truth = tweet_partials(tweets)
    for state, key in STATES.items():
        assert counts(admin, key) == {k[0]: n for k, n in truth[state].items()}, state
    fired = {f"commit-{TOPOLOGY}-1-1#3", f"commit-{TOPOLOGY}-3-1#3", f"process-{TOPOLOGY}-4-1",
             f"process-{TOPOLOGY}-5-1"}
    assert fired <= airflow.fired_faults()
    admin.close()

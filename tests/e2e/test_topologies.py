"""The shipped topologies end to end: real Airflow scheduler, real spark-submit, real Redis and ZooKeeper.

For each: the committed state equals the ground truth computed here from the loaded data, commits are in
strictly increasing txid order with no gap, processing of two txids overlapped, and replays change nothing.
The tweets topology also survives txid 3's Spark job dying mid-batch (the fault plan in e2e_data.FAULTS), its
scheduler killed, its Spark driver killed, and a hung process task retried with ``txdag retry``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from conftest import REPO, AirflowInstance
from e2e_data import running_sum_truth
from e2e_runs import (
    RUN_TIMEOUT,
    kill_spark_driver,
    overlapped,
    process_intervals,
    run_of_txid,
    settle,
    trigger_until_drained,
    txdag_replay,
    wait_runs,
)
from support.runs import check_commits

from txdag.airflow.api import unique_run_id
from txdag.airflow.lineage import redis_namespace
from txdag.commit.newvalues import values_key
from txdag.spouts import append_tweets
from txdag.spouts.samples import sample_sentences, sample_tweets
from txdag.state.keys import JoinedKeyCodec
from txdag.state.redis_backing import aux_key


@pytest.fixture
def state_redis(airflow: AirflowInstance) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(airflow.redis_url, decode_responses=True)
    yield client
    client.close()


def hash_counts(client: redis.Redis, key: str) -> dict[str, int]:
    return {field: int(value) for field, value in client.hgetall(key).items()}


def test_tweets_analytics_exactly_once_through_a_crash_and_replays(airflow, store_of, state_redis) -> None:
    dag = "tweets_analytics"
    airflow.api.wait_dag_parsed(dag, timeout=120)
    scheduled = [r for r in settle(airflow, dag) if r["run_type"] == "scheduled"]
    # the run the scheduler creates when it comes up, and a second one when the session has crossed the hour since
    assert 1 <= len(scheduled) <= 2, scheduled
    store = store_of(dag)
    assert store.read_topology()[0].committed_txid == len(scheduled), "each scheduled run emits one batch"

    manual = trigger_until_drained(airflow, dag, at_once=2)
    records = check_commits(store, 5)
    truth = airflow.sources.tweets_truth()
    pair = JoinedKeyCodec(":", 2)  # compared as key tuples; a pair the codec refuses is a rejection, never stored
    expected_pairs = {key: n for key, n in truth["users_hashtags"].items() if pair.clash(key) is None}
    assert hash_counts(state_redis, "users") == {k[0]: n for k, n in truth["users"].items()}
    assert hash_counts(state_redis, "hashtags") == {k[0]: n for k, n in truth["hashtags"].items()}
    assert {pair.decode(f): n for f, n in hash_counts(state_redis, "users_hashtags").items()} == expected_pairs
    assert state_redis.get("LAST_COMMITED_TRANSACTION") == "5"

    assert overlapped(process_intervals(airflow, dag, manual)), "no two txids were processed at the same time"

    # txid 3's first attempt died inside its Spark job; its retry processed attempt 2, and txid 4 waited.
    crashed = records[3]
    assert crashed.attempt == 2 and [h.attempt for h in crashed.history][0] == 1
    run3, run4 = run_of_txid(records, 3), run_of_txid(records, 4)
    assert airflow.api.task_instance(dag, run3, "process")["try_number"] == 2
    assert "TXDAG FAULT process topology=tweets_analytics txid=3 attempt=1" in airflow.api.task_log(
        dag, run3, "process", 1)
    commit4 = airflow.api.task_log(dag, run4, "commit", airflow.api.task_instance(dag, run4, "commit")["try_number"])
    assert "txid=4" in commit4 and "committed" in commit4
    # txid 1's process task died after staging (its retry re-emitted attempt 2); txid 5's commit task died
    # after recording the commit (its retry found it committed and only cleaned up).
    assert {"staged-tweets_analytics-1-1", "committed-tweets_analytics-5-1"} <= airflow.fired_faults()
    run1 = run_of_txid(records, 1)
    assert records[1].attempt == 2 and airflow.api.task_instance(dag, run1, "process")["try_number"] == 2
    run5 = run_of_txid(records, 5)
    assert records[5].attempt == 1 and airflow.api.task_instance(dag, run5, "commit")["try_number"] == 2
    commit5 = airflow.api.task_log(dag, run5, "commit", 2)
    assert "txid=5" in commit5 and "already committed" in commit5

    # Clear a committed run: it replays its txid (attempt + 1) and changes no count.
    before = {k: hash_counts(state_redis, k) for k in ("users", "hashtags", "users_hashtags")}
    run2 = run_of_txid(records, 2)
    airflow.api.clear_run(dag, run2)
    wait_runs(airflow, dag, [run2])
    assert store.read_txid(2)[0].attempt == records[2].attempt + 1
    # as the README says: the process task processes nothing, the commit task writes nothing
    replayed = {task: airflow.api.task_log(dag, run2, task, airflow.api.task_instance(dag, run2, task)["try_number"])
                for task in ("process", "commit")}
    assert "committed already; nothing to process" in replayed["process"], replayed["process"][-2000:]
    assert "already committed (0 keys written" in replayed["commit"], replayed["commit"][-2000:]
    # Clear with Future from txid 4's run (its logical date is before txid 5's): both replay, nothing changes.
    cleared = airflow.api.clear(dag, run4, include_future=True)
    assert {ti["dag_run_id"] for ti in cleared} >= {run4, run_of_txid(records, 5)}
    wait_runs(airflow, dag, [run4, run_of_txid(records, 5)])
    assert store.read_txid(5)[0].attempt == records[5].attempt + 1
    assert {k: hash_counts(state_redis, k) for k in before} == before

    # txdag's own "replay from txid N" clears by txid, whatever the runs' logical dates.
    attempts = {t: store.read_txid(t)[0].attempt for t in (4, 5)}
    replay = txdag_replay(airflow, dag, 4)
    assert f"txid 4: clearing run {run4}" in replay and "txid 5: clearing run" in replay
    wait_runs(airflow, dag, [run4, run_of_txid(records, 5)])
    assert {t: store.read_txid(t)[0].attempt for t in (4, 5)} == {t: a + 1 for t, a in attempts.items()}
    assert {k: hash_counts(state_redis, k) for k in before} == before
    assert state_redis.get("LAST_COMMITED_TRANSACTION") == "5"
    check_commits(store, 5)


def test_word_count_opaque_streams_exactly_once(airflow, store_of, state_redis) -> None:
    dag = "word_count"
    airflow.api.wait_dag_parsed(dag, timeout=120)
    settle(airflow, dag)
    manual = trigger_until_drained(airflow, dag, at_once=2)
    records = check_commits(store_of(dag), 5)
    assert hash_counts(state_redis, "word_count") == dict(airflow.sources.words_truth())
    assert overlapped(process_intervals(airflow, dag, manual))
    # txid 2's coordinate task died holding the lock (its retry re-emitted the same batch, so txid 3 stayed
    # valid); txid 3's commit task died between the state write and the record (its retry wrote nothing twice).
    assert {"coordinate-word_count-2-1", "commit-word_count-3-1"} <= airflow.fired_faults()
    run2, run3 = run_of_txid(records, 2), run_of_txid(records, 3)
    assert airflow.api.task_instance(dag, run2, "coordinate")["try_number"] == 2 and records[2].attempt == 2
    assert airflow.api.task_instance(dag, run3, "commit")["try_number"] == 2 and records[3].attempt == 1
    # cold mode's OpenLineage: each process task read the two streams and is for the state (lineage.py)
    namespace, db = redis_namespace(airflow.redis_url)
    events = airflow.lineage_events(f"{dag}.process", len(records))
    assert len(events) >= len(records) and all(
        sorted((d["namespace"], d["name"]) for d in e["inputs"]) == [(namespace, f"{db}/sentences:0"),
                                                                     (namespace, f"{db}/sentences:1")]
        and [(d["namespace"], d["name"]) for d in e["outputs"]] == [("txdag://word_count", "words")]
        for e in events), events[-1:]


def test_global_count_backfill_drains_the_backlog(airflow, store_of, state_redis) -> None:
    """A backfill of three days, two runs at a time, over a backlog of two txids: the two txids are processed at
    the same time and committed in order; the third run consumes no txid. The backlog is topped up to two txids
    first: a session that crossed midnight UTC gave the @daily DAG a second scheduled run, which took 50 tuples."""
    dag, store = "global_count", store_of("global_count")
    airflow.api.wait_dag_parsed(dag, timeout=120)
    settle(airflow, dag)
    committed = store.read_topology()[0].committed_txid
    add_counted(airflow, 2 * 50 - (len(airflow.sources.counted) - int(state_redis.hget(dag, "$GLOBAL$") or 0)))
    backfill = airflow.api.backfill(dag, "2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z", max_active_runs=2)
    assert backfill["max_active_runs"] == 2
    runs = [r for r in settle(airflow, dag) if r.get("run_type") == "backfill"]
    assert len(runs) == 3 and {r["state"] for r in runs} == {"success"}, runs
    records = check_commits(store, committed + 2)
    assert state_redis.hget(dag, "$GLOBAL$") == str(len(airflow.sources.counted))
    assert state_redis.hget(aux_key(dag, "txid"), "$GLOBAL$") == str(committed + 2)
    backfilled = [records[t].run_id for t in (committed + 1, committed + 2)]
    assert set(backfilled) <= {r["dag_run_id"] for r in runs}, f"txids taken by runs outside the backfill: {backfilled}"
    assert overlapped(process_intervals(airflow, dag, backfilled)), "the backfill processed one txid at a time"


def add_counted(airflow: AirflowInstance, count: int) -> None:
    """Append ``count`` sentences to global_count's source, and to the ground truth."""
    assert count >= 0, f"global_count has more than two txids waiting ({count} tuples too many)"
    more = sample_sentences(count, seed=31)
    with redis.Redis.from_url(airflow.redis_url) as client:
        append_tweets(client, more, prefix="global_count:")
    airflow.sources.counted += more


def add_tweets(airflow: AirflowInstance, count: int, seed: int) -> None:
    """Append ``count`` sample tweets to the source, and to the ground truth the tests compare the state with."""
    more = sample_tweets(count, seed=seed)
    with redis.Redis.from_url(airflow.redis_url) as client:
        append_tweets(client, more)
    airflow.sources.tweets += more


def test_scheduler_killed_with_runs_in_flight(airflow, store_of, state_redis) -> None:
    """The scheduler and its local workers die (SIGKILL) while a txid is processed; restarted, it finishes."""
    dag, store = "tweets_analytics", store_of("tweets_analytics")
    committed = store.read_topology()[0].committed_txid
    add_tweets(airflow, 150, seed=12)
    base = datetime.now(UTC) - timedelta(minutes=1)
    runs = [airflow.api.trigger(dag, logical_date=base + timedelta(seconds=i), run_id=unique_run_id(dag))
            for i in range(2)]
    deadline = time.monotonic() + RUN_TIMEOUT
    while not any(airflow.api.task_instance(dag, r, "process")["state"] == "running" for r in runs):
        assert time.monotonic() < deadline, "no process task started"
        time.sleep(1)
    in_flight = [r for r in runs if airflow.api.task_instance(dag, r, "process")["state"] == "running"]
    script = ["bash", str(REPO / "scripts" / "airflow.sh")]
    crash = subprocess.run([*script, "crash", "scheduler"], env=airflow.env, capture_output=True, text=True)
    assert crash.returncode == 0 and "killed scheduler" in crash.stdout, crash.stdout + crash.stderr
    time.sleep(5)
    restart = subprocess.run([*script, "restart", "scheduler"], env=airflow.env, capture_output=True, text=True)
    assert restart.returncode == 0, restart.stdout + restart.stderr

    wait_runs(airflow, dag, runs)
    tries = {r: airflow.api.task_instance(dag, r, "process")["try_number"] for r in in_flight}
    print(f"process tries of the runs in flight when the scheduler died: {tries}")
    records = check_commits(store, committed + 2)
    truth = airflow.sources.tweets_truth()
    assert hash_counts(state_redis, "hashtags") == {k[0]: n for k, n in truth["hashtags"].items()}
    assert hash_counts(state_redis, "users") == {k[0]: n for k, n in truth["users"].items()}
    assert all(records[t].run_id in runs for t in (committed + 1, committed + 2))


def test_spark_driver_killed_by_signal(airflow, store_of, state_redis) -> None:
    """SIGKILL to the Spark driver of a running txid: the process task fails, its retry runs attempt 2."""
    dag, store = "tweets_analytics", store_of("tweets_analytics")
    committed = store.read_topology()[0].committed_txid
    add_tweets(airflow, 60, seed=13)
    run = airflow.api.trigger(dag, logical_date=datetime.now(UTC) - timedelta(seconds=30), run_id=unique_run_id(dag))
    kill_spark_driver(dag, committed + 1)

    wait_runs(airflow, dag, [run])
    assert airflow.api.task_instance(dag, run, "process")["try_number"] == 2
    records = check_commits(store, committed + 1)
    assert records[committed + 1].attempt == 2 and records[committed + 1].run_id == run
    truth = airflow.sources.tweets_truth()
    assert hash_counts(state_redis, "hashtags") == {k[0]: n for k, n in truth["hashtags"].items()}
    assert hash_counts(state_redis, "users") == {k[0]: n for k, n in truth["users"].items()}


def _children(pid: int) -> list[int]:
    """``pid`` and every process below it (from /proc's parent links)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo += parents.get(tree[-1], [])
    return tree


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def test_retry_command_restarts_a_hung_process_task(airflow, store_of, state_redis) -> None:
    """A process task that hangs (SIGSTOP) while its supervisor still heartbeats is, to Airflow, a healthy running
    task that nothing would retry. ``txdag retry`` marks it failed and clears it; its next try processes a new
    attempt and commits; the stopped try, resumed, changes nothing (issue 20)."""
    dag, store = "tweets_analytics", store_of("tweets_analytics")
    committed = store.read_topology()[0].committed_txid
    add_tweets(airflow, 80, seed=21)
    run = airflow.api.trigger(dag, logical_date=datetime.now(UTC) - timedelta(seconds=20), run_id=unique_run_id(dag))
    deadline = time.monotonic() + RUN_TIMEOUT
    while not (ti := airflow.api.task_instance(dag, run, "process"))["state"] == "running" or not ti.get("pid"):
        assert time.monotonic() < deadline, f"the process task never ran: {ti}"
        time.sleep(0.5)
    time.sleep(3)  # into its spark-submit
    stopped = _children(ti["pid"])
    _signal(stopped, signal.SIGSTOP)
    try:
        env = {**airflow.env, "TXDAG_AIRFLOW_URL": airflow.base_url, "TXDAG_AIRFLOW_PASSWORD": airflow.password}
        txdag = str(REPO / ".venv" / "bin" / "txdag")
        status = subprocess.run([txdag, "status", dag], env=env, capture_output=True, text=True, timeout=120)
        assert status.returncode == 0 and "its process task (attempt 1)" in status.stdout, status.stdout + status.stderr
        retry = subprocess.run([txdag, "retry", dag, str(committed + 1)], env=env, capture_output=True, text=True,
                               timeout=120)
        print(retry.stdout, retry.stderr)
        assert retry.returncode == 0, retry.stdout + retry.stderr
        assert "process try 1 (running" in retry.stdout and "marked failed and cleared" in retry.stdout
        wait_runs(airflow, dag, [run])
    finally:
        _signal(stopped, signal.SIGCONT)
    assert airflow.api.task_instance(dag, run, "process")["try_number"] == 2
    records = check_commits(store, committed + 1)
    assert records[committed + 1].attempt == 2 and records[committed + 1].run_id == run
    time.sleep(10)  # the resumed try: its supervisor learns it is failed at its next heartbeat; it writes nothing
    truth = airflow.sources.tweets_truth()
    assert hash_counts(state_redis, "hashtags") == {k[0]: n for k, n in truth["hashtags"].items()}
    assert hash_counts(state_redis, "users") == {k[0]: n for k, n in truth["users"].items()}
    again = subprocess.run([txdag, "retry", dag, str(committed + 1)], env=env, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 4 and "is committed" in again.stderr, again.stdout + again.stderr


def test_no_log_shows_a_password(airflow) -> None:
    """Last in this file, after the topologies ran: their task logs exist, and no log under AIRFLOW_HOME (task
    logs, the components' logs) shows the Redis user's, the Redis admin's or the ZooKeeper digest's password."""
    task_logs = [p for p in (airflow.home / "logs").rglob("*") if p.is_file() and "task_id=process" in str(p)]
    assert task_logs, "no process task log: run this test with a topology test (e.g. -k 'global_count or password')"
    assert airflow.secrets and airflow.logs_showing_a_password() == []


def test_trending_hashtags_window_is_exact_through_replays_in_the_middle(airflow, store_of, state_redis) -> None:
    """Seed 001's windows through Airflow: each commit closes the window of the last 3 batches; txid 2's Spark
    job dies mid-batch, txid 4's commit dies after the window append; then txids 3..last are replayed. It reads
    the tweets at keys 1..N, as tweets_analytics does: the tests before it may have appended some."""
    dag = "trending_hashtags"
    airflow.api.wait_dag_parsed(dag, timeout=120)
    settle(airflow, dag)
    trigger_until_drained(airflow, dag, at_once=2)
    store = store_of(dag)
    last = -(-len(airflow.sources.tweets) // 100)  # batches of 100
    assert last >= 5
    records = check_commits(store, last)
    assert {"process-trending_hashtags-2-1", "commit-trending_hashtags-4-1"} <= airflow.fired_faults()
    assert records[2].attempt == 2 and records[4].attempt == 1
    run4 = run_of_txid(records, 4)
    assert airflow.api.task_instance(dag, run4, "commit")["try_number"] == 2

    truth = airflow.sources.tweets_truth()
    assert hash_counts(state_redis, "trending_hashtags:counts") == {k[0]: n for k, n in truth["hashtags"].items()}
    trending = json.loads(state_redis.hget("trending_hashtags:top", "$GLOBAL$"))
    assert (trending["id"], trending["start"], trending["end"], trending["txid"]) == (last, last - 2, last, last)
    assert trending["rows"] == airflow.sources.trending_truth(batch=100, last=3, top=10)
    windows = state_redis.xrange(values_key(dag, "trending"))
    assert [entry_id for entry_id, _ in windows] == [f"{t}-1" for t in range(1, last + 1)], "one window per txid"

    before = (hash_counts(state_redis, "trending_hashtags:counts"), state_redis.hget("trending_hashtags:top",
                                                                                     "$GLOBAL$"))
    env = {**airflow.env, "TXDAG_AIRFLOW_URL": airflow.base_url, "TXDAG_AIRFLOW_PASSWORD": airflow.password}
    # The README's read of the window's last value: `txdag state get trending_hashtags trending`
    got = subprocess.run([str(REPO / ".venv" / "bin" / "txdag"), "state", "get", dag, "trending", "--json",
                          "--dags", str(REPO / "dags")], env=env, capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    assert [row["value"] for row in json.loads(got.stdout)["values"]] == [trending], got.stdout
    txdag_replay(airflow, dag, 3)
    wait_runs(airflow, dag, [run_of_txid(records, t) for t in range(3, last + 1)])
    assert (hash_counts(state_redis, "trending_hashtags:counts"), state_redis.hget("trending_hashtags:top",
                                                                                   "$GLOBAL$")) == before
    assert len(state_redis.xrange(values_key(dag, "trending"))) == last
    check_commits(store, last)


def test_a_stateful_step_survives_a_restart_between_prepare_and_commit(airflow, store_of, state_redis) -> None:
    """Seed 002 through Airflow: txid 2's commit task is killed with its key-value state prepared and not
    committed; its retry recovers (commits the prepared txid) and the running counts stay exact. Two runs at a
    time: a txid's processing waits for the previous commit, so each step reads the state as of txid - 1."""
    from txdag.state.kv import KeyValueState

    dag = "e2e_stateful"
    airflow.api.wait_dag_parsed(dag, timeout=120)
    trigger_until_drained(airflow, dag, at_once=2)
    records = check_commits(store_of(dag), 3)
    assert "prepared-e2e_stateful-2-1" in airflow.fired_faults()
    run2 = run_of_txid(records, 2)
    assert airflow.api.task_instance(dag, run2, "commit")["try_number"] == 2
    assert "key-value recovery: committed txid 2" in airflow.api.task_log(dag, run2, "commit", 2)
    # txid 2's process (triggered with txid 1's) reads the state as of txid 1, whose spark-submit job takes seconds:
    # it waited deferred on the triggerer, holding no slot, and processed once txid 1 had committed
    log2 = airflow.api.task_log(dag, run2, "process", airflow.api.task_instance(dag, run2, "process")["try_number"])
    assert "deferred: back once txid 1 is committed" in log2, log2[-3000:]
    assert "txid=2 attempt=1: processing 40 tuples" in log2.split("deferred: back once txid 1", 1)[1], log2[-3000:]

    truth, expected_sum = running_sum_truth(airflow.sources.stateful, batch=40)
    with redis.Redis.from_url(airflow.redis_url) as admin:
        assert dict(KeyValueState(admin, "e2e_stateful:counts").items()) == dict(truth)
    assert state_redis.hget("e2e_stateful:running_sum", "$GLOBAL$") == str(expected_sum)

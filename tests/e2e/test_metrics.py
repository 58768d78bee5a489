"""txdag's metrics while a topology runs (issue 35 item 1): the figures a Prometheus scraper reads at ``/txdag/metrics``
of the API server (with ``[txdag] metrics_token``, or an Airflow user's token), and the events the tasks send through
Airflow's own StatsD client (``[metrics] statsd_on``, to a UDP port this test listens on, as a StatsD server does).
Both move as txids commit.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import redis
import requests
from conftest import REPO, AirflowInstance
from prometheus_client.parser import text_string_to_metric_families

from txdag.airflow.api import unique_run_id
from txdag.airflow.lineage import redis_namespace
from txdag.spouts import append_tweets
from txdag.spouts.samples import sample_tweets
from txdag.topology.definition import TweetsSource

pytestmark = pytest.mark.own_topologies  # no wait for the hour's scheduled runs (conftest)

TOPOLOGY, PREFIX, BATCH = "metrics_tweets", "metrics:", 15
DAG_FILE = f"""# An Airflow DAG: a warm topology whose figures a scraper reads
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology(
    {TOPOLOGY!r},
    source=TweetsSource(prefix={PREFIX!r}, max_transaction_size={BATCH}),
    job={str(REPO / "spark_jobs" / "tweets_analytics.py")!r},
    states=[
        State("users", namespace="metrics_users"),
        State("hashtags", namespace="metrics_hashtags"),
        State("users_hashtags", key_fields=2, separator=":", namespace="metrics_users_hashtags"),
    ],
    spark_mode="connect",
)
dag = render(topology, dag_file=__file__)
"""


def scrape(airflow: AirflowInstance, token: str | None, topology: str = TOPOLOGY) -> dict[str, float]:
    """The topology's samples of one scrape: ``name`` or ``name{phase}`` -> value."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    answer = requests.get(f"{airflow.base_url}/txdag/metrics", headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4"), answer.headers
    (artifacts() / "metrics-scrape.txt").write_text(answer.text)  # the last scrape, as docs/operations.md shows one
    return {sample.name + (f"{{{sample.labels['phase']}}}" if "phase" in sample.labels else ""): sample.value
            for family in text_string_to_metric_families(answer.text) for sample in family.samples
            if sample.labels.get("topology") == topology}


def artifacts() -> Path:
    path = Path(os.environ.get("TXDAG_TEST_ARTIFACTS") or REPO / "tests" / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


class StatsdServer:
    """What a StatsD server receives on a UDP port, read as it arrives: Airflow's scheduler sends many datagrams a
    second, which would fill a socket's buffer read only at the end (later datagrams, the tasks', dropped)."""

    def __init__(self, port: int) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", port))
        self.socket.settimeout(0.2)
        self.lines: list[str] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.receive, daemon=True)
        self.thread.start()

    def receive(self) -> None:
        while not self.stopped.is_set():
            try:
                self.lines += self.socket.recv(65535).decode().splitlines()
            except TimeoutError:
                continue

    def close(self) -> list[str]:
        self.stopped.set()
        self.thread.join()
        self.socket.close()
        return self.lines


def test_the_figures_and_events_move_as_txids_commit(airflow: AirflowInstance) -> None:
    token = airflow.env["AIRFLOW__TXDAG__METRICS_TOKEN"]
    statsd = StatsdServer(int(airflow.env["AIRFLOW__METRICS__STATSD_PORT"]))
    try:
        append_tweets(redis.Redis.from_url(airflow.redis_url), sample_tweets(3 * BATCH, seed=351), prefix=PREFIX)
        airflow.add_dag_file(f"{TOPOLOGY}.py", DAG_FILE)
        airflow.api.wait_dag_parsed(TOPOLOGY, timeout=120)
        airflow.api.pause(TOPOLOGY)
        deadline = time.monotonic() + 60  # the API server re-reads the DAG folder's definitions every 30 s
        while "txdag_up" not in (before := scrape(airflow, token)):
            assert time.monotonic() < deadline, f"{TOPOLOGY} not scraped after 60 s: {before}"
            time.sleep(2)
        assert before["txdag_up"] == 1 and before["txdag_committed_txid"] == 0, before
        assert before["txdag_lag_entries"] == 3 * BATCH and before["txdag_paused"] == 1, before
        assert not any(k.startswith("txdag_txid_phase_seconds") for k in before), before

        airflow.api.unpause(TOPOLOGY)
        runs = [unique_run_id(TOPOLOGY), unique_run_id(TOPOLOGY)]
        for run in runs:  # one at a time: each run commits the next txid
            airflow.api.trigger(TOPOLOGY, run_id=run)
            assert airflow.api.wait_run(TOPOLOGY, run, timeout=300) == "success"

        after = scrape(airflow, token)
        assert after["txdag_up"] == 1 and after["txdag_committed_txid"] == 2 == after["txdag_last_txid"], after
        assert after["txdag_lag_entries"] == BATCH and after["txdag_txids_in_flight"] == 0, after
        assert after["txdag_txids_failed"] == 0 and after["txdag_paused"] == 0, after
        assert after["txdag_commits_per_minute"] > 0 and after["txdag_rejected_entries"] == 0, after
        phases = {k: v for k, v in after.items() if k.startswith("txdag_txid_phase_seconds")}
        assert set(phases) == {f"txdag_txid_phase_seconds{{{p}}}" for p in ("process", "wait", "commit", "total")}
        assert 0 < phases["txdag_txid_phase_seconds{process}"] < phases["txdag_txid_phase_seconds{total}"], phases

        assert scrape(airflow, airflow.api.session.headers["Authorization"][7:]) == after  # a user's token too
        refused = requests.get(f"{airflow.base_url}/txdag/metrics", timeout=60)
        assert refused.status_code == 401 and "metrics_token" in refused.json()["detail"], refused.text
        wrong = requests.get(f"{airflow.base_url}/txdag/metrics", headers={"Authorization": "Bearer nope"}, timeout=60)
        assert wrong.status_code in (401, 403), wrong.text

        time.sleep(1)  # the last UDP datagrams of the commit tasks
        sent: dict[str, list[str]] = defaultdict(list)
        lines = statsd.close()
        (artifacts() / "metrics-statsd.txt").write_text("\n".join(line for line in lines if line.startswith(
            ("airflow.txdag.", f"airflow.dag.{TOPOLOGY}."))))
        for line in lines:
            name, _, value = line.partition(":")
            sent[name].append(value)
        keys = sum(int(v.split("|")[0]) for v in sent[f"airflow.txdag.commit_keys.{TOPOLOGY}"])
        assert sent[f"airflow.txdag.txids_committed.{TOPOLOGY}"] == ["1|c", "1|c"], dict(sent)
        assert sent[f"airflow.txdag.committed_txid.{TOPOLOGY}"] == ["1|g", "2|g"], dict(sent)
        ours = sent[f"airflow.txdag.commit_keys.{TOPOLOGY}"]
        # the tagged name too, for each commit (plain StatsD drops the tag: another topology's commits may be there)
        tagged = Counter(sent["airflow.txdag.commit_keys"])
        assert keys > 0 and len(ours) == 2 and not Counter(ours) - tagged, dict(sent)
        for task in ("coordinate", "process", "commit"):  # each phase's duration: Airflow's own, per task
            assert len(sent[f"airflow.dag.{TOPOLOGY}.{task}.duration"]) == 2, (task, dict(sent))
        written = [re.search(r"committed \((\d+) keys written, \d+ already held this txid, (\d+) bytes staged\)",
                             airflow.api.task_log(TOPOLOGY, r, "commit")) for r in runs]
        assert all(written) and keys == sum(int(m.group(1)) for m in written if m), (keys, written)
        sizes = [int(v.split("|")[0]) for v in sent[f"airflow.txdag.commit_bytes.{TOPOLOGY}"]]
        assert len(sizes) == 2 and all(b > 0 for b in sizes), dict(sent)
        assert sizes == [int(m.group(2)) for m in written if m], (sizes, written)
        check_lineage(airflow, runs)
    finally:
        statsd.close()
        airflow.api.pause(TOPOLOGY)


def check_lineage(airflow: AirflowInstance, runs: list[str]) -> None:
    """Each process task's OpenLineage event (the provider's file transport): the tweets' keys it read (the tweets
    and the two counters), the states it staged partials for, and the Spark Connect job it ran as; no password in
    any event."""
    done = airflow.lineage_events(f"{TOPOLOGY}.process", len(runs))
    assert len(done) == len(runs), f"{len(done)} OpenLineage COMPLETE events of {TOPOLOGY}.process"
    namespace, db = redis_namespace(airflow.redis_url)
    for event in done:
        assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [
            (namespace, f"{db}/{p}") for p in TweetsSource(prefix=PREFIX).acl_patterns()], event["inputs"]
        assert not any(d["inputFacets"] for d in event["inputs"]), event["inputs"]  # 3 datasets: no one's rowCount
        outputs = {d["name"]: d for d in event["outputs"]}
        assert {(d["namespace"], name) for name, d in outputs.items()} == {
            (f"txdag://{TOPOLOGY}", s) for s in ("users", "hashtags", "users_hashtags")}, event["outputs"]
        assert outputs["users"]["outputFacets"]["outputStatistics"]["rowCount"] > 0, outputs
        query = event["run"]["facets"]["externalQuery"]
        assert query["externalQueryId"].startswith(f"txdag:{TOPOLOGY}:") and query["source"].startswith("sc://"), query
    text = (airflow.home / "openlineage.jsonl").read_text()
    assert not [secret for secret in airflow.secrets if secret and secret in text], "a password in OpenLineage events"
    (artifacts() / "openlineage-process.json").write_text(json.dumps(done[-1], indent=2))


def test_a_topology_whose_redis_hangs_is_down_and_the_scrape_still_answers_within_the_scrapers_timeout(
        airflow: AirflowInstance, second_redis) -> None:
    """A stopped (SIGSTOP) Redis accepts connections and never answers: the scrape reads every topology at once and
    answers within Prometheus' timeout (its header), the hung topology's ``txdag_up 0``, the others' figures read;
    the transactions page shows that topology did not answer and the others' txids."""
    token, hung = airflow.env["AIRFLOW__TXDAG__METRICS_TOKEN"], "metrics_hung"
    airflow.api.request("POST", "/connections", json={
        "connection_id": "metrics_hung_redis", "conn_type": "redis", "host": "127.0.0.1", "port": second_redis.port,
        "extra": json.dumps({"db": 0})})
    airflow.add_dag_file(f"{hung}.py", DAG_FILE.replace(repr(TOPOLOGY), repr(hung)).replace(
        f"prefix={PREFIX!r}", f"prefix={PREFIX!r}, redis_conn_id='metrics_hung_redis'").replace(
        'spark_mode="connect",', 'spark_mode="connect", redis_conn_id="metrics_hung_redis",'))
    deadline = time.monotonic() + 60  # the API server re-reads the DAG folder's definitions every 30 s
    while (found := scrape(airflow, token, hung)).get("txdag_up") != 1:
        assert time.monotonic() < deadline, f"{hung} not scraped after 60 s: {found}"
        time.sleep(2)
    assert found["txdag_lag_entries"] == 0, found  # its Redis answered: nothing in it
    second_redis.freeze(True)
    try:
        answer = requests.get(f"{airflow.base_url}/txdag/metrics", timeout=10, headers={
            "Authorization": f"Bearer {token}", "X-Prometheus-Scrape-Timeout-Seconds": "10"})
        assert answer.status_code == 200, answer.text
        up = {s.labels["topology"]: s.value for family in text_string_to_metric_families(answer.text)
              for s in family.samples if s.name == "txdag_up"}
        assert up[hung] == 0 and up[TOPOLOGY] == 1, up
        shown = requests.get(f"{airflow.base_url}/txdag/", timeout=20,  # the page waits 10 s at most for one
                             headers={"Authorization": airflow.api.session.headers["Authorization"]})
        assert shown.status_code == 200 and "did not answer within 10 s" in shown.text, shown.text[-2000:]
        assert f"{TOPOLOGY}-txid-2" in shown.text  # the other topology's rows are shown
    finally:
        second_redis.freeze(False)

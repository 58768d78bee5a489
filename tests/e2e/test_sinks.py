"""A sink of the user's own through the real Airflow path (issue 33 item 3): examples/jsonl_sink.py, saved as a
module beside the DAG files as a user would, gets each txid's rows at its commit, in txid order, from a Spark job in
Connect mode; a committed run cleared from the UI, and a commit task cleared alone, replay the txid without a second
copy in the sink. The sink's files hold exactly the tweets' words, txid by txid, and the state counts them once.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import redis
from conftest import REPO, AirflowInstance
from e2e_runs import run_of_txid, trigger_until_drained
from support.runs import check_commits, counts

from txdag.spouts import append_tweets
from txdag.spouts.samples import sample_tweets

pytestmark = pytest.mark.own_topologies  # no wait for the hour's scheduled runs (conftest)

TOPOLOGY, PREFIX, BATCH, TXIDS = "sink_words", "sink_words:", 10, 3


def job_file(folder: Path) -> str:
    return f"""# A Spark job: words counted into a state, and every (tweet id, word) to the user's file sink
from jsonl_sink import JsonLinesSink
from pyspark.sql import functions as F

from txdag import trident as td
from txdag.spark import main


def process(batch):
    words = batch.select("id", F.explode(F.split("value", " ")).alias("word")).where(F.col("word") != "")
    return {{"words": words.groupBy("word").count(), "audit": td.commit_to(words, JsonLinesSink({str(folder)!r}))}}


if __name__ == "__main__":
    main(process)
"""


def dag_file(job: Path) -> str:
    return f"""# An Airflow DAG: a topology whose commit writes a state and the user's own sink
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import Sink, State, TweetsSource

topology = TransactionalTopology(
    {TOPOLOGY!r},
    source=TweetsSource(prefix={PREFIX!r}, max_transaction_size={BATCH}),
    job={str(job)!r},
    states=[State("words", namespace={PREFIX + "words"!r})],
    sinks=[Sink("audit")],
    spark_mode="connect",
    max_active_transactions=2,
)
dag = render(topology, dag_file=__file__)
"""


def sink_files(folder: Path) -> dict[str, list[tuple[str, str]]]:
    return {p.name: [tuple(row) for row in map(json.loads, p.read_text().splitlines())]
            for p in sorted(folder.glob("txid-*.jsonl"))}


def test_a_users_sink_gets_each_txid_once_in_txid_order_through_airflow_and_its_replays(
        airflow: AirflowInstance, store_of, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (airflow.dags_folder / "jsonl_sink.py").write_text((REPO / "examples" / "jsonl_sink.py").read_text())
    monkeypatch.syspath_prepend(str(airflow.dags_folder))  # as Airflow's components have it (add_dag_file reads it)
    client = redis.Redis.from_url(airflow.redis_url)
    tweets = sample_tweets(TXIDS * BATCH, seed=33)
    ids = append_tweets(client, tweets, prefix=PREFIX)
    job, folder = tmp_path / "words_to_sink.py", tmp_path / "sink"
    job.write_text(job_file(folder))
    airflow.add_dag_file(f"{TOPOLOGY}.py", dag_file(job))
    airflow.api.wait_dag_parsed(TOPOLOGY, timeout=120)
    airflow.api.unpause(TOPOLOGY)

    trigger_until_drained(airflow, TOPOLOGY, at_once=2)
    records = check_commits(store_of(TOPOLOGY), TXIDS)
    words = [(str(i), w) for i, tweet in zip(ids, tweets, strict=True) for w in tweet.split(" ") if w]  # ids: text
    batches = {t: [str(i) for i in ids[(t - 1) * BATCH:t * BATCH]] for t in range(1, TXIDS + 1)}
    by_txid = {f"txid-{t}-1.jsonl": [(i, w) for i, w in words if i in batches[t]] for t in batches}
    assert sink_files(folder) == by_txid
    assert counts(client, f"{PREFIX}words") == dict(Counter(w for _, w in words))

    run2, run3 = run_of_txid(records, 2), run_of_txid(records, 3)
    airflow.api.clear_run(TOPOLOGY, run2)  # the UI's clear of a committed run: txid 2 replayed, already committed
    assert airflow.api.wait_run(TOPOLOGY, run2, timeout=300) == "success"
    airflow.api.clear(TOPOLOGY, run3, task_ids=["commit"])  # its commit task alone
    assert airflow.api.wait_run(TOPOLOGY, run3, timeout=300) == "success"
    assert sink_files(folder) == by_txid, "a replay of a committed txid wrote the sink again"
    assert counts(client, f"{PREFIX}words") == dict(Counter(w for _, w in words))
    log = airflow.api.task_log(TOPOLOGY, run3, "commit", 1)
    assert f"sink 'audit' (JsonLinesSink): {len(by_txid['txid-3-1.jsonl'])} rows committed to the sink" in log, log

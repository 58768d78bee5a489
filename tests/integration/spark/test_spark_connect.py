"""Warm mode: the jobs of spark_jobs/ run on a real Spark Connect server (scripts/spark-connect.sh) stage exactly
what the Python reference (and the spark-submit path of test_spark_jobs.py) stages."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from airflow.sdk.exceptions import AirflowTaskTimeout
from airflow.sdk.execution_time.timeout import timeout
from pyspark.errors import PySparkException
from spark_support import JOBS_DIR, ROOT, TWEET_STATES, WORD_STATES, expected_fields
from support.cli_project import dag_folder
from support.servers import free_port

from txdag import TransactionAttempt
from txdag.airflow.operators import WarmProcessOperator
from txdag.analytics.tweets import tweet_partials
from txdag.cli import exits
from txdag.cli.main import main
from txdag.errors import BatchReadError, ConfigError, ServiceUnavailable
from txdag.spark.connect import (
    connect_session,
    interrupt_job,
    job_tag,
    load_process,
    run_connected,
    shared_session,
    shared_session_url,
)
from txdag.spark.warm import ROWS
from txdag.spouts import SpoutContext, append_tweets
from txdag.spouts.samples import sample_sentences, sample_tweets
from txdag.spouts.streams import StreamPartition, append_entries
from txdag.staging.store import Staging
from txdag.topology.definition import JobSpec, State, StreamsSource, TweetsSource
from txdag.topology.topology import TransactionalTopology

pytestmark = pytest.mark.integration

# One txid's job in a process of its own, as an Airflow task runs it: spec JSON, job path, Redis URL, Connect URL.
RUN_ONE_TXID = """
import logging, sys, redis
from txdag.topology.definition import JobSpec
from txdag.spark.connect import run_connected
logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
spec = JobSpec.from_json(sys.argv[1])
print(run_connected(spec, sys.argv[2], {"redis_default": redis.Redis.from_url(sys.argv[3])}, sys.argv[4]).summary())
"""


def clients(redis_client):
    return {"redis_default": redis_client}


@pytest.mark.parametrize("txid", [1, 2])
def test_tweets_analytics_on_spark_connect_stages_the_reference(connect_url, redis_client, tweets_spec, txid):
    """Two txids in a row: the second reuses the warm server (the point of the mode)."""
    tweets = sample_tweets(200, seed=20 + txid) + ["", "@a@b #x! #x!", "#a.b* @u:#v"]
    spec = tweets_spec(tweets, txid=txid)
    result = run_connected(spec, str(JOBS_DIR / "tweets_analytics.py"), clients(redis_client), connect_url)
    reference = tweet_partials(tweets)
    expected = {s.name: expected_fields(s, reference[s.name]) for s in TWEET_STATES}
    assert Staging(redis_client, spec.topology).read(spec.tx) == expected
    assert (result.batch_size, result.rejected) == (len(tweets), 0)
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ, "a warm job must not turn the process into a Connect one"


def expected_staging(tweets):
    reference = tweet_partials(tweets)
    return {s.name: expected_fields(s, reference[s.name]) for s in TWEET_STATES}


def test_the_txids_of_a_topology_share_one_session_that_outlives_each_task(connect_url, prefix, monkeypatch):
    """What a task leaves in the session (here a temp view) is there for the next txid: the server kept it."""
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")  # set by pyspark on a Connect session; undone after
    first = shared_session(connect_url, prefix)
    first.range(5).createOrReplaceTempView("left_by_txid_1")
    first_id = first.session_id
    first.stop()
    second = shared_session(connect_url, prefix)
    try:
        assert second.session_id == first_id == shared_session_url(connect_url, prefix).rsplit("=", 1)[1]
        assert second.table("left_by_txid_1").count() == 5
    finally:
        second.stop()


def test_the_shared_session_is_one_whichever_os_user_opens_it(connect_url, prefix, monkeypatch):
    """The server keys a session by user and id: a `txdag warm` run by an operator and the tasks run by Airflow's
    user must meet in one session (the client would send each its own OS user)."""
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")  # set by pyspark on a Connect session; undone after
    monkeypatch.setenv("SPARK_USER", "an-operator")
    first = shared_session(connect_url, prefix)
    first.range(3).createOrReplaceTempView("left_by_the_operator")
    first.stop()
    monkeypatch.setenv("SPARK_USER", "airflow")
    second = shared_session(connect_url, prefix)
    try:
        assert second.table("left_by_the_operator").count() == 3
    finally:
        second.stop()


def test_a_session_the_server_closed_gives_way_to_the_next_generation(connect_url, redis_client, tweets_spec,
                                                                      monkeypatch):
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")  # set by pyspark on a Connect session; undone after
    tweets = sample_tweets(50, seed=31)
    spec = tweets_spec(tweets)
    closed = connect_session(shared_session_url(connect_url, spec.topology))
    closed.stop()  # released: the server refuses this id from now on, as after its idle timeout
    with pytest.raises(PySparkException, match="SESSION_CLOSED"):
        connect_session(shared_session_url(connect_url, spec.topology))
    run_connected(spec, str(JOBS_DIR / "tweets_analytics.py"), clients(redis_client), connect_url)
    assert Staging(redis_client, spec.topology).read(spec.tx) == expected_staging(tweets)
    reopened = shared_session(connect_url, spec.topology)
    try:
        assert reopened.session_id == shared_session_url(connect_url, spec.topology, generation=1).rsplit("=", 1)[1]
    finally:
        reopened.stop()


def test_two_txids_processed_at_once_in_the_shared_session(connect_url, redis_url, redis_client, prefix):
    """max_active_transactions > 1: two tasks (processes) run their jobs in the topology's one session at once."""
    tweets = {txid: sample_tweets(300, seed=40 + txid) for txid in (1, 2)}
    ids = {txid: append_tweets(redis_client, batch, prefix=f"{prefix}:") for txid, batch in tweets.items()}
    source = TweetsSource(max_transaction_size=300, prefix=f"{prefix}:")
    specs = {txid: JobSpec(prefix, TransactionAttempt(txid, 1), {"v": 1, "from": ids[txid][0], "quantity": 300},
                           source, TWEET_STATES) for txid in tweets}
    job = str(JOBS_DIR / "tweets_analytics.py")
    running = [subprocess.Popen([sys.executable, "-c", RUN_ONE_TXID, spec.to_json(), job, redis_url, connect_url],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for spec in specs.values()]
    outputs = [p.communicate(timeout=300)[0] for p in running]
    assert [p.returncode for p in running] == [0, 0], "\n".join(outputs)
    session = shared_session_url(connect_url, prefix).rsplit("=", 1)[1]
    assert all(f"Spark Connect session {session}" in out for out in outputs), "\n".join(outputs)
    staging = Staging(redis_client, prefix)
    for txid, spec in specs.items():
        assert staging.read(spec.tx) == expected_staging(tweets[txid])


def test_word_count_on_spark_connect(connect_url, redis_client, prefix):
    sentences = {f"{prefix}:s1": sample_sentences(60, seed=8) + ["  a  b ", "#x.* a"],
                 f"{prefix}:s2": sample_sentences(40, seed=9)}
    for stream, values in sentences.items():
        append_entries(StreamPartition(stream, redis_client, stream), values)
    source = StreamsSource(tuple(sentences), opaque=True)
    metadata = source.build(SpoutContext(prefix, clients(redis_client))).initialize_transaction(1, None)
    spec = JobSpec(prefix, TransactionAttempt(1, 1), metadata, source, WORD_STATES)
    run_connected(spec, str(JOBS_DIR / "word_count.py"), clients(redis_client), connect_url)
    words = Counter(w for values in sentences.values() for s in values for w in s.split(" ") if w)
    assert Staging(redis_client, prefix).read(spec.tx) == {"words": dict(words)}


def test_a_server_that_is_down_is_named_with_how_to_start_it():
    url = f"sc://127.0.0.1:{free_port()}"
    with pytest.raises(ServiceUnavailable) as caught:
        connect_session(url)
    assert url in str(caught.value) and "bash scripts/spark-connect.sh start" in str(caught.value)


@pytest.mark.parametrize(("options", "named"), [
    ("-XX:TieredStopAtLevl=1", "Unrecognized VM option 'TieredStopAtLevl=1'"),  # Spark's launcher would ignore it
    ("-XX:TieredStopAtLevel=1 -Xss1k", "The Java thread stack size specified is too small"),
    ('-Dtxdag.note="two words" -XX:Bogus=1', "Unrecognized VM option 'Bogus=1'"),  # split as Spark splits them
    ("-Xms2g", "Initial heap size set to a larger value than the maximum heap size"),  # beside the -Xmx1g it gets
])
def test_java_options_the_jvm_refuses_stop_the_server_before_it_starts(options, named):
    """scripts/spark-connect.sh asks the JVM about TXDAG_SPARK_CONNECT_JAVA_OPTIONS first: a misspelled option is
    named (spark-submit runs the driver with -XX:+IgnoreUnrecognizedVMOptions, which would drop it in silence), and
    nothing is started."""
    port = free_port()
    env = {**os.environ, "TXDAG_SPARK_CONNECT_PORT": str(port), "TXDAG_SPARK_CONNECT_JAVA_OPTIONS": options,
           "TXDAG_SPARK_CONNECT_MEMORY": "1g"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "spark-connect.sh"), "start"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done
    said = " ".join(done.stderr.split())
    assert f"the JVM refuses the Connect server's options (TXDAG_SPARK_CONNECT_JAVA_OPTIONS='{options}', -Xmx1g" \
           in said and named in said, said
    assert not (ROOT / ".run" / f"spark-connect-{port}").exists()


def test_a_heap_among_the_java_options_is_refused_for_the_memory_setting():
    """spark-submit refuses -Xmx in the driver's Java options (its log would say so once the server is gone):
    spark-connect.sh says it first, and which setting holds the heap."""
    env = {**os.environ, "TXDAG_SPARK_CONNECT_PORT": str(free_port()), "TXDAG_SPARK_CONNECT_JAVA_OPTIONS": "-Xmx2g"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "spark-connect.sh"), "start"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "the driver's heap is TXDAG_SPARK_CONNECT_MEMORY's" in done.stderr, done


def test_a_job_file_without_process_is_refused(tmp_path):
    job = tmp_path / "job.py"
    job.write_text("def main():\n    pass\n")
    with pytest.raises(ConfigError, match="defines no process"):
        load_process(str(job))
    with pytest.raises(ConfigError, match="not a local file"):
        load_process("s3://bucket/job.py")


WARM_DAG_FILE = """
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology("{topo}", source=TweetsSource(prefix="{topo}:"), job="spark_jobs/job.py",
                                 states=[State("users", namespace="{topo}:users")], spark_mode="connect")
dag = render(topology, dag_file=__file__)
"""


def test_txdag_warm_readies_the_session_the_topologys_txids_then_share(connect_url, redis_client, tweets_spec,
                                                                       prefix, tmp_path, monkeypatch, capsys, caplog):
    """The README's `txdag warm`: the warm-up job runs in the topology's shared session of today (its Python workers
    count what it sent them), and the first txid after it runs in that same session, staging what it must."""
    dag_folder(monkeypatch, tmp_path, prefix, WARM_DAG_FILE)
    assert main(["warm", prefix, "--url", connect_url, "--json"]) == 0
    warmed = json.loads(capsys.readouterr().out)
    expected_session = shared_session_url(connect_url, prefix).rsplit("=", 1)[1]
    assert (warmed["topology"], warmed["session"]) == (prefix, expected_session)
    assert warmed["rows"] == len({f"user{i % 8}" for i in range(ROWS)}), "every group reached a Python worker"
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ
    tweets = sample_tweets(60, seed=51)
    spec = tweets_spec(tweets)
    assert spec.topology == prefix
    with caplog.at_level(logging.INFO, logger="txdag.spark.connect"):
        run_connected(spec, str(JOBS_DIR / "tweets_analytics.py"), clients(redis_client), connect_url)
    assert f"runs in Spark Connect session {expected_session}" in caplog.text
    assert Staging(redis_client, spec.topology).read(spec.tx) == expected_staging(tweets)


def test_txdag_warm_names_a_server_that_is_down_and_a_topology_that_has_no_session(prefix, tmp_path, monkeypatch,
                                                                                  capsys):
    dag_folder(monkeypatch, tmp_path, prefix, WARM_DAG_FILE)
    assert main(["warm", prefix, "--url", f"sc://127.0.0.1:{free_port()}"]) == exits.code_of(ServiceUnavailable(""))
    assert "does not answer" in capsys.readouterr().err
    (tmp_path / "dags" / f"{prefix}.py").write_text(WARM_DAG_FILE.replace(', spark_mode="connect"', "")
                                                     .format(topo=prefix))
    assert main(["warm", prefix, "--url", "sc://127.0.0.1:1"]) == exits.USAGE
    assert "runs spark_mode='submit'" in capsys.readouterr().err


SLOW_JOB = """
import time
from pyspark.sql import functions as F
from pyspark.sql.types import LongType


def process(batch):
    def slow(value):
        time.sleep(120)
        return 1
    return {"users": batch.select(F.lit("u").alias("user"), F.udf(slow, LongType())(F.col("value")).alias("n"))}
"""


def slow_task(tmp_path, tweets_spec):
    job = tmp_path / "slow_job.py"
    job.write_text(SLOW_JOB)
    spec = tweets_spec(sample_tweets(2, seed=61), states=(State("users"),))
    topology = TransactionalTopology(spec.topology, source=spec.source, job=str(job), states=[State("users")],
                                     spark_mode="connect")
    return WarmProcessOperator(task_id="process", topology=topology), spec


def test_a_killed_warm_process_task_interrupts_its_spark_job(connect_url, redis_client, tweets_spec, tmp_path,
                                                             capsys):
    """Airflow calls on_kill from the task's SIGTERM handler (Mark as failed, a clear): the job's Spark operations
    on the shared server are interrupted rather than run to their end for nobody. Here the job's rows sleep 120 s
    each on the executors; the task's on_kill ends it within seconds, and nothing is sealed."""
    task, spec = slow_task(tmp_path, tweets_spec)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            task.run_job(spec, clients(redis_client), connect_url)
        except BaseException as exc:  # noqa: BLE001  (what the job ended with is the point)
            failed.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    deadline = time.monotonic() + 60
    while worker.is_alive() and time.monotonic() < deadline:  # until the session exists and the slow stage runs
        task.on_kill()
        worker.join(timeout=2)
    assert not worker.is_alive(), "the job was not interrupted: its rows sleep 120 s"
    assert failed and isinstance(failed[0], PySparkException), failed
    assert "killed; interrupted its Spark job's 1 running operation(s)" in capsys.readouterr().out
    with pytest.raises(BatchReadError, match="no sealed staging"):  # nothing of the killed attempt is sealed
        Staging(redis_client, spec.topology).read(spec.tx)


def test_after_an_execution_timeout_nothing_of_the_job_runs_on(connect_url, redis_client, tweets_spec, tmp_path,
                                                              capsys):
    """Airflow's execution_timeout raises in the task (a BaseException, through run_connected, which closes its
    client), then calls on_kill: by then no operation of the job runs on the server (the Connect client released
    it as the timeout unwound, or on_kill interrupts it), where the job's rows would sleep 120 s."""
    task, spec = slow_task(tmp_path, tweets_spec)
    with pytest.raises(AirflowTaskTimeout), timeout(10):
        task.run_job(spec, clients(redis_client), connect_url)
    task.on_kill()
    assert re.search(r"killed; interrupted its Spark job's [01] running operation", capsys.readouterr().out), \
        "on_kill must still know the job after the timeout"
    session, tx = task._running
    assert interrupt_job(session, job_tag(spec.topology, tx)) == [], "an operation of the job still runs"

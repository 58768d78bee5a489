"""The tweets job under a real ``spark-submit`` (local[2], loopback), as the process task runs it.

The slow tests of the suite (~15-20 s each: a JVM per submit). One clean run, one killed between staging its
partials and the seal: the kill must leave staging the commit refuses. Under spark-submit the Python
driver's stderr arrives on spark-submit's stdout (PythonRunner merges the two).
"""

import json
import os
import subprocess
import sys

import pytest
from spark_support import JOBS_DIR, ROOT, TWEET_STATES, expected_fields

from txdag.analytics.tweets import tweet_partials
from txdag.commit.rejections import list_rejections
from txdag.errors import BatchReadError
from txdag.spouts.samples import sample_tweets
from txdag.staging.store import Staging, stage_key

pytestmark = pytest.mark.integration

SPARK_SUBMIT = ROOT / ".venv" / "bin" / "spark-submit"
TWEETS = sample_tweets(150, seed=11) + ["@a#b ##c @a", b"\xc3\x28 not utf-8", "#a.b* @z"]


def spark_submit(job: str, spec_json: str, redis_url: str, **extra_env: str) -> subprocess.CompletedProcess:
    if not SPARK_SUBMIT.exists():
        pytest.fail(f"{SPARK_SUBMIT} is missing; run `bash scripts/setup.sh` to install pyspark", pytrace=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXDAG_FAULTS")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               TXDAG_REDIS_URLS=json.dumps({"redis_default": redis_url}), **extra_env)
    command = [str(SPARK_SUBMIT), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
               "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.driver.host=127.0.0.1",
               "--conf", "spark.sql.shuffle.partitions=4", str(JOBS_DIR / f"{job}.py"), "--job", spec_json]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def test_spark_submit_stages_and_seals_the_reference_partials(redis_client, redis_url, tweets_spec):
    spec = tweets_spec(TWEETS)
    done = spark_submit("tweets_analytics", spec.to_json(), redis_url)
    assert done.returncode == 0, done.stderr[-3000:]
    # batch: the source entries the batch covers, the rejected one too
    summary = f"txdag job done: topology={spec.topology} txid=1 attempt=1 batch={len(TWEETS)} rejected=1"
    assert summary in done.stdout
    reference = tweet_partials(t for t in TWEETS if isinstance(t, str))
    assert Staging(redis_client, spec.topology).read(spec.tx) == {
        s.name: expected_fields(s, reference[s.name]) for s in TWEET_STATES
    }
    assert list(list_rejections(redis_client, spec.topology)) == [str(len(TWEETS) - 1)]


def test_a_fault_between_staging_and_the_seal_kills_the_job_and_leaves_no_seal(redis_client, redis_url, tweets_spec):
    spec = tweets_spec(TWEETS)
    fault = f"process:{spec.topology}:{spec.tx.txid}"
    done = spark_submit("tweets_analytics", spec.to_json(), redis_url, TXDAG_FAULTS=fault, TXDAG_FAULTS_ALLOWED="1")
    assert done.returncode == 128 + 9, "spark-submit exits with its killed driver's status"
    # spark-submit's PythonRunner merges the Python driver's stderr into its own stdout
    assert f"TXDAG FAULT process topology={spec.topology} txid=1 attempt=1\n" in done.stdout
    assert "txdag job done" not in done.stdout
    assert redis_client.hlen(stage_key(spec.topology, spec.tx, "users")) > 0, "killed after staging, before the seal"
    assert not redis_client.exists(stage_key(spec.topology, spec.tx))
    with pytest.raises(BatchReadError, match="no sealed staging"):
        Staging(redis_client, spec.topology).read(spec.tx)


def test_a_job_that_fails_under_airflows_spark_submit_hook_is_named_by_txdags_own_error(
        redis_client, redis_url, tweets_spec, prefix, airflow_home, monkeypatch):
    """The process task's path: the provider's hook runs spark-submit and raises its exception (the command, the
    job's JSON and the output's last lines); the task's error is txdag's, built from the job's own line there."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.sdk.exceptions import AirflowException

    from txdag.airflow.operators import submit_failure

    spec = tweets_spec(TWEETS[:20])
    redis_client.delete(f"{prefix}:6")  # a hole in the batch
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "TXDAG_REDIS_URLS": json.dumps({"redis_default": redis_url})}
    hook = SparkSubmitHook(conn_id="spark_local", spark_binary=str(SPARK_SUBMIT), env_vars=env,
                           conf={"spark.ui.enabled": "false", "spark.driver.bindAddress": "127.0.0.1",
                                 "spark.driver.host": "127.0.0.1"}, application_args=["--job", spec.to_json()])
    with pytest.raises(AirflowException) as failed:
        hook.submit(str(JOBS_DIR / "tweets_analytics.py"))
    message = str(submit_failure(spec.topology, spec.tx, failed.value))
    assert message.startswith(f"topology '{spec.topology}' txid 1 attempt 1: the Spark job failed: BatchReadError: "
                              f"topology '{spec.topology}' txid 1 attempt 1: the source no longer holds the batch")
    assert f"key '{prefix}:6' is missing" in message and f"txdag accept-missing {spec.topology} 1" in message
    assert "\n" not in message and "--job" not in message and "INFO" not in message

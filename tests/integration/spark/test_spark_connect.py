"""Warm mode: the jobs of spark_jobs/ run on a real Spark Connect server (scripts/spark-connect.sh) stage exactly
what the Python reference (and the spark-submit path of test_spark_jobs.py) stages."""

from __future__ import annotations

import os
from collections import Counter

import pytest
from spark_support import JOBS_DIR, TWEET_STATES, WORD_STATES, expected_fields

from txdag import TransactionAttempt
from txdag.analytics.tweets import tweet_partials
from txdag.definition import JobSpec, StreamsSource
from txdag.errors import ConfigError, ServiceUnavailable
from txdag.sample import sample_sentences, sample_tweets
from txdag.spark.connect import connect_session, load_process, run_connected
from txdag.spouts.streams import StreamPartition, append_entries
from txdag.staging import Staging
from txdag.testing.servers import free_port

pytestmark = pytest.mark.integration

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


def test_word_count_on_spark_connect(connect_url, redis_client, prefix):
    sentences = {f"{prefix}:s1": sample_sentences(60, seed=8) + ["  a  b ", "#x.* a"],
                 f"{prefix}:s2": sample_sentences(40, seed=9)}
    for stream, values in sentences.items():
        append_entries(StreamPartition(stream, redis_client, stream), values)
    source = StreamsSource(tuple(sentences), opaque=True)
    metadata = source.build(clients(redis_client), prefix).initialize_transaction(1, None)
    spec = JobSpec(prefix, TransactionAttempt(1, 1), metadata, source, WORD_STATES)
    run_connected(spec, str(JOBS_DIR / "word_count.py"), clients(redis_client), connect_url)
    words = Counter(w for values in sentences.values() for s in values for w in s.split(" ") if w)
    assert Staging(redis_client, prefix).read(spec.tx) == {"words": dict(words)}


def test_a_server_that_is_down_is_named_with_how_to_start_it():
    url = f"sc://127.0.0.1:{free_port()}"
    with pytest.raises(ServiceUnavailable) as caught:
        connect_session(url)
    assert url in str(caught.value) and "bash scripts/spark-connect.sh start" in str(caught.value)


def test_a_job_file_without_process_is_refused(tmp_path):
    job = tmp_path / "job.py"
    job.write_text("def main():\n    pass\n")
    with pytest.raises(ConfigError, match="defines no process"):
        load_process(str(job))
    with pytest.raises(ConfigError, match="not a local file"):
        load_process("s3://bucket/job.py")

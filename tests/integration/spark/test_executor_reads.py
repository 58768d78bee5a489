"""The built-in Redis spouts' batch read on the Spark executors (issue 34 item 1): the same tuples and rejections
as emit_batch, over several Spark tasks, read when Spark runs the job and not before; an entry gone fails the job
with the spout's own BatchReadError and its ways out."""

import pytest

from txdag import TransactionAttempt
from txdag.errors import BatchReadError
from txdag.spark.runner import run_job
from txdag.spouts import SpoutContext
from txdag.spouts import tweets as tweets_layout
from txdag.spouts.base import REJECTED
from txdag.spouts.samples import sample_tweets
from txdag.spouts.streams import StreamPartition, append_entries
from txdag.spouts.tweets import MGET_CHUNK, append_tweets, tweet_key
from txdag.staging.layout import stage_key
from txdag.topology.definition import JobSpec, State, StreamsSource, TweetsSource

pytestmark = pytest.mark.integration


def batch_of(redis_client, prefix, tweets, missing=None):
    ids = append_tweets(redis_client, tweets, prefix=f"{prefix}:")
    metadata = {"v": 1, "from": ids[0], "quantity": len(ids)}
    if missing:
        metadata["missing"] = missing
    source = TweetsSource(max_transaction_size=len(ids), prefix=f"{prefix}:")
    spout = source.build(SpoutContext(prefix, {"redis_default": redis_client}))
    return ids, metadata, source, spout


def test_the_executors_read_the_tuples_and_rejections_emit_batch_reads(spark, redis_client, prefix, monkeypatch):
    monkeypatch.setattr(tweets_layout, "READ_TASK", MGET_CHUNK)  # three tasks of a batch that fits a test
    tweets = sample_tweets(2 * MGET_CHUNK + 500, seed=3)
    ids, metadata, _, spout = batch_of(redis_client, prefix, tweets, missing={})
    first = ids[0]
    not_text, a_hash, accepted = first + MGET_CHUNK - 1, first + MGET_CHUNK, first + 2 * MGET_CHUNK + 7
    redis_client.set(tweet_key(f"{prefix}:", not_text), b"@x #\xff")
    redis_client.delete(tweet_key(f"{prefix}:", a_hash))
    redis_client.hset(tweet_key(f"{prefix}:", a_hash), "a", "b")
    redis_client.delete(tweet_key(f"{prefix}:", accepted))
    metadata["missing"] = {str(accepted): "2026-12-02T07:00:00Z"}
    tx = TransactionAttempt(1, 1)

    frame = spout.read(spark, tx, metadata)
    assert frame.rdd.getNumPartitions() == 3  # one Spark task per READ_TASK ids
    rows = frame.collect()
    batch = spout.emit_batch(tx, metadata)
    same_rows(rows, batch)
    assert {r.id for r in batch.rejections} == {str(not_text), str(a_hash), str(accepted)}
    assert len(rows) == len(tweets)


def test_the_batch_is_read_when_spark_runs_the_job_and_a_key_gone_fails_it_with_its_ways_out(
        spark, jobs, redis_client, prefix):
    ids, metadata, source, spout = batch_of(redis_client, prefix, ["@a #x", "@b #y", "@c #z"])
    redis_client.delete(tweet_key(f"{prefix}:", ids[1]))
    spec = JobSpec(prefix, TransactionAttempt(4, 2), metadata, source, ())
    spout.read(spark, spec.tx, metadata)  # plans the read: the driver reads no tweet, so it finds no key missing
    with pytest.raises(BatchReadError) as err:  # the executors do, and the job fails with the spout's own error
        run_job(spec, jobs["tweets_analytics"].process, {"redis_default": redis_client}, spark)
    message = str(err.value)
    assert f"topology '{prefix}' txid 4 attempt 2: the source no longer holds the batch" in message
    assert f"key '{prefix}:{ids[1]}' is missing" in message
    assert f"txdag accept-missing {prefix} 4 --confirm --replay" in message
    assert redis_client.keys(f"{stage_key(prefix, spec.tx)}*") == []


def same_rows(rows, batch):
    """A Spark read's rows hold the tuples and rejections of ``batch``, and nothing else."""
    assert sorted((r["id"], r["value"], r["partition"]) for r in rows if r[REJECTED] is None) == sorted(
        (r.id, r.value, r.partition) for r in batch.records)
    assert sorted((r["id"], r[REJECTED], r["partition"]) for r in rows if r[REJECTED] is not None) == sorted(
        (r.id, r.reason, r.partition) for r in batch.rejections)


@pytest.mark.parametrize("opaque", [False, True], ids=["transactional", "opaque"])
def test_each_stream_partition_is_read_by_a_task_of_its_own_as_emit_batch_reads_it(spark, redis_client, prefix,
                                                                                     opaque):
    streams = (f"{prefix}:s1", f"{prefix}:s2", f"{prefix}:empty")
    for stream, values in zip(streams[:2], (["a b", b"\xff c", "d"], ["e", "f f"])):
        append_entries(StreamPartition(stream, redis_client, stream), values)
    redis_client.xadd(streams[1], {"other": "no value field"})
    redis_client.xadd(streams[2], {"value": "x"})
    redis_client.xtrim(streams[2], maxlen=0, approximate=False)  # a stream with no entries: no task
    source = StreamsSource(streams, opaque=opaque)
    spout = source.build(SpoutContext(prefix, {"redis_default": redis_client}))
    metadata = spout.initialize_transaction(1, None)
    tx = TransactionAttempt(1, 1)
    frame = spout.read(spark, tx, metadata)
    assert frame.rdd.getNumPartitions() == 2
    rows = frame.collect()
    batch = spout.emit_batch(tx, metadata)
    same_rows(rows, batch)
    assert (len(batch.records), len(batch.rejections)) == (4, 2)


def test_a_trimmed_stream_fails_the_job_with_the_spouts_ways_out(spark, jobs, redis_client, prefix):
    stream = f"{prefix}:s1"
    append_entries(StreamPartition(stream, redis_client, stream), ["a b", "c", "d"])
    source = StreamsSource((stream,), opaque=False)
    clients = {"redis_default": redis_client}
    metadata = source.build(SpoutContext(prefix, clients)).initialize_transaction(1, None)
    redis_client.xtrim(stream, maxlen=1, approximate=False)
    spec = JobSpec(prefix, TransactionAttempt(1, 3), metadata, source, (State("words"),))
    with pytest.raises(BatchReadError) as err:
        run_job(spec, jobs["word_count"].process, clients, spark)
    message = str(err.value)
    assert f"topology '{prefix}' txid 1 attempt 3: partition '{stream}'" in message
    assert "holds 1 entries in" in message and "but the batch has 3" in message
    assert f"txdag replay {prefix} --from 1" in message

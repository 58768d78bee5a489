"""The peer a user would pick instead of txdag: a Spark Structured Streaming query over the same tweets in Redis.

    TXDAG_BENCH_REDIS_URL=redis://user:pw@127.0.0.1:6391/4 .venv/bin/python bench/streaming_peer.py \\
        --tweets 1000000 --batch 20000 --checkpoint /tmp/peer-ckpt --result peer.json

A Python data source (PySpark 4.2's DataSourceStreamReader) reads seed 000's layout: offsets are tweet ids, a
micro-batch is at most ``--batch`` ids (ReadMaxRows), split into ``--partitions`` id ranges that the executors read
with chunked MGET. Each micro-batch is counted by the topology's own job function (spark_jobs/tweets_analytics.py
``process``: users, hashtags, user-hashtag pairs) and written in foreachBatch with one Lua call per chunk that
skips a (state, chunk) already applied for that batchId, so a micro-batch replayed after a crash is not counted
twice (the checkpoint dir holds the offsets). Trigger.AvailableNow: it stops when the backlog is read.
bench/throughput.py runs it (P1) and checks the counts in hashes ``peer:<state>`` against the ground truth. The
Redis URL (with its password) comes from the environment, never the command line.

With ``--kafka-topic T --kafka-bootstrap HOST:PORT`` it reads the topic instead, as a Kafka user would: Spark's own
Kafka source (``subscribe``, ``startingOffsets`` earliest, ``maxOffsetsPerTrigger`` = ``--batch``; its jars from
.run/jars/spark-kafka/, which ``bash scripts/kafka.sh fetch`` puts there, through spark.jars), a record's id being
``partition@offset``; counted and written the same way (bench/throughput.py --kafka: into ``kafka-peer:<state>``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "spark_jobs" / "tweets_analytics.py"
KAFKA_JARS = REPO / ".run" / "jars" / "spark-kafka"
URL_VAR = "TXDAG_BENCH_REDIS_URL"
MGET_CHUNK = 5000
WRITE_CHUNK = 5000

# KEYS[1]: the hash of applied chunks (field "<state>:<chunk>" -> last batchId applied); KEYS[2]: the state's hash.
# ARGV[1]: the batchId; ARGV[2]: the field of KEYS[1]; ARGV[3..]: hash field, increment, hash field, increment...
# Returns 1 when applied, 0 when this batchId (or a later one) was applied to that chunk already.
APPLY_LUA = """
local last = tonumber(redis.call('HGET', KEYS[1], ARGV[2]) or '-1')
if last >= tonumber(ARGV[1]) then return 0 end
for i = 3, #ARGV, 2 do redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[1])
return 1
"""


def data_source():  # type: ignore[no-untyped-def]
    """The data source class (defined here so that importing this file for --help needs no pyspark)."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

    class IdRange(InputPartition):
        def __init__(self, low: int, high: int) -> None:  # tweet ids low..high-1
            self.low, self.high = low, high

    class TweetsReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, options: dict) -> None:
            self.max_rows = int(options.get("maxRecordsPerBatch", "10000"))
            self.partitions_per_batch = int(options.get("partitions", "2"))
            self.target: int | None = None

        def _next_write(self) -> int:
            import redis

            with redis.Redis.from_url(os.environ[URL_VAR]) as client:
                return int(client.get("NEXT_WRITE") or 1)

        def initialOffset(self) -> dict:
            return {"id": 1}  # the next id to read

        def getDefaultReadLimit(self):  # type: ignore[no-untyped-def]
            return ReadMaxRows(self.max_rows)

        def prepareForTriggerAvailableNow(self) -> None:
            self.target = self._next_write()

        def latestOffset(self, start: dict, limit) -> dict:  # type: ignore[no-untyped-def]
            end = self.target if self.target is not None else self._next_write()
            if not isinstance(limit, ReadAllAvailable):
                end = min(end, start["id"] + limit.max_rows)
            return {"id": max(start["id"], end)}

        def partitions(self, start: dict, end: dict) -> list:
            low, high = start["id"], end["id"]
            step = max(1, -(-(high - low) // self.partitions_per_batch))
            return [IdRange(i, min(i + step, high)) for i in range(low, high, step)]

        def read(self, partition):  # type: ignore[no-untyped-def]
            import redis

            with redis.Redis.from_url(os.environ[URL_VAR]) as client:
                for low in range(partition.low, partition.high, MGET_CHUNK):
                    ids = range(low, min(low + MGET_CHUNK, partition.high))
                    for i, value in zip(ids, client.mget([str(i) for i in ids])):
                        if value is None:
                            raise RuntimeError(f"tweet {i} is missing from Redis")
                        yield (str(i), value.decode("utf-8"))

        def commit(self, end: dict) -> None:
            pass

    class TweetsSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "txdag_bench_tweets"

        def schema(self) -> str:
            return "id string, value string"

        def streamReader(self, schema):  # type: ignore[no-untyped-def]
            return TweetsReader(self.options)

    return TweetsSource


def load_process():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("txdag_bench_job", JOB)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.process


def writer(prefix: str):  # type: ignore[no-untyped-def]
    """The foreachBatch function: count the micro-batch with the job's process, apply idempotently per batchId."""
    import redis

    client = redis.Redis.from_url(os.environ[URL_VAR])
    apply = client.register_script(APPLY_LUA)
    process = load_process()

    def write(frame, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        frame = frame.persist()  # three aggregates read the batch: read Redis once
        try:
            outputs = {state: out.collect() for state, out in process(frame).items()}
        finally:
            frame.unpersist()
        for state, rows in outputs.items():
            fields = sorted((":".join(str(v) for v in row[:-1]), int(row[-1])) for row in rows)
            for chunk, low in enumerate(range(0, len(fields), WRITE_CHUNK)):
                args = [batch_id, f"{state}:{chunk}"]
                for name, n in fields[low:low + WRITE_CHUNK]:
                    args += [name, n]
                apply(keys=[f"{prefix}applied", f"{prefix}{state}"], args=args)

    return write


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tweets", type=int, required=True,
                        help="tweets expected (ids 1..N): the run checks it read them")
    parser.add_argument("--batch", type=int, default=20_000, help="max tweets per micro-batch (ReadMaxRows)")
    parser.add_argument("--partitions", type=int, default=2, help="id ranges (Spark tasks) per micro-batch (Kafka: one "
                        "per topic partition, Spark's own split)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint dir")
    parser.add_argument("--prefix", default="peer:", help="prefix of the count hashes and of the applied-chunks hash")
    parser.add_argument("--result", required=True, help="where to write the timings as JSON")
    parser.add_argument("--kafka-topic", help="read this Kafka topic (Spark's Kafka source) instead of Redis")
    parser.add_argument("--kafka-bootstrap", default="127.0.0.1:9391", help="the broker of --kafka-topic")
    args = parser.parse_args()
    if URL_VAR not in os.environ:
        parser.error(f"set {URL_VAR} to the Redis URL of the tweets, or of the counts with --kafka-topic "
                     "(redis://user:password@host:port/db)")
    jars = sorted(str(p) for p in KAFKA_JARS.glob("*.jar")) if args.kafka_topic else []
    if args.kafka_topic and not jars:
        parser.error(f"no jars in {KAFKA_JARS}: run bash scripts/kafka.sh fetch (bash scripts/setup.sh runs it)")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the executors' Python workers: this venv's
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from tput.cpu import busy_seconds  # the benchmark's CPU meter: the machine's busy core-seconds, from /proc/stat

    started = time.perf_counter()
    builder = SparkSession.builder.config("spark.jars", ",".join(jars)) if jars else SparkSession.builder
    spark = (builder.master(args.master).appName("txdag-bench-peer")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1").config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.streaming.numRecentProgressUpdates", "100000").getOrCreate())
    spark.dataSource.register(data_source())
    session_seconds = time.perf_counter() - started
    if args.kafka_topic:
        stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", args.kafka_bootstrap)
                  .option("subscribe", args.kafka_topic).option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", str(args.batch)).load()
                  .selectExpr("concat(CAST(partition AS STRING), '@', CAST(offset AS STRING)) AS id",
                              "CAST(value AS STRING) AS value"))
    else:
        stream = (spark.readStream.format("txdag_bench_tweets").option("maxRecordsPerBatch", str(args.batch))
                  .option("partitions", str(args.partitions)).load())
    query_start, busy_start = time.perf_counter(), busy_seconds()[0]
    query = (stream.writeStream.foreachBatch(writer(args.prefix)).option("checkpointLocation", args.checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    seconds, busy_core_seconds = time.perf_counter() - query_start, busy_seconds()[0] - busy_start
    batches = [p for p in query.recentProgress if p.numInputRows]
    read = sum(p.numInputRows for p in query.recentProgress)
    durations: dict[str, int] = {}  # where the micro-batches' time went (addBatch = the foreachBatch function)
    for p in batches:
        for name, ms in (p.durationMs or {}).items():
            durations[name] = durations.get(name, 0) + int(ms)
    spark.stop()
    if read != args.tweets:
        raise SystemExit(f"streaming peer: read {read} tweets, expected {args.tweets}")
    Path(args.result).write_text(json.dumps({"seconds": seconds, "session_seconds": session_seconds,
                                             "micro_batches": len(batches), "tweets": read,
                                             "busy_core_seconds": round(busy_core_seconds, 2),
                                             "duration_ms_total": durations}))
    print(f"streaming peer: {read} tweets in {len(batches)} micro-batches, {seconds:.1f} s "
          f"({read / seconds:,.0f} tweets/s; session start {session_seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

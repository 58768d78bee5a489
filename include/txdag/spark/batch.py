"""A TransactionAttempt's batch as a DataFrame: the spout's own Spark read, or its records read by the driver.

A spout with a ``read`` (txdag.spouts.base) reads exactly the batch's metadata on the executors; its batch is what
that DataFrame holds (the built-in spouts: the Redis ones with the same reading code as their ``emit_batch``, so a
Spark job and ``txdag.local`` see the same tuples; Kafka through Spark's Kafka source). Any other spout is
read through ``emit_batch`` on the driver, as the in-process runner reads every spout; its batch passes through the
driver, one at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import redis
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from txdag.commit.rejections import record_rejections
from txdag.errors import ConfigError
from txdag.spark.executor_errors import raise_executor_error
from txdag.spouts.base import BATCH_COLUMNS, REJECTED, Batch, Rejection, SpoutContext, reads_with_spark
from txdag.topology.definition import JobSpec

BATCH_SCHEMA = "id string, value string, partition string"
# The same as a type: Spark Connect parses a DDL string on the server, one round trip per DataFrame built.
BATCH_TYPE = StructType([StructField(name, StringType()) for name in BATCH_COLUMNS])


@dataclass(frozen=True)
class BatchRead:
    """The batch's DataFrame, how many source entries it covers (None: not counted) and the rejections recorded;
    ``cached``: the spout's read, kept by Spark until the job is done with it (``unpersist`` it then)."""

    frame: DataFrame
    size: int | None
    rejected: int
    cached: DataFrame | None = None


def client_for(clients: Mapping[str, redis.Redis], conn_id: str, spec: JobSpec) -> redis.Redis:
    if conn_id not in clients:
        raise ConfigError(
            f"topology {spec.topology!r} {spec.tx}: no Redis client for connection {conn_id!r} (have "
            f"{sorted(clients)}); give the job a URL for it in TXDAG_REDIS_URLS"
        )
    return clients[conn_id]


def read_batch(spec: JobSpec, clients: Mapping[str, redis.Redis], spark: SparkSession,
               kafka_configs: Mapping[str, Mapping[str, Any]] | None = None) -> BatchRead:
    """The batch the metadata describes, read by the spout's Spark read or through its emit_batch."""
    spout = spec.source.build(SpoutContext(spec.topology, clients, kafka_configs or {}))
    try:
        if reads_with_spark(spout):
            frame = spout.read(spark, spec.tx, spec.metadata)
            check_columns(spec, frame, type(spout).__name__)
            if REJECTED not in frame.columns:
                return BatchRead(frame, spout.batch_size(spec.metadata), 0)
            read = frame.cache()  # read once: for its rejections, then by the job
            try:
                tuples, rejected = split_rejections(spec, clients, read)
            except BaseException:
                read.unpersist()
                raise
            return BatchRead(tuples, spout.batch_size(spec.metadata), rejected, read)
        batch = spout.emit_batch(spec.tx, spec.metadata)
    finally:
        spout.close()
    rejected = record_rejections(client_for(clients, spec.redis_conn_id, spec), spec.topology, spec.tx,
                                 batch.rejections)
    return BatchRead(batch_frame(spark, batch), len(batch) + len(batch.rejections), rejected)


def split_rejections(spec: JobSpec, clients: Mapping[str, redis.Redis], frame: DataFrame) -> tuple[DataFrame, int]:
    """A read's rows with a ``rejected`` reason are recorded as the txid's rejections (only they reach the driver);
    the others are the batch."""
    try:
        bad = frame.where(f"{REJECTED} IS NOT NULL").select("id", REJECTED, "partition").collect()
    except PySparkException as exc:  # a spout's read failed on an executor: its own error, with its ways out
        raise_executor_error(exc)
    rejections = [Rejection(row["id"], row[REJECTED], row["partition"]) for row in bad]
    client = client_for(clients, spec.redis_conn_id, spec)
    recorded = record_rejections(client, spec.topology, spec.tx, rejections) if rejections else 0
    return frame.where(f"{REJECTED} IS NULL").drop(REJECTED), recorded


def check_columns(spec: JobSpec, frame: object, spout: str) -> None:
    """A spout's read answers a DataFrame with the batch's columns, so that every job reads every source alike."""
    columns = list(getattr(frame, "columns", None) or [])
    if not isinstance(frame, DataFrame) or columns[:3] != list(BATCH_COLUMNS):
        raise ConfigError(f"topology {spec.topology!r} {spec.tx}: {spout}.read returned {type(frame).__name__} with "
                          f"columns {columns}; return a DataFrame whose first columns are {list(BATCH_COLUMNS)}")


def batch_frame(spark: SparkSession, batch: Batch) -> DataFrame:
    """``id string, value string, partition string``, one row per record (partition is null for tweets)."""
    rows = [(r.id, r.value, r.partition) for r in batch.records]
    return spark.createDataFrame(rows, schema=BATCH_TYPE)

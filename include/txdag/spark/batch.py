"""A TransactionAttempt's batch as a DataFrame, read by the driver through the topology's spout.

The spout does the reading (chunked MGET/XRANGE, one round trip per chunk), the missing-key checks and the
rejections, exactly as the in-process runner does, so a Spark job and ``txdag.protocol.local`` see the same tuples.
Batches are bounded by ``max_transaction_size``/``max_per_partition``, so the driver holds one at a time.
"""

from __future__ import annotations

from collections.abc import Mapping

import redis
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from txdag.commit.rejections import record_rejections
from txdag.errors import ConfigError
from txdag.spouts.base import Batch
from txdag.topology.definition import JobSpec

BATCH_SCHEMA = "id string, value string, partition string"
# The same as a type: Spark Connect parses a DDL string on the server, one round trip per DataFrame built.
BATCH_TYPE = StructType([StructField(name, StringType()) for name in ("id", "value", "partition")])


def client_for(clients: Mapping[str, redis.Redis], conn_id: str, spec: JobSpec) -> redis.Redis:
    if conn_id not in clients:
        raise ConfigError(
            f"topology {spec.topology!r} {spec.tx}: no Redis client for connection {conn_id!r} (have "
            f"{sorted(clients)}); give the job a URL for it in TXDAG_REDIS_URLS"
        )
    return clients[conn_id]


def read_batch(spec: JobSpec, clients: Mapping[str, redis.Redis]) -> tuple[Batch, int]:
    """The batch the metadata describes, and how many rejections were recorded for the operator."""
    state_client = client_for(clients, spec.redis_conn_id, spec)
    batch = spec.source.build(clients, spec.topology).emit_batch(spec.tx, spec.metadata)
    rejected = record_rejections(state_client, spec.topology, spec.tx, batch.rejections)
    return batch, rejected


def batch_frame(spark: SparkSession, batch: Batch) -> DataFrame:
    """``id string, value string, partition string``, one row per record (partition is null for tweets)."""
    rows = [(r.id, r.value, r.partition) for r in batch.records]
    return spark.createDataFrame(rows, schema=BATCH_TYPE)

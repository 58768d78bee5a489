"""Staging written from the Spark executors: each partition HSETs its rows' fields in fenced chunks.

The driver never collects the partials: an output's rows (one per hash field, already aggregated, so each field is
written by exactly one task and a retried task rewrites the same value) go from the executors to Redis, and each
partition returns only how many fields it wrote, which the driver sums for the seal.

An error on an executor reaches the driver inside Spark's exception; ``raise_executor_error`` turns txdag's own
message back into its exception, so the job fails with what to do, not with a Spark stack.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from txdag import errors
from txdag.attempt import TransactionAttempt
from txdag.commit.rejections import clash_rejection, record_rejections
from txdag.redisio import from_portable, redis_errors
from txdag.spark.executor_errors import raise_executor_error
from txdag.spouts.base import Rejection
from txdag.staging.store import fenced_hset
from txdag.state.keys import JoinedKeyCodec, KeyClashError

CHUNK = 5000
# key, rows written: a type, not a DDL string (which Spark Connect parses on the server, one round trip)
COUNT_SCHEMA = StructType([StructField("key", StringType()), StructField("n", LongType())])


def write_fields(frame: DataFrame, client_spec: dict[str, Any], key: str, tx: TransactionAttempt, topology: str,
                 where: str, encode: Callable[[Any], str] = str) -> int:
    """HSET ``key`` (a staging hash of ``tx``) field -> ``encode(value)`` for every row of ``frame`` (columns: field
    string, value), from the executors, one round trip per chunk of fields; returns how many rows were written. A
    null field is an error (``where`` names the topology, txid and state in it)."""
    keyed = frame.select(F.lit(key).alias("key"), *frame.columns)
    return write_rows(keyed, client_spec, tx, topology, {key: where}, encode).get(key, 0)


CLASH = "clash:"


def clash_key(key: str) -> str:
    """The ``key`` column of a row whose key its state's codec refuses (see write_rows): never a Redis key."""
    return CLASH + key


def write_rows(frame: DataFrame, client_spec: dict[str, Any], tx: TransactionAttempt, topology: str,
               where: dict[str, str], encode: Callable[[Any], str] = str,
               clashes: dict[str, tuple[str, JoinedKeyCodec]] | None = None) -> dict[str, int]:
    """HSET each row's ``key`` (a staging hash of ``tx``): field -> ``encode(value)`` (columns: key, field, value),
    from the executors, in one Spark job whatever the number of keys; returns the rows written per key. ``where``
    names each key's topology, txid and state for the errors. Each chunk is fenced (txdag.staging.store): once a
    newer attempt of the txid is claimed, the job fails with StaleAttemptError and writes nothing more.

    A row whose key is in ``clashes`` (clash_key of a staging key -> its state's name and JoinedKeyCodec) is a key
    the codec refuses, its field the key's parts as a JSON array: it is recorded as a rejection of the txid from the
    executor (txdag.commit.rejections.clash_rejection), in the same job, and not staged."""
    refused = clashes or {}

    def reject(key: str, field: str) -> Rejection:
        state, codec = refused[key]
        parts = tuple(json.loads(field))
        try:
            codec.encode(parts)
        except KeyClashError as exc:
            return clash_rejection(state, tx.txid, exc)
        raise errors.ConfigError(f"{where[key.removeprefix(CLASH)]}: key {parts!r} was marked as refused by its codec, "
                                 f"which accepts it: report this as a txdag defect")

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        client = from_portable(client_spec)
        written: dict[str, int] = {}
        try:
            with redis_errors(client, "staging", topology=topology, keys=sorted(where)):
                for batch in batches:
                    keys, fields, values = (batch.column(i).to_pylist() for i in range(3))
                    by_key: dict[str, dict[str, str]] = {}
                    rejections = []
                    for key, field, value in zip(keys, fields, values):
                        if key in refused:
                            rejections.append(reject(key, field))
                        elif field is None:
                            raise errors.ConfigError(f"{where[key]}: a row has a null key; filter out rows with "
                                                     f"null keys in process")
                        else:
                            by_key.setdefault(key, {})[field] = encode(value)
                    record_rejections(client, topology, tx, rejections)
                    for key, mapping in by_key.items():
                        items = list(mapping.items())
                        for first in range(0, len(items), CHUNK):
                            fenced_hset(client, topology, tx, key, dict(items[first:first + CHUNK]))
                        written[key] = written.get(key, 0) + len(items)
        finally:
            client.close()
        yield pa.RecordBatch.from_pydict({"key": list(written), "n": list(written.values())},
                                         schema=pa.schema([("key", pa.string()), ("n", pa.int64())]))

    try:  # a row per partition and key: summed here, not by one more shuffle
        counts = frame.mapInArrow(write, COUNT_SCHEMA).collect()
    except PySparkException as exc:
        raise_executor_error(exc)
    totals: dict[str, int] = {}
    for key, n in counts:
        totals[key] = totals.get(key, 0) + int(n)
    return totals


"""Staging written from the Spark executors: each partition HSETs its rows' fields in pipelined chunks.

The driver never collects the partials: an output's rows (one per hash field, already aggregated, so each field is
written by exactly one task and a retried task rewrites the same value) go from the executors to Redis, and each
partition returns only how many fields it wrote, which the driver sums for the seal.

An error on an executor reaches the driver inside Spark's exception; ``raise_executor_error`` turns txdag's own
message back into its exception, so the job fails with what to do, not with a Spark stack.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from txdag import errors
from txdag.redisio import from_portable, redis_errors

CHUNK = 5000
COUNT_SCHEMA = "n long"
_TXDAG_ERROR = re.compile(r"txdag\.errors\.(\w+): (.*)")


def write_fields(frame: DataFrame, client_spec: dict[str, Any], key: str, topology: str, where: str,
                 encode: Callable[[Any], str] = str) -> int:
    """HSET ``key`` field -> ``encode(value)`` for every row of ``frame`` (columns: field string, value), from the
    executors, one round trip per chunk of fields; returns how many rows were written. A null field is an error
    (``where`` names the topology, txid and state in it)."""
    doing = f"staging into {key}"

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        client = from_portable(client_spec)
        written = 0
        try:
            with redis_errors(client, doing, topology=topology, keys=[key]):
                pipe = client.pipeline(transaction=False)
                for batch in batches:
                    fields, values = batch.column(0).to_pylist(), batch.column(1).to_pylist()
                    if None in fields:
                        raise errors.ConfigError(f"{where}: a row has a null key; filter out rows with null keys "
                                                 f"in process")
                    for first in range(0, len(fields), CHUNK):
                        part = zip(fields[first:first + CHUNK], values[first:first + CHUNK])
                        pipe.hset(key, mapping={f: encode(v) for f, v in part})
                        written += min(CHUNK, len(fields) - first)
                    pipe.execute()
        finally:
            client.close()
        yield pa.RecordBatch.from_pydict({"n": [written]}, schema=pa.schema([("n", pa.int64())]))

    try:
        total = frame.mapInArrow(write, COUNT_SCHEMA).agg(F.sum("n")).collect()[0][0]  # type: ignore[arg-type]
    except PySparkException as exc:
        raise_executor_error(exc)
    return int(total or 0)


def raise_executor_error(exc: PySparkException) -> None:
    """Re-raise a txdag error that an executor raised as itself; anything else as it came."""
    found = _TXDAG_ERROR.findall(str(exc))
    if found:
        name, message = found[-1]
        kind = getattr(errors, name, None)
        if isinstance(kind, type) and issubclass(kind, errors.TxdagError) and name != "TxidOrderError":
            raise kind(message) from None
    raise exc

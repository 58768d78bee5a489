"""Warming a topology's shared Spark Connect session before its first txid.

The first txid in a session pays for the server's cold start: the session itself, the JVM's first plans of each
kind, and the session's Python workers, which the server starts per session and which import pyarrow and txdag
before they run anything. On a just-started server the demo's first two txids took about 16 s of ``process`` each,
8-10 s after a warm-up (docs/demo.md). ``warm`` runs one small job of the same kinds (a DataFrame of the batch's
type, a grouped count, an Arrow UDF and an Arrow map that imports what staging imports) in the session the
topology's txids will share today (txdag.spark.connect.shared_session). It reads and writes nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from txdag.spark.batch import BATCH_TYPE
from txdag.spark.connect import connect_mode, shared_session
from txdag.spark.stage import COUNT_SCHEMA

ROWS = 64
GROUPS = 8


def warm(url: str, topology: str, files: Sequence[Path] = (), partitions: int = 2) -> dict[str, Any]:
    """Run the warm-up job in ``topology``'s shared session at ``url`` (its py-files ``files``); returns the
    session id, the seconds it took and the rows the Python workers counted (GROUPS)."""

    # Defined here, so that cloudpickle ships them by value: the workers import pyarrow and txdag.spark.stage, as a
    # txid's staging does, and not this module (whose Connect client needs more than executors may have).
    def tag(value: str | None) -> str | None:
        return None if value is None else f"#{value}"

    def count_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import txdag.spark.stage  # noqa: F401  (the import is the warm-up)

        rows = sum(batch.num_rows for batch in batches)
        yield pa.RecordBatch.from_pydict({"key": ["warm"], "n": [rows]},
                                         schema=pa.schema([("key", pa.string()), ("n", pa.int64())]))

    started = time.perf_counter()
    with connect_mode():
        spark = shared_session(url, topology, files)
        try:
            rows = [(str(i), f"user{i % GROUPS}", str(i % partitions)) for i in range(ROWS)]
            frame = spark.createDataFrame(rows, schema=BATCH_TYPE).repartition(partitions)
            counted = frame.groupBy(F.col("value")).agg(F.count(F.lit(1)).alias("v"))
            tagged = counted.select(F.udf(tag, StringType(), useArrow=True)(F.col("value")).alias("key"), "v")
            seen = tagged.mapInArrow(count_rows, COUNT_SCHEMA).collect()
            session = str(getattr(spark, "session_id", ""))
        finally:
            spark.stop()  # the shared session stays open on the server
    return {"topology": topology, "session": session, "seconds": round(time.perf_counter() - started, 3),
            "rows": sum(int(n) for _, n in seen)}

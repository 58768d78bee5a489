"""``stateful(frame, state, step, key=...)``: a seed 002 stateful step over a batch, on the Spark executors.

The rows are grouped by ``key`` (a Storm fieldsGrouping: every row of a key in one partition, in ``order_by``
order), and each partition reads the committed values of its keys in one round trip, as of the txid before this
one (txdag.state.kv.read_as_of), runs ``step.execute(row, state, collector)`` row by row, and stages the writes
under the txid's attempt in pipelined chunks. What the step emits is ``.emitted``, a DataFrame other outputs of
the job can use; the writes are prepared and committed at the commit (txdag.commit.keyvalue). The result is cached,
so the step runs once per partition however many outputs use it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType

from txdag.contracts import Collector
from txdag.errors import ConfigError, TxdagError
from txdag.spark.context import current_job
from txdag.spark.executor_errors import raise_executor_error
from txdag.staging.format import KV, OutputSpec
from txdag.state.kv import make_client, read_as_of, seal_stage, stage_writes
from txdag.state.kv.step import StatefulStep, StepState
from txdag.topology.refs import ref_of

KIND, COUNT = "__txdag_kind", "__txdag_staged"


class StatefulOutput:
    """A stateful step's run over one batch; return it from ``process`` under the key-value state's name."""

    def __init__(self, frame: DataFrame, state: str, step: StatefulStep, key: str, order_by: Sequence[str]) -> None:
        job = current_job()
        kv, config, namespace = job.key_value(state)
        if not isinstance(step, StatefulStep):
            raise ConfigError(f"{step!r} is not a txdag.trident.StatefulStep: subclass it and define execute")
        if key not in frame.columns:
            raise ConfigError(f"stateful step {type(step).__name__} on state {state!r}: key column {key!r} is not in "
                              f"the DataFrame (columns: {frame.columns})")
        schema = _schema(step, frame)
        self.state, self.step, self.ref = state, step, ref_of(step)
        self.tx, self.config, self.namespace = job.spec.tx, config, namespace
        where = f"topology {job.spec.topology!r} txid {self.tx.txid} attempt {self.tx.attempt} state {state!r}"
        out = StructType([StructField(KIND, StringType()), StructField(COUNT, LongType()), *schema.fields])
        run = _partition_runner(step, key, config, namespace, self.tx, to_arrow_schema(out), where)
        self.frame = frame.repartition(key).sortWithinPartitions(key, *order_by).mapInArrow(run, out).cache()
        self.emitted = self.frame.where(F.col(KIND) == "row").drop(KIND, COUNT)

    def check(self, ctx: Any) -> None:
        if ctx.state.name != self.state:
            raise ConfigError(f"{ctx.where}: the stateful step of key-value state {self.state!r} is returned under "
                              f"{ctx.state.name!r}; return it under its own state's name")

    def stage(self, ctx: Any) -> OutputSpec:
        try:
            total = self.frame.where(F.col(KIND) == "staged").agg(F.sum(COUNT)).collect()[0][0]
        except Exception as exc:  # PySparkException, over Spark Connect too
            raise_executor_error(exc)  # type: ignore[arg-type]
        client = make_client(self.config)
        try:
            seal_stage(client, self.namespace, self.tx, int(total or 0))
        finally:
            client.close()
        return OutputSpec(KV, int(total or 0), self.ref, {"namespace": self.namespace.namespace})


def stateful(frame: DataFrame, state: str, step: StatefulStep, *, key: str,
             order_by: Sequence[str] = ()) -> StatefulOutput:
    """Run ``step`` over ``frame`` with the key-value state ``state`` (declared in the topology's key_values)."""
    return StatefulOutput(frame, state, step, key, tuple(order_by))


def _schema(step: StatefulStep, frame: DataFrame) -> StructType:
    if not step.schema:
        return StructType([])
    try:
        parsed = frame.sparkSession._parse_ddl(step.schema)  # the session's parser, classic or Spark Connect
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{type(step).__name__}.schema {step.schema!r} is not a Spark DDL schema ({first}); "
                          f"write it like \"word string, count bigint\"") from None
    if not isinstance(parsed, StructType):
        raise ConfigError(f"{type(step).__name__}.schema {step.schema!r} names no columns; write it like "
                          f"\"word string, count bigint\"")
    return parsed


def _partition_runner(step: StatefulStep, key: str, config: Any, namespace: Any, tx: Any, out: pa.Schema,
                      where: str) -> Any:
    fields = out.names[2:]

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        records = [r for batch in batches for r in batch.to_pylist()]
        client = make_client(config)
        try:
            keys = {r[key] for r in records}
            state = StepState(read_as_of(client, namespace, list(keys), tx.txid),
                              lambda k: read_as_of(client, namespace, [k], tx.txid))
            state.prefetched(keys)
            collector = Collector()
            for record in records:
                try:
                    step.execute(Row(**record), state, collector)
                except TxdagError:
                    raise
                except Exception as exc:
                    raise ConfigError(f"{where}: {type(step).__name__}.execute raised {type(exc).__name__}: {exc} at "
                                      f"row {json.dumps(record, default=str)[:200]}; fix the step") from exc
            staged = stage_writes(client, namespace, tx, state.writes.items())
        finally:
            client.close()
        bad = [r for r in collector.rows if len(r) != len(fields)]
        if bad:
            raise ConfigError(f"{where}: {type(step).__name__} emitted {bad[0]!r}, but its schema has {len(fields)} "
                              f"column(s) {fields}")
        rows = [{KIND: "row", COUNT: None, **dict(zip(fields, values))} for values in collector.rows]
        rows.append({KIND: "staged", COUNT: staged, **dict.fromkeys(fields)})
        yield pa.RecordBatch.from_pylist(rows, schema=out)

    return run

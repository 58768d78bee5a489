"""What a job's ``process`` returns per state, and how each is staged from the executors; each output stages one
kind, whose staged format (txdag.staging.format) says how it is read back and whose entry in txdag.commit.kinds
how the commit applies it.

- a DataFrame (key columns, then one numeric column): numeric partials, summed per key (``sum``);
- a ``CombinedOutput``: a combiner aggregator's partial per key (``combine``); txdag.trident's persistent_aggregate
  builds it;
- txdag.spark.rows' ``WindowOutput`` and ``PersistOutput`` (``window``, ``persist``), txdag.spark.stateful's
  ``StatefulOutput`` (``kv``).

Each stage writes one hash per state under (txid, attempt) (``kv``: the key-value state's own namespace) and returns
the OutputSpec the seal records.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, NumericType, StringType

from txdag.attempt import TransactionAttempt
from txdag.errors import ConfigError
from txdag.spark.stage import clash_key, write_rows
from txdag.staging.format import COMBINE, SUM, OutputSpec
from txdag.staging.layout import stage_key
from txdag.state.keys import JoinedKeyCodec
from txdag.state.snapshottable_map import GLOBAL_KEY
from txdag.topology.definition import KeyValue, Sink, State
from txdag.topology.refs import ref_of


@dataclass(frozen=True)
class StageContext:
    """Where one state's output goes: the txid attempt, the state, the Redis of the staging (portable)."""

    topology: str
    tx: TransactionAttempt
    state: State | KeyValue | Sink
    client_spec: dict[str, Any]

    @property
    def where(self) -> str:
        return f"topology {self.topology!r} txid {self.tx.txid} attempt {self.tx.attempt}"

    @property
    def state_where(self) -> str:
        return f"{self.where} state {self.state.name!r}"

    @property
    def key(self) -> str:
        return stage_key(self.topology, self.tx, self.state.name)


def map_state(ctx: StageContext, what: str) -> State:
    if isinstance(ctx.state, Sink):
        raise ConfigError(f"{ctx.where}: {ctx.state.name!r} is a sink; return its rows with "
                          f"txdag.trident.commit_to(frame, committer), not a {what}")
    if not isinstance(ctx.state, State):
        raise ConfigError(f"{ctx.where}: {ctx.state.name!r} is a key-value state; a {what} goes to a map state "
                          f"(txdag.topology.definition.State); write key-value states with txdag.trident.stateful")
    return ctx.state


def key_columns(ctx: StageContext, frame: DataFrame, what: str) -> list[str]:
    """``key_fields`` key columns then one value column, renamed k0.., v; a clear error otherwise."""
    n = map_state(ctx, what).key_fields
    if len(frame.columns) != n + 1:
        raise ConfigError(
            f"{ctx.where}: state {ctx.state.name!r} has key_fields={n}, so its {what} needs {n + 1} column(s) ({n} "
            f"key column(s), then the value), got {len(frame.columns)}: {frame.columns}; select the key columns and "
            f"put the value last, or change the State's key_fields"
        )
    return [f"k{i}" for i in range(n)]


def field_column(ctx: StageContext, frame: DataFrame, keys: list[str], types: dict[str, Any] | None = None) -> Column:
    """The state's hash field of each row (null when a key part is null): Spark expressions for the common
    shapes (joined strings, one string), the state's own key codec on the executors otherwise, so the field is
    exactly what ``KeyCodec.encode`` gives everywhere else. ``types`` (column -> Spark type) saves a schema round
    trip when the caller has the types already."""
    codec = map_state(ctx, "keyed output").codec()
    if not keys:
        return F.lit(GLOBAL_KEY[0])
    types = types or {f.name: f.dataType for f in frame.schema.fields}
    any_null = reduce(lambda a, b: a | b, [F.col(k).isNull() for k in keys])
    if isinstance(codec, JoinedKeyCodec):
        if not all(isinstance(types[k], StringType) for k in keys):
            raise ConfigError(f"{ctx.where}: state {ctx.state.name!r} joins its keys with {codec.sep!r}, "
                              f"so they must be strings; cast the key columns to string in process")
        return F.when(any_null, F.lit(None)).otherwise(F.concat_ws(codec.sep, *keys))
    where = ctx.state_where

    def encode(*parts: Any) -> str | None:
        if any(part is None for part in parts):
            return None
        try:
            return codec.encode(tuple(parts))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: cannot store key {parts!r}: {exc}") from None

    encoded = F.udf(encode, StringType(), useArrow=True)
    if len(keys) == 1 and isinstance(types[keys[0]], StringType):  # kept as is unless it starts with "["
        key = F.col(keys[0])
        return F.when(key.isNull(), F.lit(None)).when(key.startswith("["), encoded(key)).otherwise(key)
    return encoded(*[F.col(k) for k in keys])


def keyed_rows(ctx: StageContext, frame: DataFrame, keys: list[str], types: dict[str, Any]
               ) -> tuple[DataFrame, dict[str, tuple[str, JoinedKeyCodec]]]:
    """``refused, field, v`` of ``frame`` (key columns k0.., then v): the state's hash field of each row. A row whose
    key the state's JoinedKeyCodec refuses (a field but the last holds the separator, so it would share its hash
    field with another key) is ``refused``, its field the key's parts as a JSON array: staged_key sends it to
    write_rows, which records it as a rejection of the txid in the same Spark job (no other job, and no key reaches
    the driver). Also returned: write_rows's ``clashes`` for this state."""
    field = field_column(ctx, frame, keys, types)
    codec = map_state(ctx, "keyed output").codec()
    if not isinstance(codec, JoinedKeyCodec) or len(keys) < 2:
        return frame.select(F.lit(False).alias("refused"), field.alias("field"), "v"), {}
    tail = codec.sep[:-1]  # a field ending with the start of a longer separator moves a cut too

    def holds_sep(k: str) -> Column:
        return (F.concat(F.col(k), F.lit(tail)) if tail else F.col(k)).contains(codec.sep)

    refused = reduce(lambda a, b: a & b, [F.col(k).isNotNull() for k in keys]) & reduce(
        lambda a, b: a | b, [holds_sep(k) for k in keys[:-1]])
    rows = frame.select(refused.alias("refused"),
                        F.when(refused, F.to_json(F.array(*keys))).otherwise(field).alias("field"), "v")
    return rows, {clash_key(ctx.key): (ctx.state.name, codec)}


def staged_key(ctx: StageContext) -> Column:
    """The ``key`` column write_rows takes for keyed_rows's rows: the state's staging hash, or clash_key of it."""
    return F.when(F.col("refused"), F.lit(clash_key(ctx.key))).otherwise(F.lit(ctx.key)).alias("key")


def key_types(frame: DataFrame, keys: list[str]) -> dict[str, Any]:
    """The key columns' Spark types under their names k0.., from ``frame``'s schema (fetched once per DataFrame)."""
    return {k: f.dataType for k, f in zip(keys, frame.schema.fields)}


def check_sum(ctx: StageContext, frame: DataFrame) -> list[str]:
    """Key columns then a numeric partial; the key column names k0.."""
    keys = key_columns(ctx, frame, "DataFrame")
    value = frame.schema.fields[-1]
    if not isinstance(value.dataType, NumericType):
        raise ConfigError(f"{ctx.where}: the last column {value.name!r} of state {ctx.state.name!r} is "
                          f"{value.dataType.simpleString()}, not a number; put the partial (a count, a sum) last")
    return keys


def summed(ctx: StageContext, frame: DataFrame) -> tuple[DataFrame, dict[str, tuple[str, JoinedKeyCodec]]]:
    """``key, field, value``: the state's partials summed per hash field, the sum as the text Redis adds (refused
    keys marked: keyed_rows), and write_rows's ``clashes``."""
    keys = check_sum(ctx, frame)
    named = frame.toDF(*keys, "v")
    kind = frame.schema.fields[-1].dataType
    if isinstance(kind, DecimalType):  # a whole decimal is added as an integer, as encode_number does
        total = F.sum("v").cast("long") if kind.scale == 0 else F.sum("v").cast("double")
    else:
        total = F.sum("v")
    rows, clashes = keyed_rows(ctx, named, keys, key_types(frame, keys))
    rows = rows.groupBy("refused", "field").agg(total.alias("v"))
    kept = F.col("v").isNotNull() | F.col("refused")  # a refused key is recorded whatever its sum
    return rows.where(kept).select(staged_key(ctx), "field", F.col("v").cast("string").alias("value")), clashes


def stage_sums(outputs: list[tuple[StageContext, DataFrame]]) -> dict[str, OutputSpec]:
    """Every numeric-partials output of the job, staged in one Spark job (one pass of the executors' writers
    over the union of the states' summed partials), by state name."""
    if not outputs:
        return {}
    frames, clashes = [], {}
    for ctx, frame in outputs:
        rows, refused = summed(ctx, frame)
        frames.append(rows)
        clashes.update(refused)
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    ctx0 = outputs[0][0]
    written = write_rows(union, ctx0.client_spec, ctx0.tx, ctx0.topology,
                         {ctx.key: ctx.state_where for ctx, _ in outputs}, clashes=clashes)
    return {ctx.state.name: OutputSpec(SUM, written.get(ctx.key, 0)) for ctx, _ in outputs}


def stage_sum(ctx: StageContext, frame: DataFrame) -> OutputSpec:
    """One state's numeric partials (stage_sums of one)."""
    return stage_sums([(ctx, frame)])[ctx.state.name]


@dataclass(frozen=True)
class CombinedOutput:
    """A batch's partial aggregate per key (key columns, then the partial), merged into the state at commit time
    with ``aggregator.combine`` (Trident's persistentAggregate). The partials must already be combined per key."""

    frame: DataFrame
    aggregator: Any
    new_values: bool = False

    def check(self, ctx: StageContext) -> None:
        key_columns(ctx, self.frame, "persistent aggregate")
        ref_of(self.aggregator)

    def stage(self, ctx: StageContext) -> OutputSpec:
        ref = ref_of(self.aggregator)
        keys = key_columns(ctx, self.frame, "persistent aggregate")
        rows, clashes = keyed_rows(ctx, self.frame.toDF(*keys, "v"), keys, key_types(self.frame, keys))
        written = write_rows(rows.select(staged_key(ctx), "field", "v"), ctx.client_spec, ctx.tx, ctx.topology,
                             {ctx.key: ctx.state_where}, encode_json, clashes).get(ctx.key, 0)
        return OutputSpec(COMBINE, written, ref, {"new_values": self.new_values})


def check_output(ctx: StageContext, output: Any) -> None:
    """The output fits its state (columns, types): checked for every state before any is staged."""
    if isinstance(output, DataFrame):
        check_sum(ctx, output)
    elif callable(getattr(output, "stage", None)) and callable(getattr(output, "check", None)):
        output.check(ctx)
    else:
        raise ConfigError(f"{ctx.where}: process returned a {type(output).__name__} for state {ctx.state.name!r}; "
                          f"return a DataFrame (numeric partials) or a txdag.trident persistent aggregate")


def stage_output(ctx: StageContext, output: Any) -> OutputSpec:
    if isinstance(output, DataFrame):
        return stage_sum(ctx, output)
    return output.stage(ctx)


def encode_number(value: Any) -> str:
    if isinstance(value, Decimal):
        value = int(value) if value == value.to_integral_value() else float(value)
    return repr(value) if isinstance(value, float) else str(value)


def json_value(value: Any) -> Any:
    """What json.dumps cannot encode by itself: Spark's decimals, dates and timestamps."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def encode_json(value: Any) -> str:
    if hasattr(value, "asDict"):
        value = value.asDict(recursive=True)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=json_value)

"""run_job: one TransactionAttempt through a user's ``process``, its partials staged and sealed in Redis.

``process(batch)`` returns, per state name, a DataFrame whose last column is the numeric partial and whose
other columns are the state's key fields, in order (none for a global state). The runner checks that shape
against the topology's states before anything is written, sums per key (so a process that forgot to group
still stages each key once: Staging writes with HSET, a duplicate would overwrite), and seals last. A job
that dies before the seal leaves staging the commit refuses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import redis
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import NumericType

from txdag.attempt import TransactionAttempt
from txdag.definition import JobSpec, State
from txdag.errors import ConfigError
from txdag.spark.batch import batch_frame, client_for, read_batch
from txdag.staging import Staging

Process = Callable[[DataFrame], Mapping[str, DataFrame]]
Partials = dict[str, int | float]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobResult:
    """What one job did: tuples read, entries rejected, partials staged per state."""

    topology: str
    tx: TransactionAttempt
    batch_size: int
    rejected: int
    partials: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        staged = ", ".join(f"{name}={n}" for name, n in self.partials.items()) or "none"
        return (f"txdag job done: topology={self.topology} txid={self.tx.txid} attempt={self.tx.attempt} "
                f"batch={self.batch_size} rejected={self.rejected} partials: {staged}")


def _where(spec: JobSpec) -> str:
    return f"topology {spec.topology!r} txid {spec.tx.txid} attempt {spec.tx.attempt}"


def check_outputs(spec: JobSpec, outputs: Any) -> dict[State, DataFrame]:
    """Every output names a declared state and fits it (checked before anything is written)."""
    if not isinstance(outputs, Mapping):
        raise ConfigError(f"{_where(spec)}: process must return a dict of state name -> DataFrame, "
                          f"got {type(outputs).__name__}")
    states = {s.name: s for s in spec.states}
    for name in outputs:
        if name not in states:
            raise ConfigError(f"{_where(spec)}: process returned state {name!r}, which the topology does not "
                              f"declare (declared: {sorted(states)}); rename it or add State({name!r}) to the "
                              f"topology's states")
    return {states[name]: _check_frame(spec, states[name], frame) for name, frame in outputs.items()}


def _check_frame(spec: JobSpec, state: State, frame: Any) -> DataFrame:
    """``key_fields`` key columns, then one numeric column."""
    if not isinstance(frame, DataFrame):
        raise ConfigError(f"{_where(spec)}: process returned a {type(frame).__name__} for state {state.name!r}; "
                          f"return a DataFrame")
    columns = frame.schema.fields
    if len(columns) != state.key_fields + 1:
        raise ConfigError(
            f"{_where(spec)}: state {state.name!r} has key_fields={state.key_fields}, so its DataFrame needs "
            f"{state.key_fields + 1} column(s) ({state.key_fields} key column(s), then the numeric partial), "
            f"got {len(columns)}: {[c.name for c in columns]}; select the key columns and put the value "
            f"last, or change the State's key_fields"
        )
    if not isinstance(columns[-1].dataType, NumericType):
        raise ConfigError(
            f"{_where(spec)}: the last column {columns[-1].name!r} of state {state.name!r} is "
            f"{columns[-1].dataType.simpleString()}, not a number; put the partial (a count, a sum) last"
        )
    return frame


def _number(value: Any) -> int | float:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def collect_partials(spec: JobSpec, state: State, frame: DataFrame) -> Partials:
    """Sum per key in Spark, collect, encode each key as the state's hash field (summing fields that collide)."""
    keys = [f"k{i}" for i in range(state.key_fields)]
    summed = frame.toDF(*keys, "v").groupBy(*keys).agg(F.sum("v").alias("v")).where(F.col("v").isNotNull())
    codec, partials = state.codec(), Partials()
    for row in summed.collect():
        fields = tuple(row[:-1])
        if any(part is None for part in fields):
            raise ConfigError(f"{_where(spec)}: state {state.name!r} got a row with a null key {fields!r}; "
                              f"filter out rows with null keys in process")
        try:
            encoded = codec.encode(state.key(fields))
        except ValueError as exc:
            raise ConfigError(f"{_where(spec)}: state {state.name!r} cannot store key {fields!r}: {exc}") from None
        # Joined keys can collide (seed 000's "user:hashtag" with a ':' inside a token): add, as Storm did.
        partials[encoded] = partials.get(encoded, 0) + _number(row[-1])
    return partials


def run_job(
    spec: JobSpec, process: Process, clients: Mapping[str, redis.Redis], spark: SparkSession
) -> JobResult:
    """Read the batch, run ``process``, check its outputs, stage and seal the partials of each state."""
    state_client = client_for(clients, spec.redis_conn_id, spec)
    batch, rejected = read_batch(spec, clients)
    frame = batch_frame(spark, batch).cache()  # every state's query reads the batch again
    try:
        outputs = check_outputs(spec, process(frame))
        partials = {state.name: collect_partials(spec, state, out) for state, out in outputs.items()}
    finally:
        frame.unpersist()
    Staging(state_client, spec.topology).stage(spec.tx, partials)  # the `process` fault point is in there
    result = JobResult(spec.topology, spec.tx, len(batch), rejected, {n: len(p) for n, p in partials.items()})
    log.info("%s", result.summary())
    return result

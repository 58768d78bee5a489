"""run_job: one TransactionAttempt through a user's ``process``, its outputs staged and sealed in Redis.

``process(batch)`` returns, per state name, a DataFrame whose last column is the numeric partial and whose other
columns are the state's key fields, in order (none for a global state), or a txdag.trident persistent aggregate
(txdag.spark.outputs). The runner checks the names against the topology's states before anything is written,
stages each state from the Spark executors (summed per key, so a process that forgot to group still stages each
key once), and seals last. A job that dies before the seal leaves staging the commit refuses.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import redis
from pyspark.sql import DataFrame, SparkSession

from txdag.attempt import TransactionAttempt
from txdag.errors import ConfigError
from txdag.faults import crash_if_requested
from txdag.redisio import portable
from txdag.spark.batch import client_for, read_batch
from txdag.spark.context import JobContext, running
from txdag.spark.outputs import StageContext, check_output, stage_output, stage_sums
from txdag.staging.format import OutputSpec
from txdag.staging.store import Staging
from txdag.state.kv import ProviderConfig
from txdag.topology.definition import JobSpec, KeyValue, Sink, State

Process = Callable[[DataFrame], Mapping[str, Any]]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobResult:
    """What one job did: source entries read, those rejected, partials staged per state."""

    topology: str
    tx: TransactionAttempt
    batch_size: int | None  # source entries covered, tuples and rejections (None: a spout's read could not tell)
    rejected: int
    partials: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per step, in order (Timer)

    def summary(self) -> str:
        staged = ", ".join(f"{name}={n}" for name, n in self.partials.items()) or "none"
        spent = ", ".join(f"{step} {seconds:.3f} s" for step, seconds in self.timings.items())
        return (f"txdag job done: topology={self.topology} txid={self.tx.txid} attempt={self.tx.attempt} "
                f"batch={self.batch_size} rejected={self.rejected} partials: {staged}"
                + (f"; timings: {spent}" if spent else ""))

    def timed(self, step: str, seconds: float) -> JobResult:
        """This result with ``step`` (done before the job: an import, a connection) first in its timings."""
        return replace(self, timings={step: seconds, **self.timings})


class Timer:
    """Seconds per step of a job, for its summary line: where a txid's time went (issue 18's profile)."""

    def __init__(self) -> None:
        self.steps: dict[str, float] = {}
        self._last = time.perf_counter()

    def done(self, step: str) -> None:
        now = time.perf_counter()
        self.steps[step] = self.steps.get(step, 0.0) + now - self._last
        self._last = now


def _where(spec: JobSpec) -> str:
    return f"topology {spec.topology!r} txid {spec.tx.txid} attempt {spec.tx.attempt}"


def check_outputs(spec: JobSpec, outputs: Any, client_spec: dict[str, Any]) -> list[tuple[StageContext, Any]]:
    """Every output names a declared state and fits it (checked before anything is written)."""
    if not isinstance(outputs, Mapping):
        raise ConfigError(f"{_where(spec)}: process must return a dict of state name -> DataFrame, "
                          f"got {type(outputs).__name__}")
    declared: list[State | KeyValue | Sink] = [*spec.states, *spec.key_values, *spec.sinks]
    states = {s.name: s for s in declared}
    for name in outputs:
        if name not in states:
            raise ConfigError(f"{_where(spec)}: process returned state {name!r}, which the topology does not "
                              f"declare (declared: {sorted(states)}); rename it or add State({name!r}) to the "
                              f"topology's states")
    missing = sorted(s.name for s in spec.sinks if s.name not in outputs)
    if missing:
        raise ConfigError(f"{_where(spec)}: process returned nothing for sink(s) {missing}; a sink gets every txid, "
                          f"in txid order: return txdag.trident.commit_to(frame, committer) for each (an empty "
                          f"frame is fine)")
    checked = []
    for name, output in outputs.items():
        ctx = StageContext(spec.topology, spec.tx, states[name], client_spec)
        check_output(ctx, output)
        checked.append((ctx, output))
    return checked


def run_job(
    spec: JobSpec, process: Process, clients: Mapping[str, redis.Redis], spark: SparkSession,
    kv_configs: Mapping[str, ProviderConfig] | None = None, *,
    kafka_configs: Mapping[str, Mapping[str, Any]] | None = None,
) -> JobResult:
    """Read the batch, run ``process``, check its outputs, stage each state from the executors, seal.
    ``kv_configs`` are the key-value states' provider configs, by name (txdag.topology.kvstates); ``kafka_configs``
    the Kafka client configurations of the source's connections."""
    timer = Timer()
    state_client = client_for(clients, spec.redis_conn_id, spec)
    read = read_batch(spec, clients, spark, kafka_configs or {})
    timer.done("read")
    frame = read.frame
    staged: dict[str, OutputSpec] = {}
    cached = False
    try:
        job = JobContext(spec, portable(state_client), kv_configs or {})
        with running(job):
            returned = process(frame)
        outputs = check_outputs(spec, returned, job.client_spec)
        timer.done("plan")
        several = any(not isinstance(out, DataFrame) for _, out in outputs)  # several Spark jobs read the batch
        if several and read.cached is None:  # (a read with rejections is cached already: frame is a view of it)
            frame.cache()
            cached = True
        # the numeric partials of every state in one Spark job, then the other outputs one by one; the fault point
        # follows the first step that staged something: staged in part, not sealed, a crash must not commit
        staged.update(stage_sums([(ctx, out) for ctx, out in outputs if isinstance(out, DataFrame)]))
        if staged:
            crash_if_requested("process", spec.topology, spec.tx)
        for ctx, output in outputs:
            if not isinstance(output, DataFrame):
                staged[ctx.state.name] = stage_output(ctx, output)
                crash_if_requested("process", spec.topology, spec.tx)
    finally:
        if cached:
            frame.unpersist()
        if read.cached is not None:
            read.cached.unpersist()
    timer.done("stage")
    Staging(state_client, spec.topology).seal(spec.tx, staged)
    timer.done("seal")
    result = JobResult(spec.topology, spec.tx, read.size, read.rejected, {n: o.count for n, o in staged.items()},
                       timer.steps)
    log.info("%s", result.summary())
    return result

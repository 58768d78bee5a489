"""Trident's operation contracts in Python (seeds 001 and 004): the three aggregator kinds and QueryFunction.

Pure Python, importing no pyspark: the same objects run inside Spark executors (``txdag.trident.operations``)
and in plain Python, so a commit can merge a batch's partial into a stored value with ``combine``/``zero``
(:func:`combiner_updater`) without Spark. The ``fold_*`` and :func:`apply` kernels are exactly what the
executors run per partition or per group; they take any iterable of rows (a row is what the executor hands
over: a ``pyspark.sql.Row`` of the input fields, readable by name or position; a dict works in plain Python).

A value that crosses Spark (a combiner's partial, a reducer's result, an emitted row) is in its column's Python
form: ``int``/``float``/``str``/``bool``/``Decimal``/``None``, a ``list`` for an array, a ``dict`` for a struct
or a map. That is what phase 2 of a two-phase aggregate and the commit get back, so ``combine`` must take it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from txdag.attempt import TransactionAttempt
from txdag.errors import ConfigError, TxdagError

Schema = Any
"""A Spark DDL string (``"count bigint"``) or a ``pyspark.sql.types.StructType``."""


class Collector:
    """Trident's TridentCollector: ``emit(*values)`` adds one output row (the values of the schema's columns)."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def emit(self, *values: Any) -> None:
        self.rows.append(values)


class _Declared:
    """What every operation declares: the columns it emits, and the input columns it reads."""

    schema: Schema | None = None
    fields: tuple[str, ...] | None = None  # input columns it needs when the call names none (None: all)

    def output_schema(self, input_schema: Any) -> Schema | None:
        """Its output schema given the input's ``StructType``; most return ``schema``, built-ins derive it."""
        return self.schema

    def native(self, input_schema: Any) -> Any:
        """A Spark ``Column`` computing the same aggregate natively (the fast path), or None."""
        return None

    def __repr__(self) -> str:
        return type(self).__name__


class CombinerAggregator(_Declared):
    """``init(row)`` maps a row to a value, ``combine`` merges two values, ``zero`` is the identity of combine.

    ``combine`` must be associative (and ``zero`` neutral) because a batch is aggregated in two phases: per
    partition, then the partials. Emits one column: the value.
    """

    def init(self, row: Any) -> Any:
        raise NotImplementedError

    def combine(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def zero(self) -> Any:
        raise NotImplementedError


class ReducerAggregator(_Declared):
    """``init()`` is the start value, ``reduce(current, row)`` folds one row in. Sees every row of the batch (or
    group) in one place, so it needs neither associativity nor an identity. Emits one column: the value."""

    def init(self) -> Any:
        raise NotImplementedError

    def reduce(self, current: Any, row: Any) -> Any:
        raise NotImplementedError


class Aggregator(_Declared):
    """The general form: ``init(batch_id)`` makes a state, ``aggregate(state, row, collector)`` folds a row in (it
    returns the new state, or None to keep the state it mutated), ``complete(state, collector)`` emits the
    result rows: zero or more per partition or group."""

    def init(self, batch_id: Any) -> Any:
        raise NotImplementedError

    def aggregate(self, state: Any, row: Any, collector: Collector) -> Any:
        raise NotImplementedError

    def complete(self, state: Any, collector: Collector) -> None:
        raise NotImplementedError


class QueryFunction(_Declared):
    """Trident's QueryFunction over a map state (seed 004's QueryLocation): ``batch_retrieve`` gets the committed
    values of a partition's rows, read in one round trip, and returns one result per row (by default the values
    themselves); ``execute(row, result, collector)`` emits the columns appended to the row (zero or more rows)."""

    def batch_retrieve(self, state_values: list[Any], rows: list[Any]) -> list[Any]:
        return list(state_values)

    def execute(self, row: Any, value: Any, collector: Collector) -> None:
        collector.emit(value)


class StateUpdater:
    """Trident's StateUpdater (seed 004's LocationUpdater), for ``partition_persist``: ``update_state(state, rows,
    collector)`` updates ``state`` (the map state, its txid already open) with the batch's rows, at the commit, in
    txid order; what it emits goes to the state's new values stream."""

    def update_state(self, state: Any, rows: list[Any], collector: Collector) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return type(self).__name__


class Committer:
    """Storm's committer bolt (``ICommitter``) for ``txdag.trident.commit_to``: at the commit of each txid, strictly
    in txid order, ``commit(tx, rows)`` gets the rows the job returned for its sink (a file, a table, a queue the
    user owns). The sink, not txdag, keeps the last txid (and attempt) it applied, written with the rows in one
    step where it can; ``last_applied()`` reads it back. txdag skips the call when the sink already holds this
    attempt of the txid, or a later attempt of it (a commit retried after the sink applied it), and halts the
    commit before anything is written, naming the txids, when the sink holds a later txid or is behind by more than
    one. A later attempt of the txid (its commit failed for good and its run was replayed) is committed again, with
    the same rows (a txid's batch is frozen once its commit began): the sink replaces what it holds for the txid.

    A committer is rebuilt in the commit task from its class in the job file and its constructor's parameters
    (JSON values: a path, a table name, a connection id), never pickled."""

    def last_applied(self) -> TransactionAttempt | None:
        raise NotImplementedError

    def commit(self, tx: TransactionAttempt, rows: list[Any]) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return type(self).__name__


class MapGet(QueryFunction):
    """Trident's MapGet: appends the committed value of each row's key (None when the key has none)."""

    def __init__(self, schema: Schema = "value bigint") -> None:
        self.schema = schema


AnyAggregator = CombinerAggregator | ReducerAggregator | Aggregator
AGGREGATOR_KINDS = (CombinerAggregator, ReducerAggregator, Aggregator)


class AggregatorError(TxdagError):
    """A user's aggregator or query function raised; the message names it, the method and the row."""


def describe(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def call(who: Any, method: str, fn: Callable[..., Any], *args: Any, row: Any = None) -> Any:
    """``fn(*args)``, an exception becoming AggregatorError naming ``who.method`` and the row it was on."""
    try:
        return fn(*args)
    except TxdagError:
        raise
    except Exception as exc:
        at = f" at row {describe(row)}" if row is not None else ""
        raise AggregatorError(f"{who!r}.{method} raised {type(exc).__name__}: {exc}{at}; fix the aggregator (it "
                              f"runs on Spark executors, and in plain Python at the commit)") from exc


def check_aggregator(agg: Any) -> AnyAggregator:
    if not isinstance(agg, AGGREGATOR_KINDS):
        raise ConfigError(f"{agg!r} is not an aggregator: subclass txdag.trident.CombinerAggregator, "
                          f"ReducerAggregator or Aggregator")
    return agg


def add_row(agg: CombinerAggregator, acc: Any, row: Any) -> Any:
    return call(agg, "combine", agg.combine, acc, call(agg, "init", agg.init, row, row=row), row=row)


def fold_rows(agg: CombinerAggregator, rows: Iterable[Any]) -> Any:
    """Phase 1 of a combiner: ``zero`` combined with ``init`` of each row."""
    acc = call(agg, "zero", agg.zero)
    for row in rows:
        acc = add_row(agg, acc, row)
    return acc


def fold_values(agg: CombinerAggregator, values: Iterable[Any]) -> Any:
    """Phase 2 of a combiner: ``zero`` combined with each partial."""
    acc = call(agg, "zero", agg.zero)
    for value in values:
        acc = call(agg, "combine", agg.combine, acc, value)
    return acc


def fold_reduce(agg: ReducerAggregator, rows: Iterable[Any]) -> Any:
    acc = call(agg, "init", agg.init)
    for row in rows:
        acc = call(agg, "reduce", agg.reduce, acc, row, row=row)
    return acc


def run_aggregator(agg: Aggregator, rows: Iterable[Any], batch_id: Any = None) -> list[tuple[Any, ...]]:
    """init, aggregate each row, complete: the rows it emitted (from aggregate and complete)."""
    collector = Collector()
    state = call(agg, "init", agg.init, batch_id)
    for row in rows:
        new = call(agg, "aggregate", agg.aggregate, state, row, collector, row=row)
        state = state if new is None else new
    call(agg, "complete", agg.complete, state, collector)
    return collector.rows


def apply(agg: AnyAggregator, rows: Iterable[Any], batch_id: Any = None) -> list[tuple[Any, ...]]:
    """The output rows of ``agg`` over ``rows`` seen as one partition or group (one row for combiners and
    reducers)."""
    if isinstance(agg, CombinerAggregator):
        return [(fold_rows(agg, rows),)]
    if isinstance(agg, ReducerAggregator):
        return [(fold_reduce(agg, rows),)]
    check_aggregator(agg)
    return run_aggregator(agg, rows, batch_id)


def reducer_updater(agg: ReducerAggregator, rows: list[Any]) -> Callable[[Any], Any]:
    """Trident's ReducerValueUpdater: folds a batch's rows of one key into the stored value (``init()`` where
    nothing is stored). For ``MapState.multi_update`` at commit time; no Spark."""
    def update(old: Any) -> Any:
        acc = call(agg, "init", agg.init) if old is None else old
        for row in rows:
            acc = call(agg, "reduce", agg.reduce, acc, row, row=row)
        return acc

    return update


def column_value(value: Any) -> Any:
    """A value collected from a result DataFrame in its column's Python form: ``collect()`` gives a struct as a
    ``pyspark.sql.Row``, the executors (and ``combine``) see it as a dict. Duck-typed: imports no pyspark."""
    if isinstance(value, tuple) and hasattr(value, "asDict"):
        return {k: column_value(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [column_value(v) for v in value]
    if isinstance(value, dict):
        return {k: column_value(v) for k, v in value.items()}
    return value


def combiner_updater(agg: CombinerAggregator, partial: Any) -> Callable[[Any], Any]:
    """Trident's CombinerValueUpdater: a map state's updater adding a batch's ``partial`` to the stored value
    (``partial`` itself where nothing is stored). For ``MapState.multi_update`` at commit time; no Spark."""
    if not isinstance(agg, CombinerAggregator):
        raise ConfigError(f"{agg!r} is not a CombinerAggregator: only combiners merge a partial into a stored value")
    return lambda old: partial if old is None else call(agg, "combine", agg.combine, old, partial)

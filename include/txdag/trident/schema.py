"""Output schemas of aggregators and query functions, checked on the driver when an operation is called.

A schema is a Spark DDL string or a StructType. It is resolved and checked before any executor runs, so a
missing or wrong one fails the call with what to write, not deep inside a Python worker: a DDL string must
parse and name its columns, a combiner or reducer emits exactly one column, and the value the aggregator
gives for an empty input (``zero()``, ``init()``, or what ``complete`` emits after ``init``) must convert to
the declared columns and come back unchanged (a tuple where the column is a struct comes back as a dict, and
the next phase would get the dict: write the column's Python form). Needs pyspark's types and pyarrow, no JVM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from txdag.contracts import (
    Aggregator,
    AggregatorError,
    CombinerAggregator,
    ReducerAggregator,
    describe,
    run_aggregator,
)
from txdag.errors import ConfigError

HOW = "set `schema = 'name type, ...'` (a Spark DDL string such as 'total double, n bigint') or a StructType"


def resolve(who: Any, input_schema: StructType, parse: Callable[[str], Any]) -> StructType:
    """``who``'s output schema as a StructType; ``parse`` turns a DDL string into a Spark type (the session's)."""
    declared = who.output_schema(input_schema)
    if declared is None or (isinstance(declared, str) and not declared.strip()):
        raise ConfigError(f"{who!r} declares no output schema: {HOW}")
    if isinstance(declared, str):
        text = declared
        try:
            declared = parse(text)
        except Exception as exc:  # pyspark's ParseException, or a Connect error carrying it
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"{who!r} has schema {text!r}, which Spark cannot parse ({first}); {HOW}") from None
    if not isinstance(declared, StructType):
        raise ConfigError(f"{who!r} has schema {declared!r}, not a list of named columns; {HOW}")
    if not declared.fields:
        raise ConfigError(f"{who!r} has a schema without columns; {HOW}")
    return declared


def check_clash(who: Any, schema: StructType, taken: Sequence[str], what: str) -> None:
    """Output columns may not reuse the names of ``taken`` (the grouping fields, or the input's columns)."""
    clash = sorted(set(schema.fieldNames()) & set(taken))
    if clash:
        raise ConfigError(f"{who!r} emits column(s) {clash} that clash with the {what}; rename them in its schema")
    names = schema.fieldNames()
    if len(set(names)) != len(names):
        raise ConfigError(f"{who!r} has a schema with duplicate column names {names}; {HOW}")


def check_output(agg: Any, schema: StructType, batch_id: Any = None) -> None:
    """The kind's arity, and what it gives for an empty input, converted to ``schema`` and back."""
    if isinstance(agg, CombinerAggregator | ReducerAggregator):
        if len(schema.fields) != 1:
            kind = "CombinerAggregator" if isinstance(agg, CombinerAggregator) else "ReducerAggregator"
            raise ConfigError(f"{agg!r} is a {kind}, which emits one column (its value), but its schema has "
                              f"{len(schema.fields)}: {schema.fieldNames()}; declare one column (a struct if the value "
                              f"has parts), or write an Aggregator")
        value = agg.zero() if isinstance(agg, CombinerAggregator) else agg.init()
        what = "zero()" if isinstance(agg, CombinerAggregator) else "init()"
        check_rows(agg, schema, [(value,)], what, round_trip=True)
    elif isinstance(agg, Aggregator):
        try:
            emitted = run_aggregator(agg, [], batch_id)
        except AggregatorError:  # it may assume rows (a group never is empty): checked on the executors then
            return
        check_rows(agg, schema, emitted, "complete() of an empty input")


def check_rows(who: Any, schema: StructType, rows: Sequence[tuple[Any, ...]], what: str,
               round_trip: bool = False) -> None:
    """Every row has one value per column and converts; with ``round_trip``, comes back equal."""
    batch = to_record_batch(who, schema, list(rows), what)
    if round_trip:
        back = [tuple(r.values()) for r in batch.to_pylist(maps_as_pydicts="lossy")]
        if back != list(rows):
            raise ConfigError(f"{who!r}: {what} is {describe(rows[0][0])}, which comes back from its column "
                              f"{schema.fields[0].dataType.simpleString()} as {describe(back[0][0])}; the next phase "
                              f"and the commit would get the latter: use the column's Python form (a list for an "
                              f"array, a dict for a struct or a map)")


def arrow_schema(schema: StructType) -> pa.Schema:
    return to_arrow_schema(schema, timezone="UTC")


def to_record_batch(who: Any, schema: StructType, rows: list[tuple[Any, ...]], what: str) -> pa.RecordBatch:
    """``rows`` as an Arrow batch of ``schema``; a value that does not fit names ``who``, the row and the column."""
    names = schema.fieldNames()
    for row in rows:
        if not isinstance(row, tuple) or len(row) != len(names):
            raise ConfigError(f"{who!r}: {what} gave {describe(row)}, but its schema has {len(names)} column(s) "
                              f"{names}: emit one value per column, or fix the schema")
    target = arrow_schema(schema)
    columns: list[Sequence[Any]] = list(zip(*rows)) if rows else [[] for _ in target]
    arrays = []
    for field, values in zip(target, columns):
        try:
            arrays.append(pa.array(list(values), type=field.type))
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            bad = next((r for r in rows if not _fits(r[len(arrays)], field.type)), None)
            raise ConfigError(f"{who!r}: {what} gave a value that does not fit column {field.name!r} "
                              f"({schema[field.name].dataType.simpleString()}) in row {describe(bad)}: {exc}; "
                              f"emit values of the declared types, or fix the schema") from None
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def _fits(value: Any, arrow_type: pa.DataType) -> bool:
    try:
        pa.array([value], type=arrow_type)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return False
    return True

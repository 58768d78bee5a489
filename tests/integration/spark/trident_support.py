"""Aggregators and references of the txdag.trident Spark tests (imported by name, like spark_support).

The aggregators here are user classes in a module the executors cannot import: txdag.trident ships them by value,
as it must for a job file. References are computed in plain Python with the same contracts over the same rows.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from decimal import Decimal
from typing import Any

from pyspark.sql import Row

from txdag.contracts import apply
from txdag.trident import Aggregator, CombinerAggregator, Count, Max, Min, ReducerAggregator, Sum

SCHEMA = "user string, score bigint, amount double, price decimal(10,2), missing bigint"


def make_rows(n: int = 60) -> list[dict[str, Any]]:
    """Users u0..u3 and some null users; scores with nulls; halves (exact float sums); a column of nulls."""
    return [{"user": None if i % 7 == 0 else f"u{i % 4}", "score": None if i % 5 == 0 else i * 3 - 50,
             "amount": i * 0.5, "price": Decimal(i) / 4, "missing": None} for i in range(1, n + 1)]


class Distinct(CombinerAggregator):
    """A set union kept as a sorted list (array<string>'s Python form)."""

    schema = "users array<string>"
    fields = ("user",)

    def init(self, row):
        return [] if row["user"] is None else [row["user"]]

    def combine(self, a, b):
        return sorted(set(a) | set(b))

    def zero(self):
        return []


class Mean(CombinerAggregator):
    """A (total, n) pair as a struct: associative, not a sum of one number."""

    schema = "mean struct<total:double, n:bigint>"
    fields = ("amount",)

    def init(self, row):
        return {"total": row["amount"], "n": 1}

    def combine(self, a, b):
        return {"total": a["total"] + b["total"], "n": a["n"] + b["n"]}

    def zero(self):
        return {"total": 0.0, "n": 0}


class Histogram(ReducerAggregator):
    """Rows per score bucket (a map column)."""

    schema = "histogram map<string,bigint>"

    def init(self):
        return {}

    def reduce(self, current, row):
        bucket = "none" if row["score"] is None else str(row["score"] % 3)
        return {**current, bucket: current.get(bucket, 0) + 1}


class UserCounts(Aggregator):
    """Seed 001's OriginUserCountAggregator: the batch id and a map user -> rows, emitted by complete."""

    schema = "batch string, counts map<string,bigint>"

    def init(self, batch_id):
        return {"batch": batch_id, "counts": {}}

    def aggregate(self, state, row, collector):
        user = row["user"] or "?"
        state["counts"][user] = state["counts"].get(user, 0) + 1

    def complete(self, state, collector):
        collector.emit(state["batch"], state["counts"])


class MergeCounts(CombinerAggregator):
    """Seed 001's AggAgg: merges the per-partition maps of UserCounts."""

    schema = "agg map<string,bigint>"
    fields = ("counts",)

    def init(self, row):
        return row["counts"]

    def combine(self, a, b):
        return {k: a.get(k, 0) + b.get(k, 0) for k in {**a, **b}}

    def zero(self):
        return {}


def aggregators() -> dict[str, tuple[Any, bool]]:
    """Every kind, by test id: (aggregator, native)."""
    return {
        "count-native": (Count(), True), "count": (Count(), False), "sum": (Sum("score"), False),
        "sum-decimal": (Sum("price"), False), "min": (Min("score"), False), "max": (Max("amount"), False),
        "set-union": (Distinct(), False), "mean-pair": (Mean(), False),
        "reducer": (Histogram(), False), "aggregator": (UserCounts(), False),
    }


def plain(value: Any) -> Any:
    """A collected value in the column's Python form (a struct's Row as a dict)."""
    if isinstance(value, Row):
        return {k: plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def rows_of(frame: Any) -> list[tuple]:
    return [tuple(plain(v) for v in row) for row in frame.collect()]


def canonical(value: Any) -> Any:
    """``value`` with every dict as its sorted items: equal values then have equal reprs."""
    if isinstance(value, dict):
        return sorted(((repr(k), canonical(v)) for k, v in value.items()), key=repr)
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    return value


def bag(rows: list[tuple]) -> list[tuple]:
    """Rows in a canonical order, to compare as multisets (a dict's repr depends on its insertion order)."""
    return sorted(rows, key=lambda row: repr(canonical(row)))


def by_user(rows: list[dict[str, Any]], agg: Any, batch_id: Any = None) -> list[tuple]:
    """The reference of group_by(df, "user").aggregate(agg)."""
    groups: dict[Any, list] = defaultdict(list)
    for row in rows:
        groups[row["user"]].append(row)
    return bag([(user, *out) for user, members in groups.items() for out in apply(agg, members, batch_id)])


def user_counter(rows: list[dict[str, Any]]) -> dict[str, int]:
    return dict(Counter(row["user"] or "?" for row in rows))

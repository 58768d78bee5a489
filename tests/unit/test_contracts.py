"""txdag.contracts (Trident's aggregator contracts) on plain Python lists: the kernels the executors run, the
built-ins, the seed 001 property (a batch cut into partitions aggregates to the same value), and the commit-time
merge."""

import subprocess
import sys
from collections import Counter
from decimal import Decimal

import pytest

from txdag.contracts import apply, check_aggregator, fold_reduce, fold_rows, fold_values, run_aggregator
from txdag.errors import ConfigError
from txdag.state import MemoryBackingMap, TransactionalMap
from txdag.trident import (
    Aggregator,
    AggregatorError,
    CombinerAggregator,
    Count,
    Max,
    Min,
    ReducerAggregator,
    Sum,
    column_value,
    combiner_updater,
)

ROWS = [{"user": None if i % 7 == 0 else f"u{i % 4}", "score": None if i % 5 == 0 else i, "amount": i * 0.5}
        for i in range(1, 41)]


class Distinct(CombinerAggregator):
    """A set union kept as a sorted list (the column's Python form of array<string>)."""

    schema = "users array<string>"

    def init(self, row):
        return [] if row["user"] is None else [row["user"]]

    def combine(self, a, b):
        return sorted(set(a) | set(b))

    def zero(self):
        return []


class Mean(CombinerAggregator):
    """A (total, n) pair: associative, and not a plain sum of one number."""

    schema = "mean struct<total:double, n:bigint>"

    def init(self, row):
        return {"total": row["amount"], "n": 1}

    def combine(self, a, b):
        return {"total": a["total"] + b["total"], "n": a["n"] + b["n"]}

    def zero(self):
        return {"total": 0.0, "n": 0}


class Histogram(ReducerAggregator):
    schema = "histogram map<string,bigint>"

    def init(self):
        return {}

    def reduce(self, current, row):
        bucket = "none" if row["score"] is None else str(row["score"] % 3)
        return {**current, bucket: current.get(bucket, 0) + 1}


class UserCounts(Aggregator):
    """Seed 001's OriginUserCountAggregator: a map of user -> rows, mutated in place, emitted by complete."""

    schema = "counts map<string,bigint>"

    def init(self, batch_id):
        return {}

    def aggregate(self, state, row, collector):
        user = row["user"] or "?"
        state[user] = state.get(user, 0) + 1

    def complete(self, state, collector):
        collector.emit(state)


def cut(rows, parts):
    """``rows`` dealt round-robin into ``parts`` partitions (what repartition(n) does)."""
    return [rows[i::parts] for i in range(parts)]


COMBINERS = [Count(), Sum("score"), Min("score"), Max("amount"), Distinct(), Mean()]


@pytest.mark.parametrize("agg", COMBINERS, ids=repr)
@pytest.mark.parametrize("parts", [1, 3, 7])
def test_combining_per_partition_partials_gives_the_whole_batch_value(agg, parts):
    partials = [fold_rows(agg, part) for part in cut(ROWS, parts)]
    assert fold_values(agg, partials) == fold_rows(agg, ROWS)


def test_builtins_skip_nulls_and_give_zero_for_nothing():
    scores = [r["score"] for r in ROWS if r["score"] is not None]
    assert fold_rows(Count(), ROWS) == 40
    assert fold_rows(Sum("score"), ROWS) == sum(scores)
    assert (fold_rows(Min("score"), ROWS), fold_rows(Max("score"), ROWS)) == (min(scores), max(scores))
    assert [fold_rows(a, []) for a in (Count(), Sum("score"), Min("score"), Max("score"))] == [0, 0, None, None]
    nulls = [{"score": None}] * 3
    assert [fold_rows(a, nulls) for a in (Count(), Sum("score"), Min("score"))] == [3, 0, None]
    assert fold_rows(Sum("x"), [{"x": Decimal("1.25")}, {"x": Decimal("2.5")}]) == Decimal("3.75")


def test_min_and_max_order_nan_as_spark_does():
    nan = float("nan")
    for values in ([1.5, nan, -2.0], [nan, 1.5, -2.0], [-2.0, 1.5, nan]):
        rows = [{"x": v} for v in values]
        assert fold_rows(Min("x"), rows) == -2.0
        assert str(fold_rows(Max("x"), rows)) == "nan"
    assert str(fold_rows(Min("x"), [{"x": nan}, {"x": None}])) == "nan"


def test_custom_combiners_on_a_list():
    assert fold_rows(Distinct(), ROWS) == ["u0", "u1", "u2", "u3"]
    mean = fold_rows(Mean(), ROWS)
    assert mean == {"total": sum(r["amount"] for r in ROWS), "n": 40}


def test_reducer_and_general_aggregator_see_every_row():
    expected = Counter("none" if r["score"] is None else str(r["score"] % 3) for r in ROWS)
    assert fold_reduce(Histogram(), ROWS) == dict(expected)
    assert fold_reduce(Histogram(), []) == {}
    assert run_aggregator(UserCounts(), ROWS) == [(dict(Counter(r["user"] or "?" for r in ROWS)),)]
    assert apply(Histogram(), ROWS) == [(dict(expected),)]
    assert apply(Count(), ROWS) == [(40,)]


def test_general_aggregator_state_returned_or_mutated_and_batch_id_passed():
    class Sizes(Aggregator):
        schema = "batch string, n bigint"

        def init(self, batch_id):
            return (batch_id, 0)

        def aggregate(self, state, row, collector):
            if row["score"] == 3:
                collector.emit("three", 0)  # emitting from aggregate is allowed too
            return (state[0], state[1] + 1)

        def complete(self, state, collector):
            collector.emit(*state)

    assert run_aggregator(Sizes(), ROWS, batch_id="7:1") == [("three", 0), ("7:1", 40)]
    assert run_aggregator(Sizes(), [], batch_id="7:1") == [("7:1", 0)]


def test_a_failing_aggregator_is_named_with_its_method_and_row():
    class Broken(CombinerAggregator):
        schema = "x bigint"

        def init(self, row):
            return 1 // row["score"]

        def combine(self, a, b):
            return a + b

        def zero(self):
            return 0

    with pytest.raises(AggregatorError, match=r"Broken\.init raised ZeroDivisionError.*at row \{.*'score': 0"):
        fold_rows(Broken(), [{"score": 1}, {"score": 0}])


def test_only_aggregators_are_accepted():
    with pytest.raises(ConfigError, match="is not an aggregator"):
        check_aggregator(lambda rows: len(rows))
    with pytest.raises(ConfigError, match="only combiners merge"):
        combiner_updater(Histogram(), {})
    with pytest.raises(ConfigError, match="needs a column name"):
        Sum("")


def test_combiner_updater_merges_a_batch_partial_into_a_map_state_without_spark():
    """The commit path of a persistent aggregate: partials per key from a batch, merged with combine."""
    state = TransactionalMap(MemoryBackingMap())
    for txid, batch in [(1, ROWS[:15]), (2, ROWS[15:]), (2, ROWS[15:])]:  # txid 2 is replayed: no change
        partials = {}
        for row in batch:
            key = (row["user"] or "?",)
            partials[key] = Mean().combine(partials.get(key, Mean().zero()), Mean().init(row))
        state.begin_commit(txid)
        state.multi_update(list(partials), [combiner_updater(Mean(), p) for p in partials.values()])
        state.commit(txid)
    state.begin_commit(3)
    users = sorted({r["user"] or "?" for r in ROWS})
    got = dict(zip(users, state.multi_get([(u,) for u in users])))
    want = {u: fold_rows(Mean(), [r for r in ROWS if (r["user"] or "?") == u]) for u in users}
    assert got == want


def test_column_value_turns_a_collected_struct_row_into_the_dict_combine_takes():
    from pyspark.sql import Row

    collected = Row(total=3.0, n=2)
    assert column_value(collected) == {"total": 3.0, "n": 2}
    assert column_value([Row(a=Row(b=1))]) == [{"a": {"b": 1}}]
    assert column_value({"k": Row(x=None)}) == {"k": {"x": None}}
    assert column_value((1, 2)) == (1, 2) and column_value("s") == "s"
    assert Mean().combine(Mean().zero(), column_value(collected)) == {"total": 3.0, "n": 2}


def test_the_contracts_and_builtins_import_no_pyspark():
    code = ("import sys, txdag.trident as t; from txdag.trident import Count, Sum, combiner_updater; "
            "from txdag import contracts; from txdag.trident import aggregators; assert Count().combine(1, 2) == 3; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'pyarrow')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

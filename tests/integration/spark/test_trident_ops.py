"""txdag.trident's operations on a real local Spark: seed 001's property (a batch cut into 1, 3 or 7 partitions
aggregates to what the whole batch does, for every aggregator kind and every operation), native against generic
built-ins, empty batches, nulls, and errors at the call."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from trident_support import (
    SCHEMA,
    Distinct,
    MergeCounts,
    UserCounts,
    aggregators,
    bag,
    by_user,
    make_rows,
    plain,
    rows_of,
    user_counter,
)

from txdag.contracts import apply
from txdag.trident import Aggregator, Count, Max, Min, Sum, aggregate, group_by, partition_aggregate

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
ROWS = make_rows()
AGGREGATORS = aggregators()
PARTS = (1, 3, 7)


@pytest.fixture(scope="module")
def batches(spark):
    """The same batch cut into 1, 3 and 7 non-empty partitions (cached, so every job sees the same cut), and the
    rows of each partition as the reference sees them."""
    base = spark.createDataFrame([tuple(r.values()) for r in ROWS], SCHEMA)
    cut = {}
    for n in PARTS:
        frame = base.repartition(n).cache()
        tagged = frame.withColumn("p", F.spark_partition_id()).collect()
        parts = [[{k: v for k, v in r.asDict().items() if k != "p"} for r in tagged if r.p == p] for p in range(n)]
        assert all(parts), f"repartition({n}) left an empty partition; the property needs {n} non-empty ones"
        cut[n] = (frame, parts)
    yield cut
    for frame, _ in cut.values():
        frame.unpersist()


@pytest.mark.parametrize("name", AGGREGATORS)
def test_global_aggregate_is_the_whole_batch_value_for_1_3_7_partitions(batches, name):
    agg, native = AGGREGATORS[name]
    expected = apply(agg, ROWS, "b1")
    for n in PARTS:
        assert rows_of(aggregate(batches[n][0], agg, batch_id="b1", native=native)) == expected, f"{n} partitions"


@pytest.mark.parametrize("name", AGGREGATORS)
def test_group_by_aggregate_is_the_whole_batch_value_per_key_for_1_3_7_partitions(batches, name):
    agg, native = AGGREGATORS[name]
    expected = by_user(ROWS, agg, "b1")
    assert len(expected) >= 5  # u0..u3 and the null user
    for n in PARTS:
        got = group_by(batches[n][0], "user").aggregate(agg, batch_id="b1", native=native)
        assert bag(rows_of(got)) == expected, f"{n} partitions"


@pytest.mark.parametrize("name", AGGREGATORS)
def test_partition_aggregate_gives_one_result_set_per_partition(batches, name):
    agg, native = AGGREGATORS[name]
    for n in PARTS:
        frame, parts = batches[n]
        expected = bag([out for part in parts for out in apply(agg, part, "b1")])
        assert len(expected) == n  # every kind here emits one row per partition
        got = rows_of(partition_aggregate(frame, agg, batch_id="b1", native=native))
        assert bag(got) == expected, f"{n} partitions"


def test_seed_001_partition_aggregate_then_aggregate_with_a_combiner_counts_the_whole_batch(batches):
    """partitionAggregate(OriginUserCountAggregator) then aggregate(AggAgg): one map per partition, merged."""
    for n in PARTS:
        per_partition = partition_aggregate(batches[n][0], UserCounts(), batch_id="1:0")
        assert per_partition.count() == n
        assert rows_of(aggregate(per_partition, MergeCounts())) == [(user_counter(ROWS),)], f"{n} partitions"


@pytest.mark.parametrize("agg", [Count(), Sum("score"), Sum("amount"), Sum("price"), Min("user"), Max("score"),
                                 Sum("missing"), Min("missing")], ids=repr)
def test_builtins_native_and_generic_agree_on_values_and_types(batches, agg):
    frame = batches[3][0]
    for op in (lambda native: aggregate(frame, agg, native=native),
               lambda native: group_by(frame, "user").aggregate(agg, native=native),
               lambda native: partition_aggregate(frame, agg, native=native)):
        native, generic = op(True), op(False)
        assert [(f.name, f.dataType) for f in native.schema] == [(f.name, f.dataType) for f in generic.schema]
        assert bag(rows_of(native)) == bag(rows_of(generic))


@pytest.mark.parametrize("name", AGGREGATORS)
def test_an_empty_batch_gives_the_empty_value_globally_and_no_rows_per_group_or_partition(spark, batches, name):
    agg, native = AGGREGATORS[name]
    no_partitions = spark.createDataFrame([], SCHEMA)
    empty_partitions = batches[3][0].where(F.col("amount") < 0)
    for empty in (no_partitions, empty_partitions):
        assert rows_of(aggregate(empty, agg, batch_id="b0", native=native)) == apply(agg, [], "b0")
        assert rows_of(group_by(empty, "user").aggregate(agg, native=native)) == []
        assert rows_of(partition_aggregate(empty, agg, native=native)) == []


def test_empty_values_are_zero_init_and_complete(spark):
    empty = spark.createDataFrame([], SCHEMA)
    assert [rows_of(aggregate(empty, a, native=False)) for a in (Count(), Sum("score"), Min("score"), Distinct())] \
        == [[(0,)], [(0,)], [(None,)], [([],)]]
    assert rows_of(aggregate(empty, UserCounts(), batch_id="7:2")) == [("7:2", {})]


def test_nulls_are_skipped_by_the_builtins_and_a_null_key_is_a_group(batches):
    frame = batches[7][0]
    scores = [r["score"] for r in ROWS if r["score"] is not None]
    for native in (True, False):
        assert rows_of(aggregate(frame, Count(), native=native)) == [(len(ROWS),)]
        assert rows_of(aggregate(frame, Sum("score"), native=native)) == [(sum(scores),)]
        assert rows_of(aggregate(frame, Min("score"), native=native)) == [(min(scores),)]
        assert rows_of(aggregate(frame, Sum("missing"), native=native)) == [(0,)]
        assert rows_of(aggregate(frame, Max("missing"), native=native)) == [(None,)]
        counts = dict(rows_of(group_by(frame, "user").aggregate(Count(), native=native)))
        assert counts[None] == sum(1 for r in ROWS if r["user"] is None)


def test_rows_carry_the_input_fields_by_name_and_position(batches):
    class Shapes(Aggregator):
        schema = "fields array<string>, same boolean"

        def init(self, batch_id):
            return []

        def aggregate(self, state, row, collector):
            state.append((list(row.__fields__), row[0] == row["score"] == row.score and row[1] == row.user))

        def complete(self, state, collector):
            collector.emit(state[0][0], all(same for _, same in state))

    got = rows_of(aggregate(batches[3][0], Shapes(), ["score", "user"]))
    assert got == [(["score", "user"], True)]


def test_results_are_typed_dataframes(batches):
    frame = batches[3][0]
    grouped = group_by(frame, "user").aggregate(Sum("score"), native=False)
    assert grouped.schema.simpleString() == "struct<user:string,sum:bigint>"
    means = group_by(frame, "user").aggregate(AGGREGATORS["mean-pair"][0])
    assert means.schema.simpleString() == "struct<user:string,mean:struct<total:double,n:bigint>>"
    assert means.where("mean.n > 0").select(F.sum("mean.n")).first()[0] == len(ROWS)
    assert plain(aggregate(frame, UserCounts()).first().counts) == user_counter(ROWS)


def test_min_and_max_of_nan_agree_with_spark(spark):
    frame = spark.createDataFrame([(1.5,), (float("nan"),), (-2.0,), (None,)], "x double").repartition(3)
    got = {(repr(agg), native): str(rows_of(aggregate(frame, agg, native=native)))
           for agg in (Min("x"), Max("x")) for native in (True, False)}
    assert got == {("Min('x')", True): "[(-2.0,)]", ("Min('x')", False): "[(-2.0,)]",
                   ("Max('x')", True): "[(nan,)]", ("Max('x')", False): "[(nan,)]"}

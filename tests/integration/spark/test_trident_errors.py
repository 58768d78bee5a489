"""txdag.trident refuses a wrong aggregator or a wrong column at the call, before Spark runs anything, and an
aggregator that raises on an executor is named in the job's error."""

from __future__ import annotations

import pytest
from trident_support import SCHEMA, Mean, make_rows

from txdag.errors import ConfigError
from txdag.trident import CombinerAggregator, Count, Sum, aggregate, group_by, partition_aggregate

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")


@pytest.fixture(scope="module")
def frame(spark):
    return spark.createDataFrame([tuple(r.values()) for r in make_rows(20)], SCHEMA)


def combiner(schema, zero=0, init=None):
    class Custom(CombinerAggregator):
        def init(self, row):
            return init(row) if init else 1

        def combine(self, a, b):
            return a + b

        def zero(self):
            return zero

    Custom.schema = schema
    return Custom()


@pytest.mark.parametrize("op", [aggregate, partition_aggregate, lambda df, agg: group_by(df, "user").aggregate(agg)],
                         ids=["aggregate", "partition_aggregate", "group_by"])
def test_a_wrong_schema_fails_the_call_with_what_to_write(frame, op):
    with pytest.raises(ConfigError, match="Custom declares no output schema"):
        op(frame, combiner(None))
    with pytest.raises(ConfigError, match=r"Custom has schema 'n bigintt', which Spark cannot parse .*'name type"):
        op(frame, combiner("n bigintt"))
    with pytest.raises(ConfigError, match=r"emits one column \(its value\), but its schema has 2"):
        op(frame, combiner("a bigint, b bigint"))
    with pytest.raises(ConfigError, match=r"zero\(\) gave a value that does not fit column 'n' \(bigint\)"):
        op(frame, combiner("n bigint", zero="none"))
    with pytest.raises(ConfigError, match=r"zero\(\) is \(0\.0, 0\), which comes back from its column"):
        op(frame, combiner("m struct<total:double,n:bigint>", zero=(0.0, 0)))


def test_wrong_columns_fail_the_call(frame):
    with pytest.raises(ConfigError, match=r"Sum\('nope'\): input fields \['nope'\] are not columns of the DataFrame"):
        aggregate(frame, Sum("nope"))
    with pytest.raises(ConfigError, match=r"Mean: input fields \['x'\] are not columns"):
        aggregate(frame, Mean(), ["amount", "x"])
    with pytest.raises(ConfigError, match=r"group_by: grouping fields \['nope'\] are not columns"):
        group_by(frame, "nope")
    with pytest.raises(ConfigError, match="needs at least one grouping field"):
        group_by(frame)
    with pytest.raises(ConfigError, match=r"emits column\(s\) \['user'\] that clash with the grouping fields"):
        group_by(frame, "user").aggregate(Count(name="user"))
    with pytest.raises(ConfigError, match=r"Sum\('user'\) needs a numeric column; 'user' is string"):
        group_by(frame, "score").aggregate(Sum("user"))
    with pytest.raises(ConfigError, match="is not an aggregator"):
        aggregate(frame, sum)


def test_an_aggregator_raising_on_an_executor_is_named_with_its_method_and_row(frame):
    broken = combiner("n bigint", init=lambda row: 100 // ((row["score"] or 1) % 2))
    with pytest.raises(Exception, match=r"(?s)Custom\.init raised ZeroDivisionError.*at row Row\(score="):
        aggregate(frame, broken, ["score"]).collect()

"""Output schemas of txdag.trident's aggregators, checked on the driver at the call (pyspark's types and pyarrow
only: no JVM, no session). DDL strings are parsed by the session; the integration tests cover those."""

import pytest
from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from txdag.errors import ConfigError
from txdag.trident import Aggregator, CombinerAggregator, Count, Max, Min, ReducerAggregator, Sum
from txdag.trident.schema import check_clash, check_output, resolve, to_record_batch

INPUT = StructType([StructField("user", StringType()), StructField("score", IntegerType()),
                    StructField("amount", FloatType()), StructField("price", DecimalType(10, 2))])
PAIR = StructType([StructField("pair", StructType([StructField("total", DoubleType()), StructField("n", LongType())]))])


def no_ddl(text):
    raise AssertionError(f"no DDL string expected here, got {text!r}")


def combiner(schema, zero):
    class Custom(CombinerAggregator):
        def init(self, row):
            return zero

        def combine(self, a, b):
            return a

        def zero(self):
            return zero

    Custom.schema = schema
    return Custom()


def test_builtin_schemas_follow_the_input_column():
    def out(agg):
        return resolve(agg, INPUT, no_ddl).fields[0]

    assert (out(Count()).name, out(Count()).dataType) == ("count", LongType())
    assert out(Sum("score")).dataType == LongType()
    assert out(Sum("amount")).dataType == DoubleType()
    assert out(Sum("price")).dataType == DecimalType(20, 2)
    assert (out(Min("user")).dataType, out(Max("amount")).dataType) == (StringType(), FloatType())
    assert out(Sum("score", name="total")).name == "total"


def test_builtins_refuse_a_missing_or_non_numeric_column():
    with pytest.raises(ConfigError, match=r"Sum\('user'\) needs a numeric column; 'user' is string"):
        resolve(Sum("user"), INPUT, no_ddl)
    with pytest.raises(ConfigError, match=r"Max\('nope'\) reads column 'nope'.*columns: \['user', 'score'"):
        resolve(Max("nope"), INPUT, no_ddl)


def test_a_missing_schema_says_what_to_write():
    with pytest.raises(ConfigError, match=r"Custom declares no output schema: set `schema = 'name type, \.\.\.'`"):
        resolve(combiner(None, 0), INPUT, no_ddl)
    with pytest.raises(ConfigError, match="declares no output schema"):
        resolve(combiner("  ", 0), INPUT, no_ddl)


def test_a_ddl_string_goes_through_the_session_parser_and_its_error_is_explained():
    parsed = resolve(combiner("n bigint", 0), INPUT, lambda text: StructType([StructField("n", LongType())]))
    assert parsed.fieldNames() == ["n"]

    def refuse(text):
        raise ValueError("[PARSE_SYNTAX_ERROR] Syntax error at or near 'bigintt'.\n== SQL ==")

    with pytest.raises(ConfigError, match=r"schema 'n bigintt', which Spark cannot parse \(\[PARSE_SYNTAX_ERROR\]"):
        resolve(combiner("n bigintt", 0), INPUT, refuse)
    with pytest.raises(ConfigError, match="not a list of named columns"):
        resolve(combiner("bigint", 0), INPUT, lambda text: LongType())
    with pytest.raises(ConfigError, match="without columns"):
        resolve(combiner(StructType([]), 0), INPUT, no_ddl)


def test_combiners_and_reducers_emit_one_column():
    two = StructType([StructField("a", LongType()), StructField("b", LongType())])
    with pytest.raises(ConfigError, match=r"is a CombinerAggregator, which emits one column .* has 2: \['a', 'b'\]"):
        check_output(combiner(two, 0), two)

    class Reducer(ReducerAggregator):
        def init(self):
            return 0

    with pytest.raises(ConfigError, match="is a ReducerAggregator, which emits one column"):
        check_output(Reducer(), two)


def test_the_empty_value_must_fit_and_come_back_unchanged():
    check_output(combiner(PAIR, {"total": 0.0, "n": 0}), PAIR)
    with pytest.raises(ConfigError, match=r"zero\(\) is \(0\.0, 0\), which comes back .* as \{'total': 0\.0, 'n': 0"):
        check_output(combiner(PAIR, (0.0, 0)), PAIR)
    one = StructType([StructField("n", LongType())])
    with pytest.raises(ConfigError, match=r"zero\(\) gave a value that does not fit column 'n' \(bigint\) "
                                          r"in row \('x',\)"):
        check_output(combiner(one, "x"), one)
    tags = StructType([StructField("tags", MapType(StringType(), ArrayType(LongType())))])
    check_output(combiner(tags, {"a": [1, 2]}), tags)


def test_a_general_aggregator_is_checked_with_what_it_emits_for_an_empty_input():
    class Pairs(Aggregator):
        schema = StructType([StructField("user", StringType()), StructField("n", LongType())])

        def init(self, batch_id):
            return batch_id

        def aggregate(self, state, row, collector):
            pass

        def complete(self, state, collector):
            collector.emit(state)  # one value for two columns

    with pytest.raises(ConfigError, match=r"complete\(\) of an empty input gave \('b1',\), but its schema has 2 "
                                          r"column\(s\) \['user', 'n'\]"):
        check_output(Pairs(), Pairs.schema, batch_id="b1")


def test_output_columns_may_not_clash_with_grouping_fields():
    with pytest.raises(ConfigError, match=r"emits column\(s\) \['user'\] that clash with the grouping fields"):
        check_clash(Count(), StructType([StructField("user", LongType())]), ["user"], "grouping fields")
    with pytest.raises(ConfigError, match="duplicate column names"):
        check_clash(Count(), StructType([StructField("a", LongType()), StructField("a", LongType())]), [], "x")


def test_a_row_that_does_not_fit_names_the_row_and_the_column():
    schema = StructType([StructField("user", StringType()), StructField("n", LongType())])
    batch = to_record_batch(Count(), schema, [("a", 1), (None, None)], "its result")
    assert batch.to_pylist() == [{"user": "a", "n": 1}, {"user": None, "n": None}]
    with pytest.raises(ConfigError, match=r"does not fit column 'n' \(bigint\) in row \('b', 'two'\)"):
        to_record_batch(Count(), schema, [("a", 1), ("b", "two")], "its result")

"""Trident's built-in combiners: Count, Sum, Min, Max (storm's ``trident.operation.builtin``).

Each is a plain :class:`~txdag.contracts.CombinerAggregator` (so ``combine``/``zero`` work without Spark)
that also knows the Spark expression computing the same thing natively: the operations use it unless told
``native=False``, and the tests check both paths agree. Nulls are skipped as in SQL, but a sum of nothing is
``zero()`` (0), not NULL; a min or max of nothing is None. pyspark is imported only inside the Spark-side methods.
"""

from __future__ import annotations

import math
from typing import Any

from txdag.contracts import CombinerAggregator
from txdag.errors import ConfigError


def _column_type(agg: Any, input_schema: Any, field: str) -> Any:
    names = input_schema.fieldNames()
    if field not in names:
        raise ConfigError(f"{agg!r} reads column {field!r}, which the DataFrame does not have (columns: {names}); "
                          f"name an existing column")
    return input_schema[field].dataType


def _one_column(name: str, data_type: Any, nullable: bool = True) -> Any:
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(name, data_type, nullable)])


class Count(CombinerAggregator):
    """The number of rows, nulls included (Trident's Count): ``bigint``, 0 for an empty batch."""

    fields = ()

    def __init__(self, name: str = "count") -> None:
        self.name = name

    def output_schema(self, input_schema: Any) -> Any:
        from pyspark.sql.types import LongType

        return _one_column(self.name, LongType(), nullable=False)

    def init(self, row: Any) -> int:
        return 1

    def combine(self, a: int, b: int) -> int:
        return a + b

    def zero(self) -> int:
        return 0

    def native(self, input_schema: Any) -> Any:
        from pyspark.sql import functions as F

        return F.count(F.lit(1))


class _OfField(CombinerAggregator):
    """A combiner over one input column (Sum, Min, Max)."""

    def __init__(self, field: str, name: str | None = None) -> None:
        if not isinstance(field, str) or not field:
            raise ConfigError(f"{type(self).__name__} needs a column name, got {field!r}")
        self.field = field
        self.fields = (field,)
        self.name = name or type(self).__name__.lower()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.field!r})"


class Sum(_OfField):
    """The sum of a numeric column (Trident's Sum), nulls skipped: ``bigint`` for integers, ``double`` for
    floating point, ``decimal(p + 10, s)`` for decimals (Spark's own widening); 0 for nothing."""

    def output_schema(self, input_schema: Any) -> Any:
        from pyspark.sql.types import DecimalType, DoubleType, FloatType, IntegralType, LongType

        source = _column_type(self, input_schema, self.field)
        if isinstance(source, IntegralType):
            return _one_column(self.name, LongType(), nullable=False)
        if isinstance(source, DoubleType | FloatType):
            return _one_column(self.name, DoubleType(), nullable=False)
        if isinstance(source, DecimalType):
            return _one_column(self.name, DecimalType(min(38, source.precision + 10), source.scale), nullable=False)
        raise ConfigError(f"{self!r} needs a numeric column; {self.field!r} is {source.simpleString()}")

    def init(self, row: Any) -> Any:
        value = row[self.field]
        return 0 if value is None else value

    def combine(self, a: Any, b: Any) -> Any:
        return a + b

    def zero(self) -> Any:
        return 0

    def native(self, input_schema: Any) -> Any:
        from pyspark.sql import functions as F

        out = self.output_schema(input_schema)[0].dataType
        return F.coalesce(F.sum(self.field), F.lit(0).cast(out))


def _spark_order(value: Any) -> tuple[int, Any]:
    """Spark's ordering of floats: NaN above every other value (Python's min/max would depend on the order)."""
    return (1, 0) if isinstance(value, float) and math.isnan(value) else (0, value)


class _Extreme(_OfField):
    """Min or Max of a column, nulls skipped; None for nothing. The output has the column's type."""

    pick = min

    def output_schema(self, input_schema: Any) -> Any:
        return _one_column(self.name, _column_type(self, input_schema, self.field))

    def init(self, row: Any) -> Any:
        return row[self.field]

    def combine(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        return a if b is None else type(self).pick(a, b, key=_spark_order)

    def zero(self) -> Any:
        return None


class Min(_Extreme):
    pick = min

    def native(self, input_schema: Any) -> Any:
        from pyspark.sql import functions as F

        return F.min(self.field)


class Max(_Extreme):
    pick = max

    def native(self, input_schema: Any) -> Any:
        from pyspark.sql import functions as F

        return F.max(self.field)

"""Seed 003's TransactionalGlobalCount as a txdag Spark job: one partial per batch, its number of tuples.

Storm's ``BatchCount`` counts the tuples of a batch and ``UpdateGlobalCount`` adds that partial to the stored
count once per txid; here the count is one global aggregation and the commit adds it under the txid rules.
State: ``global_count`` (key_fields=0, one global value).
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from txdag.spark import main


def process(batch: DataFrame) -> dict[str, DataFrame]:
    return {"global_count": batch.groupBy().count()}


if __name__ == "__main__":
    main(process)

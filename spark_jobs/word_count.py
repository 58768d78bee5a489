"""Seed 004's word count as a txdag Spark job: Split the sentence, groupBy word, persistentAggregate Count.

Split is on the space character only, empty tokens dropped (Trident's ``Split`` function of the seed).
State: ``words`` (word).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from txdag.spark import main


def process(batch: DataFrame) -> dict[str, DataFrame]:
    words = batch.select(F.explode(F.split("value", " ")).alias("word")).where(F.col("word") != "")
    return {"words": words.groupBy("word").count()}


if __name__ == "__main__":
    main(process)

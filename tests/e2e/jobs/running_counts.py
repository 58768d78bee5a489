"""Seed 002's WordCountBolt as a txdag stateful step: each word's running count in the KeyValueState ``counts``;
the largest running count of each word of a batch, summed, goes to the map state ``running_sum``."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from txdag import trident as td
from txdag.spark import main


class RunningCount(td.StatefulStep):
    schema = "word string, count bigint"

    def execute(self, row, state, collector):
        count = state.get(row.word, 0) + 1
        state.put(row.word, count)
        collector.emit(row.word, count)


def process(batch: DataFrame) -> dict[str, object]:
    words = batch.select(F.col("id").cast("long").alias("id"), F.explode(F.split("value", " ")).alias("word"))
    step = td.stateful(words.where(F.col("word") != ""), "counts", RunningCount(), key="word", order_by=["id"])
    latest = step.emitted.groupBy("word").agg(F.max("count").alias("n")).groupBy().agg(F.sum("n").alias("n"))
    return {"counts": step, "running_sum": latest}


if __name__ == "__main__":
    main(process)

"""Seed 000's tweet tokenising as Spark columns, shared by the tweets jobs (spark_jobs/tweets_analytics.py,
spark_jobs/trending_hashtags.py); the same result as the Python reference, txdag.analytics.tweets.

Tokens are Java's ``StringTokenizer(tweet, " ")``: split on the space character only (Spark's ``split`` takes a
regex; a single space is a literal one, and the tweet text itself is never read as a pattern), empty tokens
dropped, case and punctuation kept. A user or hashtag counts once per tweet (the seed's HashSet).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


def tokens(batch: DataFrame) -> DataFrame:
    """``id, token``: one row per space-separated, non-empty token of each tweet."""
    return batch.select("id", F.explode(F.split("value", " ")).alias("token")).where(F.col("token") != "")


def starting_with(words: DataFrame, prefix: str, name: str) -> DataFrame:
    """``id, <name>``: the distinct tokens of each tweet that start with ``prefix``."""
    token: Column = F.col("token")
    return words.where(token.startswith(prefix)).select("id", token.alias(name)).distinct()

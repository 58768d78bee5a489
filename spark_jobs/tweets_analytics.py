"""Seed 000's tweets analytics as a txdag Spark job: users, hashtags and user-hashtag pairs, per tweet.

Tokens are Java's ``StringTokenizer(tweet, " ")``: split on the space character only (Spark's ``split`` takes
a regex; a single space is a literal one, and the tweet text itself is never read as a pattern), empty tokens
dropped, case and punctuation kept. A user or hashtag counts once per tweet (the seed's HashSet), so the
value of each key is a number of tweets. Same result as ``txdag.analytics.tweets.tweet_partials``.

States: ``users`` (user), ``hashtags`` (hashtag), ``users_hashtags`` (user, hashtag; stored as ``user:hashtag``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from txdag.spark import main


def tokens(batch: DataFrame) -> DataFrame:
    """``id, token``: one row per space-separated, non-empty token of each tweet."""
    return batch.select("id", F.explode(F.split("value", " ")).alias("token")).where(F.col("token") != "")


def _starting_with(words: DataFrame, prefix: str, name: str) -> DataFrame:
    """``id, <name>``: the distinct tokens of each tweet that start with ``prefix``."""
    token: Column = F.col("token")
    return words.where(token.startswith(prefix)).select("id", token.alias(name)).distinct()


def process(batch: DataFrame) -> dict[str, DataFrame]:
    words = tokens(batch)
    users = _starting_with(words, "@", "user")
    hashtags = _starting_with(words, "#", "hashtag")
    return {
        "users": users.groupBy("user").count(),
        "hashtags": hashtags.groupBy("hashtag").count(),
        "users_hashtags": users.join(hashtags, "id").groupBy("user", "hashtag").count(),
    }


if __name__ == "__main__":
    main(process)

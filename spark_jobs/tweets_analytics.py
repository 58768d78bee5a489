"""Seed 000's tweets analytics as a txdag Spark job: users, hashtags and user-hashtag pairs, per tweet.

Tokens as in txdag.analytics.spark_tweets (Java's StringTokenizer on spaces); a user or hashtag counts once per
tweet, so the value of each key is a number of tweets. Same result as ``txdag.analytics.tweets.tweet_partials``.

States: ``users`` (user), ``hashtags`` (hashtag), ``users_hashtags`` (user, hashtag; stored as ``user:hashtag``).
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from txdag.analytics.spark_tweets import starting_with, tokens
from txdag.spark import main


def process(batch: DataFrame) -> dict[str, DataFrame]:
    words = tokens(batch)
    users = starting_with(words, "@", "user")
    hashtags = starting_with(words, "#", "hashtag")
    return {
        "users": users.groupBy("user").count(),
        "hashtags": hashtags.groupBy("hashtag").count(),
        "users_hashtags": users.join(hashtags, "id").groupBy("user", "hashtag").count(),
    }


if __name__ == "__main__":
    main(process)

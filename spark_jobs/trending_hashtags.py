"""Trending hashtags: each hashtag's count over a sliding window of the last WINDOW_BATCHES batches (txids), and
the TOP most frequent of the last window, exact under replays (seed 001's windows over batches).

The window rows of each batch (its hashtags, once per tweet) are appended to the window store at the batch's
commit, in txid order; each commit closes one window, aggregated with Count per hashtag and cut to the top TOP
(ties by hashtag); that result is the value of state ``trending`` and an entry of its new values stream. State
``hashtag_counts`` keeps the all-time count per hashtag beside it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from txdag import trident as td
from txdag.analytics.spark_tweets import starting_with, tokens
from txdag.spark import main

WINDOW_BATCHES = 3
TOP = 10


def process(batch: DataFrame) -> dict[str, object]:
    hashtags = starting_with(tokens(batch), "#", "hashtag").select("hashtag")
    return {
        "hashtag_counts": td.group_by(hashtags, "hashtag").persistent_aggregate(td.Count()),
        "trending": td.window(hashtags, td.SlidingBatchWindow(WINDOW_BATCHES), td.Count(), group_by=["hashtag"],
                              top=TOP, new_values=True),
    }


if __name__ == "__main__":
    main(process)

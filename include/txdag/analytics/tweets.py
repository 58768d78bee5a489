"""Seed 000's tweets analytics: users (@...), hashtags (#...) and user-hashtag pairs, counted per tweet.

Tokens are what Java's ``StringTokenizer(tweet, " ")`` yields: split on the space character only, empty
tokens dropped, case and punctuation kept. A user or hashtag counts once per tweet however often it appears.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

STATES = ("users", "hashtags", "users_hashtags")
MARKER_KEY = "LAST_COMMITED_TRANSACTION"  # the seed's marker of the last committed txid, spelled as the seed does


def tokens(tweet: str) -> list[str]:
    return [token for token in tweet.split(" ") if token]


def users_and_hashtags(tweet: str) -> tuple[set[str], set[str]]:
    words = tokens(tweet)
    return {w for w in words if w.startswith("@")}, {w for w in words if w.startswith("#")}


def tweet_partials(tweets: Iterable[str]) -> dict[str, Counter]:
    """Per state, key tuple -> number of tweets: users, hashtags, and (user, hashtag) pairs."""
    counts: dict[str, Counter] = {state: Counter() for state in STATES}
    for tweet in tweets:
        users, hashtags = users_and_hashtags(tweet)
        counts["users"].update((u,) for u in users)
        counts["hashtags"].update((h,) for h in hashtags)
        counts["users_hashtags"].update((u, h) for u in users for h in hashtags)
    return counts

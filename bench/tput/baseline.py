"""P1's floor: one Python process reads the tweets from Redis and writes the same counts, with no fault tolerance.

Chunked MGET reads, the reference tokenising (txdag.analytics.tweets), pipelined HINCRBY writes into hashes
``<prefix>users``, ``<prefix>hashtags``, ``<prefix>users_hashtags``. A crash halfway leaves counts half-applied
and a rerun counts twice: this is what exactly-once costs against.
"""

from __future__ import annotations

import time

import redis

from txdag.analytics.tweets import tweet_partials

PREFIX = "baseline:"


def python_baseline(client: redis.Redis, tweets: int, chunk: int = 10_000, prefix: str = PREFIX) -> float:
    """Counts tweets 1..``tweets``; returns the seconds it took (reads, counting and writes)."""
    start = time.perf_counter()
    for low in range(1, tweets + 1, chunk):
        keys = [str(i) for i in range(low, min(low + chunk, tweets + 1))]
        values = client.mget(keys)
        if any(v is None for v in values):
            raise RuntimeError(f"baseline: tweet keys {keys[0]}..{keys[-1]} are not all there")
        counts = tweet_partials(v.decode() for v in values)
        pipe = client.pipeline(transaction=False)
        for state, counter in counts.items():
            for key, n in counter.items():
                pipe.hincrby(f"{prefix}{state}", ":".join(key), n)
        pipe.execute()
    return time.perf_counter() - start

"""The backlog and its ground truth: generated tweets (txdag.spouts.samples) in seed 000's layout, the exact counts
(txdag.analytics.tweets, the reference), and the check that a run's committed counts equal them exactly: in Redis
hashes (fields as the topology joins them), or in PostgreSQL tables (key tuples)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import redis

from txdag.analytics.tweets import STATES, tweet_partials
from txdag.keyspace import glob_escape
from txdag.spouts import append_tweets
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import next_write_key

Expected = dict[str, dict[str, int]]


class Backlog:
    """The first ``n`` generated tweets of seed 0 for any ``n`` up to the largest asked (one generation)."""

    def __init__(self, largest: int) -> None:
        self.tweets = sample_tweets(largest)
        self._truth: dict[int, Expected] = {}

    def first(self, n: int) -> list[str]:
        return self.tweets[:n]

    def truth(self, n: int) -> Expected:
        if n not in self._truth:
            self._truth[n] = expected_counts(self.tweets[:n])
        return self._truth[n]

    def partials(self, n: int) -> dict[str, Counter]:
        """Per state, key tuple -> count: the ground truth as tables with a column per key field hold it."""
        return tweet_partials(self.tweets[:n])


def expected_counts(tweets: Sequence[str]) -> Expected:
    """Per state, the hash fields the topology writes (``user:hashtag`` for pairs) and their exact counts."""
    partials = tweet_partials(tweets)
    expected: Expected = {}
    for state in STATES:
        fields: Counter = Counter()
        for key, n in partials[state].items():
            fields[":".join(key)] += n  # joined keys that collide add up, as the topology's commit does
        expected[state] = dict(fields)
    return expected


def load(client: redis.Redis, tweets: Sequence[str], prefix: str = "") -> None:
    """Loads the tweets at ids 1..n of an empty database (``prefix``: with no key under that prefix), with
    NEXT_WRITE, the way `txdag seed` does."""
    if any(client.scan_iter(match=f"{glob_escape(prefix)}*", count=1000)) if prefix else client.dbsize():
        raise RuntimeError(f"{where(client)} is not empty" + (f" under {prefix!r}" if prefix else ""))
    append_tweets(client, tweets, prefix=prefix)


def hidden_key(prefix: str) -> str:
    return f"{prefix}BENCH_HIDDEN_NEXT_WRITE"


def hide(client: redis.Redis, prefix: str) -> None:
    """Hides the loaded tweets from the source's spout (NEXT_WRITE moved aside: to it, nothing was written) until
    show(): a copy whose source starts its runs would start them as soon as Airflow runs."""
    client.rename(next_write_key(prefix), hidden_key(prefix))


def show(client: redis.Redis, prefix: str) -> None:
    """The hidden tweets appear at once, as one write of NEXT_WRITE."""
    client.rename(hidden_key(prefix), next_write_key(prefix))


def where(client: redis.Redis) -> str:
    """The database a client uses, for a message (a Redis Cluster has one)."""
    pool = getattr(client, "connection_pool", None)  # a RedisCluster has none
    return f"Redis database {pool.connection_kwargs.get('db', 0)}" if pool else "the Redis Cluster"


def committed_counts(client: redis.Redis, prefix: str = "") -> Expected:
    """The counts as stored: hash ``<prefix><state>``, field -> integer."""
    return {state: {k.decode(): int(v) for k, v in client.hgetall(f"{prefix}{state}").items()} for state in STATES}


def check_exact(client: redis.Redis, expected: Expected, who: str, prefix: str = "") -> None:
    """Raises with the first differences unless every state's hash equals the ground truth exactly."""
    compare(committed_counts(client, prefix), expected, who, where(client), prefix)


def table_counts(conninfo: str, tables: Mapping[str, tuple[str, int]]) -> dict[str, dict[tuple, int]]:
    """The counts as PostgreSQL tables hold them (``tables``: state -> its table and key fields), by key tuple, read
    in one snapshot."""
    import psycopg

    out = {}
    with psycopg.connect(conninfo) as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        for state, (table, key_fields) in tables.items():
            keys = "".join(f"k{i} #>> '{{}}', " for i in range(1, key_fields + 1))
            rows = conn.execute(f"SELECT {keys}value FROM {table}").fetchall()
            out[state] = {tuple(row[:-1]): int(row[-1]) for row in rows}
    return out


def compare(got: Mapping[str, Mapping[Any, int]], expected: Mapping[str, Mapping[Any, int]], who: str, place: str,
            prefix: str = "") -> None:
    """Raises CountMismatch with the first differences unless every state holds the ground truth exactly."""
    problems = []
    for state in STATES:
        want, have = expected[state], got[state]
        wrong = sorted((k for k in want.keys() | have.keys() if want.get(k) != have.get(k)), key=repr)
        if wrong:
            sample = ", ".join(f"{k}: expected {want.get(k)}, got {have.get(k)}" for k in wrong[:5])
            problems.append(f"{prefix}{state}: {len(wrong)} of {len(want)} keys differ ({sample})")
    if problems:
        raise CountMismatch(f"{who}: the committed counts in {place} are NOT the ground truth: " + "; ".join(problems))


class CountMismatch(RuntimeError):
    """A run's counts differ from the ground truth: the benchmark's figures are void."""

"""Deterministic sample data for the demo, the tests and the benchmarks (no download, no randomness leaks)."""

from __future__ import annotations

import random

USERS = [f"@{name}" for name in (
    "nathanmarz", "apache", "airflow", "spark", "redis", "zookeeper", "ada", "linus", "grace", "guido",
    "ken", "dennis", "barbara", "edsger", "donald", "margaret", "alan", "john", "frances", "leslie")]
HASHTAGS = [f"#{tag}" for tag in (
    "storm", "trident", "exactlyonce", "bigdata", "streaming", "python", "spark", "airflow", "redis", "kafka",
    "batch", "dataeng", "oss", "zookeeper", "java", "scala", "sql", "etl", "ml", "ops")]
WORDS = ("the", "a", "counts", "are", "exact", "again", "replayed", "batch", "today", "with", "and", "love",
         "ship", "it", "now", "why", "not", "every", "txid", "commits")


def sample_tweets(count: int, seed: int = 0) -> list[str]:
    """``count`` tweets mixing words, users and hashtags with a skewed (Zipf-like) popularity."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(USERS))]
    tweets = []
    for _ in range(count):
        parts = rng.choices(WORDS, k=rng.randint(2, 8))
        parts += rng.choices(USERS, weights, k=rng.randint(0, 2))
        parts += rng.choices(HASHTAGS, weights, k=rng.randint(0, 3))
        rng.shuffle(parts)
        tweets.append(" ".join(parts))
    return tweets


def sample_sentences(count: int, seed: int = 0) -> list[str]:
    """Sentences for the word-count topology."""
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 10))) for _ in range(count)]

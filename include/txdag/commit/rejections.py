"""Rejected source entries, kept per topology for an operator: nothing bad is dropped without a trace.

    txdag:rejected:{topology}   hash  entry id -> JSON {"txid", "attempt", "partition", "reason"}

Keyed by entry id, so a replay of the same batch does not count a rejection twice. ``keys``/``acl_patterns``: the
shape of txdag.keyspace.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import redis

from txdag.attempt import TransactionAttempt
from txdag.keyspace import glob_escape
from txdag.redisio import redis_errors
from txdag.spouts.base import Rejection


def rejections_key(topology: str) -> str:
    return f"txdag:rejected:{{{topology}}}"


def keys(topology: str) -> list[str]:
    return [rejections_key(topology)]


def acl_patterns(topology: str) -> list[str]:
    return [glob_escape(rejections_key(topology))]


def record_rejections(
    client: redis.Redis, topology: str, tx: TransactionAttempt, rejections: Iterable[Rejection]
) -> int:
    entries = {
        r.id: json.dumps({"txid": tx.txid, "attempt": tx.attempt, "partition": r.partition, "reason": r.reason})
        for r in rejections
    }
    if entries:
        with redis_errors(client, f"recording rejections of {tx}", topology=topology, keys=[rejections_key(topology)]):
            client.hset(rejections_key(topology), mapping=entries)
    return len(entries)


def list_rejections(client: redis.Redis, topology: str) -> dict[str, dict]:
    with redis_errors(client, "listing rejections", topology=topology, keys=[rejections_key(topology)]):
        raw = client.hgetall(rejections_key(topology))
    return {k.decode(): json.loads(v) for k, v in raw.items()}

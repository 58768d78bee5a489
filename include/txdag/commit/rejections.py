"""Rejected source entries, kept per topology for an operator: nothing bad is dropped without a trace.

    txdag:rejected:{topology}   hash  entry id -> JSON {"txid", "attempt", "partition", "reason", "at"}

Keyed by entry id, so a replay of the same batch does not count a rejection twice (it records the later attempt
and time). ``at`` (UTC, ISO 8601) is when it was recorded; records written before it existed have none and are
read as recorded at an unknown time. ``keys``/``acl_patterns``: the shape of txdag.keyspace.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import redis

from txdag.attempt import TransactionAttempt
from txdag.keyspace import glob_escape
from txdag.redisio import redis_errors
from txdag.spouts.base import Rejection
from txdag.state.keys import KeyClashError

SCAN_COUNT = 1000


def rejections_key(topology: str) -> str:
    return f"txdag:rejected:{{{topology}}}"


def keys(topology: str) -> list[str]:
    return [rejections_key(topology)]


def acl_patterns(topology: str) -> list[str]:
    return [glob_escape(rejections_key(topology))]


def record_rejections(
    client: redis.Redis, topology: str, tx: TransactionAttempt, rejections: Iterable[Rejection], *,
    at: str | None = None,
) -> int:
    when = at or datetime.now(UTC).isoformat(timespec="milliseconds")
    entries = {
        r.id: json.dumps({"txid": tx.txid, "attempt": tx.attempt, "partition": r.partition, "reason": r.reason,
                          "at": when})
        for r in rejections
    }
    if entries:
        with redis_errors(client, f"recording rejections of {tx}", topology=topology, keys=[rejections_key(topology)]):
            client.hset(rejections_key(topology), mapping=entries)
    return len(entries)


def clash_rejection(state: str, txid: int, error: KeyClashError) -> Rejection:
    """The rejection of a key a state's codec refuses (recorded by the job, or by the commit for a reducer's rows):
    its id names the state, the txid and the key (the same on a replay, so it is counted once), its reason the
    field."""
    key = json.dumps(list(error.key), separators=(",", ":"), ensure_ascii=False, default=str)
    return Rejection(f"key:{state}:{txid}:{key}", f"state {state!r} txid {txid}: {error}; the key is not stored")


def list_rejections(client: redis.Redis, topology: str) -> dict[str, dict]:
    with redis_errors(client, "listing rejections", topology=topology, keys=[rejections_key(topology)]):
        raw = client.hgetall(rejections_key(topology))
    return {k.decode(): json.loads(v) for k, v in raw.items()}


def rejection_row(entry_id: bytes | str, raw: bytes | str) -> dict[str, Any]:
    """One stored rejection as a row {id, txid, attempt, partition, reason, at}; a value that is not txdag's
    record (written by hand, or by a newer txdag) is shown as such rather than failing the listing."""
    row: dict[str, Any] = {"id": entry_id.decode(errors="replace") if isinstance(entry_id, bytes) else entry_id,
                           "txid": None, "attempt": None, "partition": None, "reason": None, "at": None}
    try:
        record = json.loads(raw)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        return {**row, "reason": f"<not a txdag rejection record: {raw[:80]!r}>"}
    return {**row, **{k: record.get(k) for k in ("txid", "attempt", "partition", "reason", "at")}}


def read_rejections(client: redis.Redis, topology: str, limit: int) -> tuple[int, list[dict[str, Any]]]:
    """How many entries the topology rejected, and the newest ``limit`` of them as rows, newest first (by time,
    then id; records without a time last). HSCAN keeps a large hash out of one reply, a heap keeps ``limit`` rows."""
    key = rejections_key(topology)
    newest: list[tuple[str, str, dict[str, Any]]] = []
    with redis_errors(client, f"reading the rejections of topology {topology!r}", topology=topology, keys=[key]):
        total = int(client.hlen(key))
        if limit > 0:
            for entry_id, raw in client.hscan_iter(key, count=SCAN_COUNT):
                row = rejection_row(entry_id, raw)
                item = (str(row["at"] or ""), row["id"], row)
                if len(newest) < limit:
                    heapq.heappush(newest, item)
                else:
                    heapq.heappushpop(newest, item)
    return total, [row for _, _, row in sorted(newest, key=lambda item: (item[0], item[1]), reverse=True)]

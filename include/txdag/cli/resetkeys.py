"""The Redis keys ``txdag reset`` deletes, named from the layouts (txdag.keyspace) without SCAN.

The topology's Redis user that ``txdag acl redis`` sets up may not SCAN (SCAN lists every key of the database,
whatever the user's key patterns), so reset names the keys itself, from the definition and what the records say:

    fixed per topology   each state's namespace keys, the commit marker, rejections, new values per state
    per window state     its hash and blocks; rows and fired lists of txids 1..N; results 1..F (F: windows fired)
    per KeyValueState    its hashes; the staged attempts its ``stages`` hash lists (and their migrating halves)
    per txid 1..N        the fence; the staging and claims of attempts 1..A: a kept record's attempt, else the
                         highest attempt of the kept records (a commit deletes its staging: these are leftovers)

N is the highest txid anything recorded (ZooKeeper's last txid, the commit marker, a window's last txid). A key
named that does not exist costs one DEL argument. A connection that may SCAN (an admin's) also sweeps the
topology's patterns (txdag.cli.acl.owned_patterns), which finds keys another program put under them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import redis

from txdag.attempt import TransactionAttempt
from txdag.commit import newvalues, rejections
from txdag.staging import layout as staging_layout
from txdag.state import redis_backing
from txdag.state.kv import layout as kv_layout
from txdag.windows import store as window_store

CHUNK = 1000


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _int(raw: Any) -> int:
    try:
        return int(_text(raw)) if raw is not None else 0
    except ValueError:
        return 0


def fixed_keys(definition: Any) -> list[str]:
    """The keys named by the definition alone."""
    topology = definition.topology_id
    keys = [k for s in definition.states if s.in_redis for k in redis_backing.state_keys(s.redis_key)]
    keys += [definition.commit_marker, rejections.rejections_key(topology)]
    return keys + [newvalues.values_key(topology, s.name) for s in definition.states]


def kv_namespaces(definition: Any) -> list[kv_layout.KVNamespace]:
    """The KeyValueStates in the namespaces the topology's user is granted (its steps' default ones)."""
    topology = definition.topology_id
    return [kv_layout.KVNamespace(k.namespace_of(topology)) for k in definition.key_values
            if k.namespace_of(topology) == kv_layout.kv_namespace(topology, k.name)]


def last_txid(client: redis.Redis, definition: Any, zk_last: int) -> int:
    """The highest txid ZooKeeper, the commit marker or a window store recorded."""
    keys = [definition.commit_marker] + [window_store.window_key(definition.topology_id, s.name)
                                         for s in definition.states]
    marker = _int(client.get(keys[0]))
    windows = [_int(client.hget(k, "txid")) if client.type(k) in (b"hash", "hash") else 0 for k in keys[1:]]
    return max([zk_last, marker, *windows])


def window_keys(client: redis.Redis, definition: Any, last: int) -> Iterator[str]:
    for state in definition.states:
        window = window_store.window_key(definition.topology_id, state.name)
        if client.type(window) not in (b"hash", "hash"):
            continue
        progress = client.hget(window, "progress")
        fired = _int(json.loads(progress).get("fired")) if progress else 0
        yield from (window, window_store.blocks_key(window))
        for txid in range(1, last + 1):
            yield from (window_store.rows_key(window, txid), window_store.fired_key(window, txid))
        yield from (window_store.result_key(window, i) for i in range(1, fired + 1))


def kv_keys(client: redis.Redis, definition: Any) -> Iterator[str]:
    for ns in kv_namespaces(definition):
        stages = [_text(s) for s in client.hkeys(ns.stages)] if client.exists(ns.stages) else []
        for key in (ns.committed, ns.meta, ns.prepared, ns.undo, ns.stages):
            yield from (key, kv_layout.migrating_key(key))
        for attempt in stages:
            stage = ns.stage_prefix + attempt
            yield from (stage, kv_layout.migrating_key(stage))


def txid_keys(definition: Any, last: int, attempts: dict[int, int]) -> Iterator[str]:
    topology, states = definition.topology_id, [s.name for s in definition.states]
    usual = max(attempts.values(), default=1)
    for txid in range(1, last + 1):
        yield staging_layout.fence_key(topology, txid)
        for attempt in range(1, attempts.get(txid, usual) + 1):
            yield from staging_layout.keys(topology, TransactionAttempt(txid, attempt), states)


def named_keys(client: redis.Redis, definition: Any, zk_last: int, attempts: dict[int, int]) -> Iterator[str]:
    """Every key the topology may have written (most of them absent), as the layouts name them."""
    last = last_txid(client, definition, zk_last)
    yield from fixed_keys(definition)
    yield from window_keys(client, definition, last)
    yield from kv_keys(client, definition)
    yield from txid_keys(definition, last, attempts)


def scanned_keys(client: redis.Redis, patterns: Iterable[str]) -> set[str]:
    """The keys matching ``patterns``, when this connection may SCAN; else none (the named keys are the reset)."""
    try:
        return {_text(k) for p in patterns for k in client.scan_iter(match=p, count=CHUNK)}
    except redis.exceptions.NoPermissionError:
        return set()


def chunks(keys: Iterable[str]) -> Iterator[list[str]]:
    chunk: list[str] = []
    for key in keys:
        chunk.append(key)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def count_existing(client: redis.Redis, keys: Iterable[str]) -> int:
    return sum(int(client.exists(*chunk)) for chunk in chunks(dict.fromkeys(keys)))


def delete(client: redis.Redis, keys: Iterable[str]) -> int:
    return sum(int(client.delete(*chunk)) for chunk in chunks(dict.fromkeys(keys)))

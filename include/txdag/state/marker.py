"""The commit marker: the last committed txid, written last by every commit into the states' Redis (Storm's
``LAST_COMMITED_TRANSACTION``). ZooKeeper's committed txid is held against it before a txid is emitted and
before it commits, so a Redis that lost what it acknowledged halts the topology instead of being built on.

    txdag:committed:{topology}   string   the last committed txid (a topology's ``marker_key`` replaces it)
"""

from __future__ import annotations

import redis

from txdag.errors import ConfigError
from txdag.keyspace import glob_escape
from txdag.redisio import describe, redis_errors


def default_key(topology: str) -> str:
    return f"txdag:committed:{{{topology}}}"


def keys(topology: str) -> list[str]:
    return [default_key(topology)]


def acl_patterns(topology: str) -> list[str]:
    return [glob_escape(default_key(topology))]


def read_marker(client: redis.Redis, key: str, topology: str, doing: str) -> int | None:
    """The txid the marker holds, None when there is none; a value that is not a txid is a shared key."""
    with redis_errors(client, doing, topology=topology, keys=[key]):
        value = client.get(key)
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else str(value)
    if not text.isdigit():
        raise ConfigError(f"topology {topology!r}: marker key {key!r} holds {text[:40]!r}, not a txid; another "
                          f"writer uses the key: give the topology a marker_key of its own")
    return int(text)


def where(client: redis.Redis, key: str) -> str:
    """The marker's place, as an error names it."""
    return f"Redis {describe(client)} key {key!r}"

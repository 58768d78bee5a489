"""A state's new values stream (seed 004's ``newValuesStream``): what a commit changed, as a Redis stream.

    txdag:values:{topology}:<state>   stream   entries <txid>-<n>, field ``value``: JSON of one emitted row

A commit emits its rows with the txid as the entry id's first part, in one script call that does nothing when
the stream already holds an entry of this txid or a later one: a retried commit emits nothing twice, and the
entries are in commit order. Another topology can read it as a source: ``StreamsSource([values_key(...)])``
(the field ``value`` is StreamsSource's default). ``keys``/``acl_patterns``: the shape of txdag.keyspace.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import redis

from txdag.keyspace import below
from txdag.luascripts import declare, run
from txdag.redisio import redis_errors

# KEYS[1]: the stream. ARGV[1]: txid; ARGV[2..]: one JSON value per entry, in order.
# Returns how many entries were added: 0 when the stream's last entry is of this txid or a later one.
EMIT_SCRIPT = """
local txid = tonumber(ARGV[1])
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last > 0 and tonumber(string.match(last[1][1], '^(%d+)-')) >= txid then return 0 end
for i = 2, #ARGV do redis.call('XADD', KEYS[1], ARGV[1] .. '-' .. (i - 1), 'value', ARGV[i]) end
return #ARGV - 1
"""
EMIT = declare("newvalues.emit", EMIT_SCRIPT)


def _base(topology: str) -> str:
    return f"txdag:values:{{{topology}}}"


def values_key(topology: str, state: str) -> str:
    return f"{_base(topology)}:{state}"


def keys(topology: str, state: str) -> list[str]:
    return [values_key(topology, state)]


def acl_patterns(topology: str) -> list[str]:
    return [below(_base(topology))]


def emit_values(client: redis.Redis, topology: str, state: str, txid: int, rows: Sequence[Any]) -> int:
    """Append ``rows`` as txid ``txid``'s entries, once; returns how many were added."""
    if not rows:
        return 0
    key = values_key(topology, state)
    encoded = [json.dumps(row, separators=(",", ":"), ensure_ascii=False, default=str) for row in rows]
    with redis_errors(client, f"emitting the new values of txid {txid}", topology=topology, keys=[key]):
        return int(run(client, EMIT, [key], [txid, *encoded]))

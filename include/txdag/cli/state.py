"""``txdag state get|top``: committed values of a topology's state, unwrapped from their txid bookkeeping (the
txid of the batch a value includes, and an opaque value's previous value), so an operator can check a count."""

from __future__ import annotations

import argparse
import heapq
import json
from typing import Any

from txdag.cli.common import CliError, conn_id, emit, redis_for, table, topology
from txdag.redisio import redis_errors
from txdag.state import OpaqueValue, RedisBackingMap, TransactionalValue
from txdag.state.snapshottable_map import GLOBAL_KEY

SCAN_COUNT = 1000


def state_of(definition: Any, name: str) -> Any:
    """The topology's state by name (or by Redis namespace), or an error listing its states."""
    for state in definition.states:
        if name in (state.name, state.redis_key):
            return state
    names = ", ".join(s.name for s in definition.states)
    raise CliError(f"topology {definition.topology_id!r} has no state {name!r} (its states: {names})")


def unwrap(field: str, stored: Any) -> dict[str, Any]:
    """A stored value as a row: the value, and the txid (transactional, opaque) and prev (opaque) around it."""
    if isinstance(stored, OpaqueValue):
        return {"key": field, "value": stored.curr, "txid": stored.txid, "prev": stored.prev, "kind": "opaque"}
    if isinstance(stored, TransactionalValue):
        return {"key": field, "value": stored.value, "txid": stored.txid, "kind": "transactional"}
    kind = None if stored is None else "non_transactional"
    return {"key": field, "value": stored, "txid": None, "kind": kind, "found": stored is not None}


def read(backing: RedisBackingMap, field_names: list[str]) -> list[dict[str, Any]]:
    keys = [backing.key_codec.decode(f) for f in field_names]
    return [unwrap(f, v) for f, v in zip(field_names, backing.multi_get(keys))]


def open_state(args: argparse.Namespace) -> tuple[Any, Any, RedisBackingMap]:
    definition = topology(args, args.topology)
    state = state_of(definition, args.state)
    client = redis_for(conn_id(args, "redis", definition), timeout=10)
    return definition, state, RedisBackingMap(client, state.redis_key, key_codec=state.codec())


def cmd_get(args: argparse.Namespace) -> int:
    """Values of the given keys (hash fields as stored: ``hello``, ``@bob:#tag``; none for a global state)."""
    definition, state, backing = open_state(args)
    if not args.keys and state.key_fields != 0:
        raise CliError(f"state {state.name!r} of topology {definition.topology_id!r} is keyed: give one or more keys")
    field_names = list(args.keys) or [GLOBAL_KEY[0]]
    data = report(definition, state, read(backing, field_names))
    emit(args, data, state_text)
    return 0


def cmd_top(args: argparse.Namespace) -> int:
    """The ``-n`` keys with the largest numeric values (HSCAN, so a large hash is never read in one reply)."""
    if args.n < 1:
        raise CliError(f"-n must be >= 1, got {args.n}")
    definition, state, backing = open_state(args)
    client = backing.client
    best: list[tuple[float, str]] = []
    with redis_errors(client, f"reading state {state.name!r} of topology {definition.topology_id!r}"):
        total = int(client.hlen(state.redis_key))
        for raw_field, raw_value in client.hscan_iter(state.redis_key, count=SCAN_COUNT):
            number = numeric(raw_value)
            if number is not None:
                item = (number, raw_field.decode())
                if len(best) < args.n:
                    heapq.heappush(best, item)
                else:
                    heapq.heappushpop(best, item)
    ranked = [f for _, f in sorted(best, key=lambda item: (-item[0], item[1]))]
    data = {**report(definition, state, read(backing, ranked)), "total_keys": total}
    emit(args, data, state_text)
    return 0


def numeric(raw: bytes) -> float | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def report(definition: Any, state: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"topology": definition.topology_id, "state": state.name, "kind": state.kind,
            "namespace": state.redis_key, "values": rows}


def state_text(d: dict[str, Any]) -> str:
    total = f", {d['total_keys']} keys" if "total_keys" in d else ""
    head = f"state {d['state']} of topology {d['topology']} ({d['kind']}, Redis hash {d['namespace']}{total})"
    if not d["values"]:
        return f"{head}\nno values"
    cols = ["key", "value"] + ([] if d["kind"] == "non_transactional" else ["txid"])
    cols += ["prev"] if d["kind"] == "opaque" else []
    return f"{head}\n{table(d['values'], cols)}"

"""``txdag state get|top``: committed values of a topology's state, unwrapped from their txid bookkeeping (the
txid of the batch a value includes, and an opaque value's previous value), so an operator can check a count."""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
from collections.abc import Iterator
from typing import Any

import redis

from txdag.cli import exits
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


def key_format(state: Any) -> str:
    """How the keys of ``state`` are spelled on the command line (its hash fields as stored)."""
    if state.key_fields == 0:
        return "it is global (one value): give no key"
    if state.separator is not None and state.key_fields > 1:
        return (f"its keys are {state.key_fields} fields joined by {state.separator!r}, as stored (e.g. "
                f"{state.separator.join(['a', 'b', 'c'][:state.key_fields])!r})")
    if state.key_fields > 1:
        return f"its keys are JSON arrays of {state.key_fields} fields, as stored (e.g. '[\"a\",\"b\"]')"
    return "its keys are plain strings, as stored"


def read(backing: RedisBackingMap, field_names: list[str], state: Any, given: bool = True) -> list[dict[str, Any]]:
    """The rows of the fields; a field that is not one of the state's keys is a usage error when the user gave
    it, and a hash shared with another program when it came from the hash itself."""
    keys = []
    for field_name in field_names:
        try:
            key = backing.key_codec.decode(field_name)
            backing.key_codec.encode(key)
        except ValueError:
            if given:
                raise CliError(f"{field_name!r} is not a key of state {state.name!r}: {key_format(state)}",
                               exits.USAGE) from None
            raise CliError(f"the Redis hash {state.redis_key!r} of state {state.name!r} holds the field "
                           f"{field_name!r}, which is not one of its keys: another program writes that hash; give "
                           "the state a namespace of its own", exits.CONFIG) from None
        keys.append(key)
    with wrong_type(state):
        stored = backing.multi_get(keys)
    return [unwrap(f, v) for f, v in zip(field_names, stored)]


@contextlib.contextmanager
def wrong_type(state: Any) -> Iterator[None]:
    """A state's key that holds another Redis type than a hash (WRONGTYPE) is a key shared with another program."""
    try:
        yield
    except redis.ResponseError as exc:
        if "WRONGTYPE" not in str(exc):
            raise
        raise CliError(f"the Redis key {state.redis_key!r} of state {state.name!r} is not a hash (WRONGTYPE): "
                       "another program uses that key; give the state a namespace of its own in its DAG file",
                       exits.CONFIG) from None


def open_state(args: argparse.Namespace) -> tuple[Any, Any, RedisBackingMap]:
    definition = topology(args, args.topology)
    state = state_of(definition, args.state)
    client = redis_for(conn_id(args, "redis", definition), timeout=10)
    return definition, state, RedisBackingMap(client, state.redis_key, key_codec=state.codec())


def cmd_get(args: argparse.Namespace) -> int:
    """Values of the given keys (hash fields as stored: ``hello``, ``@bob:#tag``; none for a global state)."""
    definition, state, backing = open_state(args)
    if bool(args.keys) != (state.key_fields != 0):
        raise CliError(f"state {state.name!r} of topology {definition.topology_id!r}: {key_format(state)}"
                       + ("" if args.keys else "; give one or more"), exits.USAGE)
    field_names = list(args.keys) or [GLOBAL_KEY[0]]
    data = report(definition, state, read(backing, field_names, state))
    emit(args, data, state_text)
    return 0


def cmd_top(args: argparse.Namespace) -> int:
    """The ``-n`` keys with the largest numeric values (HSCAN, so a large hash is never read in one reply)."""
    definition, state, backing = open_state(args)
    client = backing.client
    best: list[tuple[float, str]] = []
    with redis_errors(client, f"reading state {state.name!r} of topology {definition.topology_id!r}"), \
            wrong_type(state):
        total = int(client.hlen(state.redis_key))
        for raw_field, raw_value in client.hscan_iter(state.redis_key, count=SCAN_COUNT):
            number = numeric(raw_value)
            if number is not None:
                item = (number, raw_field.decode(errors="replace"))
                if len(best) < args.n:
                    heapq.heappush(best, item)
                else:
                    heapq.heappushpop(best, item)
    ranked = [f for _, f in sorted(best, key=lambda item: (-item[0], item[1]))]
    data = {**report(definition, state, read(backing, ranked, state, given=False)), "total_keys": total}
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

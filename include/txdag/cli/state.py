"""``txdag state get|top``: committed values of a topology's state, unwrapped from their txid bookkeeping (the
txid of the batch a value includes, and an opaque value's previous value), so an operator can check a count. Both
read the state as of the last committed txid (txdag.state.committed), also while the next commit is half applied."""

from __future__ import annotations

import argparse
import contextlib
import heapq
from collections.abc import Iterator
from typing import Any

import redis

from txdag.cli import exits
from txdag.cli.common import CliError, conn_id, connection, emit, redis_for, table, topology
from txdag.state import OpaqueValue, RedisBackingMap, TransactionalValue
from txdag.state.committed import CommittedRead, CommittedValue, read_committed, scan_committed
from txdag.state.snapshottable_map import GLOBAL_KEY


def state_of(definition: Any, name: str) -> Any:
    """The topology's state by name (or by Redis namespace), or an error listing its states."""
    for state in definition.states:
        if name in (state.name, state.redis_key):
            return state
    names = ", ".join(s.name for s in definition.states)
    raise CliError(f"topology {definition.topology_id!r} has no state {name!r} (its states: {names})")


def unwrap(field: str, kind: str, found: CommittedValue | None) -> dict[str, Any]:
    """A value as of the committed txid as a row: the value, and the txid (transactional, opaque: unknown when it
    was read from before a half-applied txid) and prev (opaque) around it."""
    if found is None:
        return {"key": field, "value": None, "txid": None, "kind": None, "found": False}
    row = {"key": field, "value": found.value, "txid": found.txid, "kind": kind}
    if kind == "opaque":
        row["prev"] = found.prev
    return row if kind != "non_transactional" else {**row, "found": True}


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


def read(definition: Any, backing: RedisBackingMap, state: Any, field_names: list[str]) -> CommittedRead:
    """The fields given (each checked to be one of the state's keys, a usage error otherwise), as of the last
    committed txid."""
    for field_name in field_names:
        check_field(backing, state, field_name, given=True)
    with wrong_type(state):
        return read_committed(backing, definition.commit_marker, definition.topology_id, field_names)


def check_field(backing: RedisBackingMap, state: Any, field_name: str, given: bool) -> None:
    try:
        backing.key_codec.encode(backing.key_codec.decode(field_name))
    except ValueError:
        if given:
            raise CliError(f"{field_name!r} is not a key of state {state.name!r}: {key_format(state)}",
                           exits.USAGE) from None
        raise CliError(f"the Redis hash {state.redis_key!r} of state {state.name!r} holds the field "
                       f"{field_name!r}, which is not one of its keys: another program writes that hash; give "
                       "the state a namespace of its own", exits.CONFIG) from None


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


def open_state(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """The topology's definition, the state, and its backing map: a Redis hash, or a table of a store that txdag
    reads itself (a PostgresStore: ``reader``)."""
    definition = topology(args, args.topology)
    state = state_of(definition, args.state)
    reader = getattr(state.store, "reader", None)
    if reader is not None:  # its errors are txdag's: a refused table (exit 5), a database that does not answer (3)
        conn = connection(state.store.conn_id)
        return definition, state, reader(definition.topology_id, state.name, state.key_fields, conn)
    state.require_redis(f"txdag state {args.state_command}", definition.topology_id)
    client = redis_for(conn_id(args, "redis", definition), timeout=10)
    return definition, state, RedisBackingMap(client, state.redis_key, key_codec=state.codec())


def cmd_get(args: argparse.Namespace) -> int:
    """Values of the given keys (hash fields as stored: ``hello``, ``@bob:#tag``; none for a global state)."""
    definition, state, backing = open_state(args)
    if bool(args.keys) != (state.key_fields != 0):
        raise CliError(f"state {state.name!r} of topology {definition.topology_id!r}: {key_format(state)}"
                       + ("" if args.keys else "; give one or more"), exits.USAGE)
    field_names = list(args.keys) or [GLOBAL_KEY[0]]
    if not isinstance(backing, RedisBackingMap):
        committed, _ = read_store(definition, state, backing, field_names)
    else:
        committed = read(definition, backing, state, field_names)
    emit(args, report(definition, state, committed, field_names), state_text)
    return 0


def read_store(definition: Any, state: Any, backing: Any, field_names: list[str] | None, n: int = 0
               ) -> tuple[CommittedRead, int]:
    """A store's table read in one snapshot with the txid it holds; keys spelled as for a Redis state."""
    codec = state.codec()
    keys = None
    if field_names is not None:
        keys = [GLOBAL_KEY] if state.key_fields == 0 else [decode_key(state, codec, f) for f in field_names]
    txid, found, total = backing.read_committed(keys, largest=n)
    values = {field: CommittedValue(*unwrapped) for key, stored in found
              if (unwrapped := unwrap_stored(stored)) is not None
              for field in [GLOBAL_KEY[0] if state.key_fields == 0 else codec.encode(key)]}
    return CommittedRead(txid, values), total


def decode_key(state: Any, codec: Any, field_name: str) -> tuple:
    try:
        key = codec.decode(field_name)
        if len(key) != state.key_fields:
            raise ValueError(f"{len(key)} fields")
        return key
    except ValueError:
        raise CliError(f"{field_name!r} is not a key of state {state.name!r}: {key_format(state)}",
                       exits.USAGE) from None


def unwrap_stored(stored: Any) -> tuple[Any, int | None, Any] | None:
    if stored is None:
        return None
    if isinstance(stored, TransactionalValue):
        return stored.value, stored.txid, None
    if isinstance(stored, OpaqueValue):
        return stored.curr, stored.txid, stored.prev
    return stored, None, None


def cmd_top(args: argparse.Namespace) -> int:
    """The ``-n`` keys with the largest numeric values, read a page of HSCAN at a time (a large hash is never read
    in one reply, nor held whole), each page as of the committed txid when it was read (scan_committed: a scan that
    outlasts a commit says which txids its pages are as of). A store's table: its ``-n`` largest, one query."""
    definition, state, backing = open_state(args)
    if not isinstance(backing, RedisBackingMap):
        committed, total = read_store(definition, state, backing, None, args.n)
        emit(args, {**report(definition, state, committed, list(committed.values)), "total_keys": total},
             state_text)
        return 0
    best: list[tuple[float, str, CommittedValue]] = []
    txids: set[int | None] = set()
    total = newer = 0
    isolated = True
    with wrong_type(state):
        for page in scan_committed(backing, definition.commit_marker, definition.topology_id):
            for field_name in page.values:  # a field that is not a key: a hash shared with another program
                check_field(backing, state, field_name, given=False)
            numbers = [(number, f, v) for f, v in page.values.items() if (number := numeric(v.value)) is not None]
            best = heapq.nsmallest(args.n, best + numbers, key=lambda item: (-item[0], item[1]))
            txids.add(page.txid)
            total, newer, isolated = total + len(page.values), newer + page.newer, isolated and page.isolated
    known = sorted(t for t in txids if t is not None)
    committed = CommittedRead(known[-1] if known else None, {f: v for _, f, v in best}, newer, isolated)
    data = {**report(definition, state, committed, [f for _, f, _ in best]), "total_keys": total}
    if len(known) > 1:
        data["committed_from"] = known[0]
    emit(args, data, state_text)
    return 0


def numeric(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def report(definition: Any, state: Any, committed: CommittedRead, field_names: list[str]) -> dict[str, Any]:
    """The JSON of a read: the rows, and the txid they are as of (``newer``: keys of the next txid, whose commit is
    half applied, shown as of it; ``isolated`` is false for a non-transactional state, read as it is)."""
    rows = [unwrap(f, state.kind, committed.values.get(f)) for f in field_names]
    data = {"topology": definition.topology_id, "state": state.name, "kind": state.kind,
            "namespace": state.redis_key, "committed_txid": committed.txid, "newer": committed.newer,
            "isolated": committed.isolated, "values": rows}
    return data if state.in_redis else {**data, "namespace": None, "store": repr(state.store)}


def state_text(d: dict[str, Any]) -> str:
    total = f", {d['total_keys']} keys" if "total_keys" in d else ""
    where = f"in {d['store']}" if d.get("store") else f"Redis hash {d['namespace']}"
    head = f"state {d['state']} of topology {d['topology']} ({d['kind']}, {where}{total})"
    if d["isolated"] and d["committed_txid"] is None:
        head += ", nothing committed yet"
        if d["newer"]:
            head += f" (txid 1's commit is half applied: {d['newer']} of the keys read hold it already, not shown)"
    elif d["isolated"]:
        since = d.get("committed_from")
        head += (f", as of committed txids {since} to {d['committed_txid']} (commits ended while it was read: each "
                 f"page of keys is as of one of them)" if since is not None else
                 f", as of committed txid {d['committed_txid']}")
        if d["newer"]:
            head += (f" (the next txid's commit was half applied: {d['newer']} of the keys read held it already "
                     f"and are shown as of the txid before)")
    if not d["values"]:
        return f"{head}\nno values"
    cols = ["key", "value"] + ([] if d["kind"] == "non_transactional" else ["txid"])
    cols += ["prev"] if d["kind"] == "opaque" else []
    return f"{head}\n{table(d['values'], cols)}"

"""A Redis map state read as of the last committed txid, even while the next commit is half applied.

The race it closes: a commit applies txid N+1 in several script calls (a chunk of keys each, one state at a time on
a Redis Cluster) and writes the commit marker last. A reader of the hash in between sees some keys at N+1 and the
others at N, a total that never existed. Every transactional and opaque value keeps, beside the txid it includes,
the value before that txid (``{ns}:prev``, written by the same script call as the value): a key whose txid is above
the marker is read as its previous value, and a key without one had no value at N.

The marker is read before and after the values; each page of values is read at one instant (the ``state.read``
script). While the marker holds N, only txid N+1 can be half applied (N+2 begins after N+1's marker), so the values
are exactly the state as of N. When the marker moved meanwhile, the read is made again.

A non-transactional state keeps no txid: it is read as it is (``isolated`` is False), as Storm's
non-transactional states promise nothing about replays either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from txdag.errors import StoreWentBackwards, TxdagError
from txdag.luascripts import run
from txdag.redisio import redis_errors
from txdag.state.base import StateKind
from txdag.state.lua import READ
from txdag.state.marker import read_marker
from txdag.state.redis_backing import RedisBackingMap
from txdag.state.values import OpaqueValue, TransactionalValue, committed_value

SCAN_COUNT = 1000
ATTEMPTS = 20  # reads made again while commits keep moving the marker, before giving up
T = TypeVar("T")


@dataclass(frozen=True)
class CommittedValue:
    """A key's value as of the read's txid: ``txid`` is the txid it includes (None when it was read from before a
    half-applied txid, or the state is non-transactional), ``prev`` an opaque value's value before that txid."""

    value: Any
    txid: int | None = None
    prev: Any = None


@dataclass(frozen=True)
class CommittedRead:
    """A state's values as of ``txid`` (None: nothing committed yet), by hash field; a field without a value then
    is left out. ``newer``: how many fields held a later txid (its commit half applied) and were read as their value
    before it. ``isolated``: False for a non-transactional state, read as it is."""

    txid: int | None
    values: dict[str, CommittedValue] = field(default_factory=dict)
    newer: int = 0
    isolated: bool = True


def read_committed(backing: RedisBackingMap, marker_key: str, topology: str,
                   fields: Sequence[str] | None = None) -> CommittedRead:
    """The state's values as of the marker's txid, one snapshot: of ``fields`` (hash fields), or of every field
    (read by pages of HSCAN, so a large hash never travels in one reply; made again whole when a commit ends
    during it: for a large state that commits often, scan_committed)."""
    def read(committed: int | None) -> CommittedRead:
        pages = [_page(backing, committed, reply) for reply in _replies(backing, fields)]
        values = {name: value for page in pages for name, value in page.values.items()}
        isolated = all(page.isolated for page in pages) if pages else True
        return CommittedRead(committed, values, sum(page.newer for page in pages), isolated)

    return _as_of_marker(backing, marker_key, topology, read)


def scan_committed(backing: RedisBackingMap, marker_key: str, topology: str) -> Iterator[CommittedRead]:
    """Every field of the state, a page of HSCAN at a time, each page as of the committed txid when it was read
    (made again while a commit ends during it): memory and retries stay those of one page whatever the state's
    size, and the pages of a scan that outlasts a commit are as of different txids (never part of one)."""
    cursor = "0"
    while True:
        def read(committed: int | None, at: str = cursor) -> tuple[str, CommittedRead]:
            reply = run(backing.client, READ, backing.keys, ["scan", at, str(SCAN_COUNT)])
            return _text(reply[0]), _page(backing, committed, reply)

        with redis_errors(backing.client, f"reading state {backing.namespace!r}", keys=backing.keys):
            cursor, page = _as_of_marker(backing, marker_key, topology, read)
        yield page
        if cursor == "0":
            return


def _as_of_marker(backing: RedisBackingMap, marker_key: str, topology: str, read: Callable[[int | None], T]) -> T:
    """``read(committed)`` between two reads of the marker, made again until the marker held still."""
    client, doing = backing.client, f"reading state {backing.namespace!r}"
    for _ in range(ATTEMPTS):
        before = read_marker(client, marker_key, topology, doing)
        try:
            result = read(before)
        except _Ahead as ahead:  # a commit ended meanwhile; or the marker is behind the values: the store went back
            if read_marker(client, marker_key, topology, doing) != before:
                continue
            raise StoreWentBackwards(
                f"topology {topology!r}: state {backing.namespace!r} field {ahead.field!r} holds txid {ahead.txid}, "
                f"but the commit marker {marker_key!r} holds {before}: the marker went back (a Redis restored from "
                f"an older copy?); run txdag status for the ways out") from None
        if read_marker(client, marker_key, topology, doing) == before:
            return result
    raise TxdagError(f"topology {topology!r}: state {backing.namespace!r} could not be read as of one committed "
                     f"txid: {ATTEMPTS} commits ended while it was read; read it again, or read fewer keys")


def _replies(backing: RedisBackingMap, fields: Sequence[str] | None) -> Iterator[list[Any]]:
    """The state.read replies of ``fields``, or of every field by pages of HSCAN."""
    with redis_errors(backing.client, f"reading state {backing.namespace!r}", keys=backing.keys):
        if fields is not None:
            for start in range(0, len(fields), backing.chunk_size):
                yield run(backing.client, READ, backing.keys, ["get", *fields[start:start + backing.chunk_size]])
            return
        cursor = "0"
        while True:
            reply = run(backing.client, READ, backing.keys, ["scan", cursor, str(SCAN_COUNT)])
            yield reply
            cursor = _text(reply[0])
            if cursor == "0":
                return


def _page(backing: RedisBackingMap, committed: int | None, reply: list[Any]) -> CommittedRead:
    """One state.read reply's values as of ``committed``."""
    _cursor, version, stored_kind, names, raws, txids, prevs = reply
    kind = backing.kind_of([version, stored_kind])
    values: dict[str, CommittedValue] = {}
    newer = 0
    for name, raw, txid, prev in zip(names, raws, txids, prevs):
        name = _text(name)
        value, from_before = _as_of(backing, kind, committed, name, raw, txid, prev)
        newer += from_before
        if value is not None:
            values[name] = value
    return CommittedRead(committed, values, newer, kind is not StateKind.NON_TRANSACTIONAL)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _Ahead(Exception):
    """A field holds a txid above the marker's next one: only possible once the marker moved, or went back."""

    def __init__(self, field: str, txid: int) -> None:
        super().__init__(field, txid)
        self.field, self.txid = field, txid


def _as_of(backing: RedisBackingMap, kind: StateKind, committed: int | None, name: str, raw: Any, txid: Any,
           prev: Any) -> tuple[CommittedValue | None, bool]:
    """One field's value as of ``committed`` (None: it had none then), and whether it was read from its value
    before a half-applied txid."""
    stored = backing.decode(kind, name, raw, txid, prev)
    if not isinstance(stored, TransactionalValue | OpaqueValue):
        return (None if stored is None else CommittedValue(stored)), False
    if committed is not None and stored.txid <= committed:
        before = stored.prev if isinstance(stored, OpaqueValue) else None
        return CommittedValue(committed_value(stored), stored.txid, before), False
    if stored.txid > (committed or 0) + 1:
        raise _Ahead(name, stored.txid)
    return (None if prev is None else CommittedValue(backing.loads(name, prev))), True

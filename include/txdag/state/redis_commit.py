"""Apply a batch's partial results to Redis map states in one server-side step per chunk of keys.

This is the commit of an aggregate such as Count or Sum: ``apply_partials(client, txid, [(state, {key:
delta})], marker_key=...)``. Each key's txid rule runs inside Redis (transactional: skip a key that already
holds txid; opaque: recompute from prev), so re-applying the same txid changes nothing.

The race the script closes, as a timeline, if the rule ran in Python instead:
    committer A  reads count=3,txid=1 | ... crashes before writing ...
    committer A' (retry) reads count=3,txid=1, writes 5,txid=2
    committer A  (a zombie that was only paused) writes 5,txid=2  -> fine here, but with a read-modify-write
                 on prev/curr for opaque state, interleavings of two writers lose or double a delta.
Inside one script there is no interleaving: each chunk is applied atomically. Chunks are sent one after the
other; the marker and the extra keys are written with the last chunk, so a marker >= txid means the whole
batch is in.

On a Redis Cluster a script touches one hash slot. A state's four keys share its namespace's slot; the staging and
the marker are in the topology's (``{topology}``). So a call holds one state's keys only, and the marker is its own
write after every state. A commit that dies between two slots leaves some states with the txid and others
without; its replay applies the same partials again, and the per-key txid rule turns what is in already into a
no-op (non-transactional states excepted: they are at-least-once by definition).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Number
from typing import Any

import redis
from redis.crc import key_slot

from txdag.errors import ConfigError
from txdag.luascripts import run
from txdag.redisio import redis_errors, replicate
from txdag.state.base import Key, StateKind
from txdag.state.lua import APPLY, APPLY_STAGED
from txdag.state.map_state import MapStateBase
from txdag.state.marker import read_marker
from txdag.state.redis_backing import RedisBackingMap, state_keys

DEFAULT_CHUNK = 5000
STAGED_PAGE = 5000  # fields per script call when the partials are read inside Redis


@dataclass(frozen=True)
class ApplyResult:
    applied: int  # keys whose value changed
    skipped: int  # keys that already held this txid (a replay of a transactional state)
    already_committed: bool  # the marker showed this txid (or a later one) already committed: nothing done
    chunks: int
    staged_bytes: int = 0  # the staged partials' fields and values, as staged (txdag.airflow.metrics' commit_bytes)


@dataclass(frozen=True)
class EncodedPartials:
    """Partials whose keys are already hash fields (as staged by the processing step)."""

    namespace: str
    kind: StateKind
    deltas: Mapping[str, Number]


def encode(state: MapStateBase, partials: Mapping[Key, Number]) -> EncodedPartials:
    """Encode the keys of ``partials`` with the codec of ``state``'s RedisBackingMap."""
    backing = state.backing
    if not isinstance(backing, RedisBackingMap):
        raise ConfigError(f"server-side apply needs a state over RedisBackingMap, got {type(backing).__name__}")
    return EncodedPartials(backing.namespace, state.kind, {backing.key_codec.encode(k): d for k, d in partials.items()})


def apply_partials(
    client: redis.Redis,
    txid: int,
    partials: Sequence[tuple[MapStateBase, Mapping[Key, Number]]],
    **options: object,
) -> ApplyResult:
    """Add ``partials`` (per state, key -> number) for batch ``txid``; see apply_encoded for the options."""
    return apply_encoded(client, txid, [encode(state, deltas) for state, deltas in partials], **options)  # type: ignore[arg-type]


def apply_encoded(
    client: redis.Redis,
    txid: int,
    partials: Sequence[EncodedPartials],
    *,
    marker_key: str | None = None,
    extra: Mapping[str, str] | None = None,
    chunk_size: int = DEFAULT_CHUNK,
    topology: str | None = None,
) -> ApplyResult:
    """One script call per chunk of ``chunk_size`` keys; ``marker_key`` gets txid and ``extra`` its values last.
    On a Redis Cluster whose keys are in several slots, each chunk holds one state's keys, and the marker is
    checked before and written after them (write_marker). ``topology`` only names the topology in errors."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    items = [(p, field, _number(p, field, d)) for p in partials for field, d in p.deltas.items()]
    touched = [k for p in partials for k in state_keys(p.namespace)] + ([marker_key] if marker_key else [])
    if not one_slot(client, touched + list(extra or {})):
        return _apply_per_slot(client, txid, partials, items, marker_key, extra, chunk_size, topology)
    chunks = [items[i : i + chunk_size] for i in range(0, len(items), chunk_size)] or [[]]
    applied = skipped = 0
    with redis_errors(client, f"committing txid {txid}", topology=topology, keys=touched + list(extra or {})):
        for n, chunk in enumerate(chunks):
            last = n == len(chunks) - 1
            keys, args = _call(txid, chunk, marker_key, last, (extra or {}) if last else {})
            a, s = run(client, APPLY, keys, args, where=_where(topology, txid))
            if a == -1:
                return ApplyResult(applied, skipped, True, n + 1)
            applied, skipped = applied + a, skipped + s
    return ApplyResult(applied, skipped, False, len(chunks))


def _apply_per_slot(client: redis.Redis, txid: int, partials: Sequence[EncodedPartials],
                    items: list[tuple[EncodedPartials, str, str]], marker_key: str | None,
                    extra: Mapping[str, str] | None, chunk_size: int, topology: str | None) -> ApplyResult:
    """apply_encoded where the states are in several Redis Cluster slots: chunks of one state each."""
    if marker_key is not None:
        marker = read_marker(client, marker_key, topology or "", f"reading the marker of txid {txid}")
        if marker is not None and marker >= txid:
            return ApplyResult(0, 0, True, 0)
    applied = skipped = calls = 0
    by_partials: dict[int, list[tuple[EncodedPartials, str, str]]] = {}  # id(p) -> p's items, in items' order
    for item in items:  # one pass over items (a filter of them per state was len(partials) x len(items))
        by_partials.setdefault(id(item[0]), []).append(item)
    for p in partials:
        mine = by_partials.get(id(p), [])
        for first in range(0, len(mine), chunk_size):
            keys, args = _call(txid, mine[first : first + chunk_size], None, False, {})
            with redis_errors(client, f"committing txid {txid}", topology=topology, keys=keys):
                a, s = run(client, APPLY, keys, args, where=_where(topology, txid))
            applied, skipped, calls = applied + a, skipped + s, calls + 1
    write_marker(client, txid, marker_key, extra, topology=topology, written=[p.namespace for p in partials])
    return ApplyResult(applied, skipped, False, calls)


@dataclass(frozen=True)
class StagedPartials:
    """A state's numeric partials as the processing step staged them: a hash of field -> number in Redis."""

    namespace: str
    kind: StateKind
    stage_key: str


def apply_staged(
    client: redis.Redis,
    txid: int,
    partials: Sequence[StagedPartials],
    *,
    marker_key: str | None = None,
    extra: Mapping[str, str] | None = None,
    page: int = STAGED_PAGE,
    topology: str | None = None,
) -> ApplyResult:
    """Add staged partials of batch ``txid`` state by state (apply_staged_state), then ``extra`` and the marker,
    last (write_marker). The caller checks the marker first: a marker >= txid means every state holds the txid."""
    applied = skipped = calls = staged_bytes = 0
    for p in partials:
        a, s, c, b = apply_staged_state(client, txid, p, page=page, topology=topology)
        applied, skipped, calls, staged_bytes = applied + a, skipped + s, calls + c, staged_bytes + b
    write_marker(client, txid, marker_key, extra, topology=topology, written=[p.namespace for p in partials])
    return ApplyResult(applied, skipped, False, calls, staged_bytes)


def apply_staged_state(client: redis.Redis, txid: int, p: StagedPartials, *, page: int = STAGED_PAGE,
                       topology: str | None = None) -> tuple[int, int, int, int]:
    """Add one state's staged partials of batch ``txid``, a page of ``page`` fields per script call; returns
    (applied, skipped, calls, bytes of the staged fields and values). Where one script may reach both the staging
    hash and the state (one server, or one Redis Cluster slot), the partials are read and applied inside Redis and
    never go through the client; on a cluster whose state is in another slot than the staging, each page is read
    here (HSCAN) and applied in the state's slot. Either way each page is atomic and the per-key txid rule makes a
    second pass a no-op, so a commit that dies between two states (two slots) is completed by its replay."""
    keys = [*state_keys(p.namespace), p.stage_key]
    server_side = one_slot(client, keys)
    applied = skipped = calls = staged_bytes = 0
    cursor: int | str = "0" if server_side else 0
    with redis_errors(client, f"committing txid {txid}", topology=topology, keys=keys):
        while True:
            if server_side:
                cursor, a, s, b = run(client, APPLY_STAGED, keys, [str(txid), p.kind.value, cursor, str(page)],
                                      where=_where(topology, txid))
                cursor = cursor.decode() if isinstance(cursor, bytes) else str(cursor)
            else:
                cursor, fields = client.hscan(p.stage_key, int(cursor), count=page)
                a, s = _apply_fields(client, txid, p, fields, topology) if fields else (0, 0)
                b = staged_size(fields.items()) if isinstance(fields, dict) else 0  # HSCAN's page: a dict
            applied, skipped, calls, staged_bytes = applied + a, skipped + s, calls + 1, staged_bytes + b
            if str(cursor) == "0":
                return applied, skipped, calls, staged_bytes


def staged_size(pairs: Iterable[tuple[bytes | str, bytes | str]]) -> int:
    """Bytes of staged fields and values as Redis holds them (what APPLY_STAGED counts inside Redis)."""
    return sum(len(f) + len(v) for f, v in pairs)


def _apply_fields(client: redis.Redis, txid: int, p: StagedPartials, fields: Any,
                  topology: str | None) -> tuple[int, int]:
    """One page of staged fields, read by the client, applied to the state by the APPLY script (one slot)."""
    target = EncodedPartials(p.namespace, p.kind, {})
    chunk = [(target, f.decode(), v.decode()) for f, v in fields.items()]
    keys, args = _call(txid, chunk, None, False, {})
    applied, skipped = run(client, APPLY, keys, args, where=_where(topology, txid))
    return applied, skipped


def write_marker(client: redis.Redis, txid: int, marker_key: str | None, extra: Mapping[str, str] | None = None,
                 *, topology: str | None = None, written: Sequence[str] = ()) -> None:
    """``extra``'s keys, then the marker (its own write, after them: on a Redis Cluster a pipeline's commands to
    different nodes are not ordered), so a marker >= txid means the whole batch is in. On a Redis Cluster the
    marker waits until a replica has ``written`` (the states' namespaces) and ``extra``: else a failover of a state's
    master could take back its writes while the marker, on another master, stays, and the replay that trusts the
    marker would skip them (counts lost)."""
    with redis_errors(client, f"committing txid {txid}", topology=topology, keys=[*(extra or {}), marker_key or ""]):
        if extra:
            pipe = client.pipeline(transaction=False)
            for key, value in extra.items():
                pipe.set(key, value)
            pipe.execute()
        if marker_key is not None:
            doing = f"the commit of txid {txid}" + (f" of topology {topology!r}" if topology else "")
            replicate(client, [*written, *(extra or {})], f"{doing}, before its marker")
            client.set(marker_key, txid)


def commit_keys(states: Mapping[str, MapStateBase], topology: str) -> list[str]:
    """A key in each slot a commit writes (one per slot is enough for WAIT): each Redis state's namespace, and the
    topology's own slot (its windows, new values, rejections and staging carry the ``{topology}`` hash tag)."""
    return [s.backing.namespace for s in states.values() if isinstance(s.backing, RedisBackingMap)] + [
        f"{{{topology}}}"]


def one_slot(client: redis.Redis, keys: Sequence[str]) -> bool:
    """Whether one script call may touch all of ``keys``: always on one server, on a Redis Cluster only when their
    hash tags put them in one slot."""
    if getattr(client, "nodes_manager", None) is None:
        return True
    return len({key_slot(k.encode()) for k in keys}) == 1


def _where(topology: str | None, txid: int) -> str:
    """What a script error's message starts with: the topology (when known) and the txid being committed."""
    return f"topology {topology!r}, committing txid {txid}" if topology else f"committing txid {txid}"


def _call(
    txid: int,
    chunk: list[tuple[EncodedPartials, str, str]],
    marker_key: str | None,
    last: bool,
    extra: Mapping[str, str],
) -> tuple[list[str], list[str]]:
    """KEYS and ARGV of one script call (layout in APPLY_SCRIPT's header, txdag.state.lua)."""
    by_state: dict[tuple[str, StateKind], list[str]] = {}
    for p, field, delta in chunk:
        by_state.setdefault((p.namespace, p.kind), []).extend((field, delta))
    marker_mode = "0" if marker_key is None else "2" if last else "1"
    keys: list[str] = []
    args: list[str] = [str(txid), str(len(by_state)), marker_mode, str(len(extra))]
    for (namespace, kind), pairs in by_state.items():
        keys += state_keys(namespace)
        args += [kind.value, str(len(pairs) // 2), *pairs]
    if marker_key is not None:
        keys.append(marker_key)
    keys += list(extra)
    args += list(extra.values())
    return keys, args


def _number(p: EncodedPartials, field: str, delta: object) -> str:
    if isinstance(delta, bool) or not isinstance(delta, (int, float)):
        raise TypeError(f"partial for state {p.namespace!r} field {field!r} is {delta!r}; partials are numbers")
    return repr(delta) if isinstance(delta, float) else str(delta)

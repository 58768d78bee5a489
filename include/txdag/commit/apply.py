"""The commit's appliers of staged outputs: combiner partials, windows, state updaters, numeric partials (the table
of kinds that calls them: txdag.commit.kinds; key-value states: txdag.commit.keyvalue).

Each runs in the commit task, in txid order, and is idempotent for its txid: the map states skip or recompute a
key that already holds the txid, the window store returns what a txid fired the first time, the new values
stream takes a txid's entries once. User classes (aggregators, updaters) are rebuilt from the references the
processing step staged (txdag.topology.refs), from the job file or txdag. Numeric partials are added inside Redis by
txdag.state.redis_commit; the commit phase writes the marker after every applier (txdag.commit.phase).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from operator import add
from types import ModuleType
from typing import Any

import redis

from txdag.attempt import TransactionAttempt
from txdag.commit.newvalues import emit_values
from txdag.commit.rejections import clash_rejection, record_rejections
from txdag.errors import ConfigError, StoreWentBackwards
from txdag.faults import crash_if_requested
from txdag.redisio import redis_errors
from txdag.spouts.base import Rejection
from txdag.staging.format import OutputSpec, decode_number
from txdag.state.base import Key, ValueUpdater
from txdag.state.combine_apply import apply_combined, apply_updaters
from txdag.state.keys import KeyClashError
from txdag.state.kv import KVNamespace, ProviderConfig
from txdag.state.map_state import MapStateBase
from txdag.state.redis_backing import RedisBackingMap
from txdag.state.redis_commit import STAGED_PAGE, StagedPartials, apply_staged_state
from txdag.state.snapshottable_map import GLOBAL_KEY
from txdag.topology.refs import resolve_ref
from txdag.windows.rules import spec_from_dict
from txdag.windows.store import Evaluate, Fired, Row, WindowStore

log = logging.getLogger("txdag.commit")


@dataclass(frozen=True)
class KVTarget:
    """Where one key-value state lives."""

    namespace: KVNamespace
    config: ProviderConfig


@dataclass(frozen=True)
class CommitContext:
    """What an applier works with: the txid attempt being committed, and where its states are."""

    topology: str
    tx: TransactionAttempt
    client: redis.Redis
    states: Mapping[str, MapStateBase]
    load_job: Callable[[], ModuleType] | None = None
    key_values: Mapping[str, KVTarget] = field(default_factory=dict)

    def rebuild(self, name: str, spec: OutputSpec, base: Any) -> Any:
        if self.load_job is None and (spec.ref or {}).get("module") == "job":
            raise ConfigError(f"topology {self.topology!r} {self.tx}: state {name!r} was staged with a class of the "
                              f"job file, and this commit has no job file to load it from")
        return resolve_ref(spec.ref, self.load_job or _no_job, base)


def _no_job() -> ModuleType:
    raise ConfigError("no job file to load classes from")


def apply_combine(ctx: CommitContext, name: str, spec: OutputSpec, values: dict[str, Any]) -> int:
    """Trident's persistentAggregate with a CombinerAggregator: ``combine(stored, partial)`` per key."""
    from txdag.contracts import CombinerAggregator

    aggregator = ctx.rebuild(name, spec, CombinerAggregator)
    new = apply_combined(ctx.states[name], ctx.tx.txid, values, aggregator.combine)
    if spec.options.get("new_values"):
        emit_values(ctx.client, ctx.topology, name, ctx.tx.txid, [[*key, value] for key, value in new])
    return len(new)


def apply_window(ctx: CommitContext, name: str, spec: OutputSpec, values: dict[str, Any]) -> int:
    """Append the txid's rows to the window, aggregate the windows they close, put the last one into the state."""
    from txdag.contracts import AGGREGATOR_KINDS

    options = spec.options
    aggregator = ctx.rebuild(name, spec, AGGREGATOR_KINDS)
    store = WindowStore(ctx.client, ctx.topology, name, spec_from_dict(options.get("window")))
    rows = [values[seq] for seq in sorted(values, key=int)]
    evaluate = window_evaluator(aggregator, options["fields"], int(options.get("group_by", 0)), options.get("top"))
    fired, late = store.commit(ctx.tx.txid, rows, evaluate)
    if late:
        record_rejections(ctx.client, ctx.topology, ctx.tx, [
            Rejection(f"window:{name}:{ctx.tx.txid}:{i}", f"late for window {name!r}: timestamp {rows[i][0]} is "
                      f"behind a window that already fired") for i in late])
    if fired:
        _put_global(ctx, name, asdict(fired[-1]))
        if options.get("new_values"):
            emit_values(ctx.client, ctx.topology, name, ctx.tx.txid, [asdict(f) for f in fired])
    return len(fired)


def window_evaluator(aggregator: Any, fields: list[str], group_by: int, top: int | None) -> Evaluate:
    """Rows ``[ts, field...]`` -> ``[group keys..., aggregate...]`` per group (the first ``group_by`` fields), the
    ``top`` largest by the last column (ties by the keys), as the aggregator's own kernel computes it."""
    from pyspark.sql.types import Row as SparkRow

    from txdag.contracts import apply

    def evaluate(rows: list[Row]) -> list[list[Any]]:
        groups: dict[str, tuple[list[Any], list[Any]]] = {}
        for row in rows:
            key = row[1 : 1 + group_by]
            groups.setdefault(json.dumps(key), (key, []))[1].append(SparkRow(**dict(zip(fields, row[1:]))))
        result = [[*key, *out] for key, members in groups.values() for out in apply(aggregator, members)]
        if top is not None:
            try:
                result.sort(key=lambda r: tuple(r[:group_by]))
            except TypeError:  # keys of several types: ordered by their JSON text
                result.sort(key=lambda r: json.dumps(r[:group_by], ensure_ascii=False, default=str))
            result.sort(key=lambda r: r[-1], reverse=True)
            result = result[:top]
        return result

    return evaluate


def apply_persist(ctx: CommitContext, name: str, spec: OutputSpec, values: dict[str, Any]) -> int:
    """Trident's partitionPersist: the updater gets the state and the txid's rows, its emits become new values;
    or a ReducerAggregator's persistent aggregate: each key's rows folded into its stored value (a key the state's
    codec refuses is recorded as a rejection, and its rows are left out)."""
    from pyspark.sql.types import Row as SparkRow

    from txdag.contracts import Collector, ReducerAggregator, StateUpdater, reducer_updater

    fields, key_fields = spec.options["fields"], spec.options.get("key_fields")
    rows = [SparkRow(**dict(zip(fields, values[seq]))) for seq in sorted(values, key=int)]
    state, collector = ctx.states[name], Collector()
    if key_fields is not None:
        reducer = ctx.rebuild(name, spec, ReducerAggregator)
        groups: dict[str, tuple[tuple[Any, ...], list[Any]]] = {}
        for row in rows:
            key = tuple(row[:key_fields]) or GLOBAL_KEY
            groups.setdefault(json.dumps(key, default=str), (key, []))[1].append(row)
        codec = state.key_codec
        updates, clashes = [], []
        for k, members in groups.values():
            try:
                updates.append((codec.encode(k), reducer_updater(reducer, members)))
            except KeyClashError as exc:  # would share its field with another key: a rejection, not a merge
                clashes.append(clash_rejection(name, ctx.tx.txid, exc))
        record_rejections(ctx.client, ctx.topology, ctx.tx, clashes)
        new = apply_updaters(state, ctx.tx.txid, updates)
        collector.rows.extend((*key, value) for key, value in new)
    else:
        updater = ctx.rebuild(name, spec, StateUpdater)
        view = RefusingKeys(state, name, ctx.tx.txid)
        state.begin_commit(ctx.tx.txid)
        updater.update_state(view, rows, collector)
        state.commit(ctx.tx.txid)
        record_rejections(ctx.client, ctx.topology, ctx.tx, view.refused.values())
    if spec.options.get("new_values"):
        emit_values(ctx.client, ctx.topology, name, ctx.tx.txid, [list(r) for r in collector.rows])
    return len(rows)


class RefusingKeys:
    """The map state a StateUpdater gets: a key the state's codec refuses (KeyClashError: it would share its hash
    field with another key) reads as no value and is not written, and is kept in ``refused`` to be recorded as a
    rejection of the txid, as the job's refused keys are; the updater's other keys go to the state."""

    def __init__(self, state: MapStateBase, name: str, txid: int) -> None:
        self.state, self.name, self.txid = state, name, txid
        self.codec = state.key_codec
        self.refused: dict[str, Rejection] = {}

    def _accepted(self, keys: Sequence[Key]) -> list[bool]:
        accepted = []
        for key in keys:
            try:
                self.codec.encode(key)
                accepted.append(True)
            except KeyClashError as exc:
                rejection = clash_rejection(self.name, self.txid, exc)
                self.refused[rejection.id] = rejection
                accepted.append(False)
        return accepted

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        accepted = self._accepted(keys)
        got = iter(self.state.multi_get([k for k, ok in zip(keys, accepted) if ok]))
        return [next(got) if ok else None for ok in accepted]

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[ValueUpdater]) -> list[Any]:
        accepted = self._accepted(keys)
        kept = [(k, u) for k, u, ok in zip(keys, updaters, accepted) if ok]
        got = iter(self.state.multi_update([k for k, _ in kept], [u for _, u in kept]))
        return [next(got) if ok else None for ok in accepted]

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        accepted = self._accepted(keys)
        self.state.multi_put([k for k, ok in zip(keys, accepted) if ok], [v for v, ok in zip(values, accepted) if ok])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.state, name)


def apply_sink(ctx: CommitContext, name: str, spec: OutputSpec, values: dict[str, Any]) -> int:
    """Storm's committer bolt: the txid's rows, in batch order, to the sink's Committer, unless the sink already
    holds this attempt of the txid, or a later attempt of it (a retried commit); the number of rows handed over.
    What the committer raises is raised as it is (its class tells a retry from a failure: txdag.txid.healing), with
    a note naming the topology, the txid and the sink."""
    from pyspark.sql.types import Row as SparkRow

    committer, last, where = sink_position(ctx, name, spec)
    tx = ctx.tx
    if last is not None and last.txid == tx.txid and last.attempt >= tx.attempt:
        log.info("%s: the sink holds %s already: not committed to it again", where, last)
        return 0
    fields = spec.options["fields"]
    rows = [SparkRow(**dict(zip(fields, values[seq]))) for seq in sorted(values, key=int)]
    _call(lambda: committer.commit(tx, rows), where, "commit")
    log.info("%s: %s rows committed to the sink", where, len(rows))
    return len(rows)


def sink_position(ctx: CommitContext, name: str, spec: OutputSpec) -> tuple[Any, TransactionAttempt | None, str]:
    """The sink's committer, what it holds last, and how messages name it; raises when the sink is ahead of this
    commit or more than one txid behind it."""
    from txdag.contracts import Committer

    committer = ctx.rebuild(name, spec, Committer)
    where = f"topology {ctx.topology!r} {ctx.tx}: sink {name!r} ({committer!r})"
    last = _call(committer.last_applied, where, "last_applied")
    if last is not None and not isinstance(last, TransactionAttempt):
        raise ConfigError(f"{where}: last_applied() returned {last!r}; return the TransactionAttempt the sink holds "
                          f"last (txdag.TransactionAttempt(txid, attempt)), or None when it holds none")
    txid = ctx.tx.txid
    if last is not None and last.txid > txid:
        raise StoreWentBackwards(f"{where}: the sink holds txid {last.txid}, ahead of this commit: the topology was "
                                 f"started over while the sink kept what it holds, or another topology writes it; "
                                 f"empty the sink, or give the topology a sink of its own")
    if last is not None and last.txid < txid - 1:
        raise StoreWentBackwards(f"{where}: the sink holds txid {last.txid} last, so txids {last.txid + 1} to "
                                 f"{txid - 1}, committed, are missing from it (restored from an older copy?); "
                                 f"bring the sink back to txid {txid - 1}, or start it over empty")
    return committer, last, where


def _call(method: Callable[[], Any], where: str, name: str) -> Any:
    """A committer's method; what it raises keeps its class, with a note naming where it was called."""
    try:
        return method()
    except Exception as exc:
        exc.add_note(f"{where}: raised by the committer's {name}(); the commit is retried or fails the txid as the "
                     f"error's kind says (docs/topologies.md, Sinks)")
        raise


def _put_global(ctx: CommitContext, name: str, value: Any) -> None:
    state = ctx.states[name]
    state.begin_commit(ctx.tx.txid)
    state.multi_put([GLOBAL_KEY], [value])
    state.commit(ctx.tx.txid)


def apply_sums(ctx: CommitContext, outputs: Mapping[str, tuple[OutputSpec, str]]) -> tuple[int, int, int]:
    """Every state's numeric partials (their staging keys) added inside Redis, state by state, one script call per
    page of fields (the commit phase writes ``extra`` and the marker after every kind); returns (applied, skipped,
    bytes of the partials as staged). The ``applying`` fault point is after the first state: on a Redis Cluster, one
    slot written and not the rest."""
    applied = skipped = staged_bytes = 0
    for i, (name, (_, key)) in enumerate(outputs.items()):
        state = ctx.states[name]
        if isinstance(state.backing, RedisBackingMap):
            partials = StagedPartials(state.backing.namespace, state.kind, key)
            a, s, _, b = apply_staged_state(ctx.client, ctx.tx.txid, partials, topology=ctx.topology)
        else:  # a store of the user's (txdag.state.StateFactory): the partials through the map state's txid rules
            a, s, b = _apply_sums_to_store(ctx, name, key)
        applied, skipped, staged_bytes = applied + a, skipped + s, staged_bytes + b
        if i == 0:
            crash_if_requested("applying", ctx.topology, ctx.tx)
    return applied, skipped, staged_bytes


def _apply_sums_to_store(ctx: CommitContext, name: str, stage_key: str) -> tuple[int, int, int]:
    """A state in a store of the user's: its staged partials read from the staging hash, then added inside one
    begin_commit/commit (the store's own transaction, where it has one): by the backing map's ``add_sums`` where it
    has one (PostgreSQL: in SQL, set-based), else by the map state's multi_update. Returns (applied, skipped,
    bytes of the partials as staged)."""
    with redis_errors(ctx.client, f"reading the staged partials of state {name!r} of txid {ctx.tx.txid}",
                      topology=ctx.topology, keys=[stage_key]):
        partials, size = {}, 0
        for f, v in ctx.client.hscan_iter(stage_key, count=STAGED_PAGE):
            partials[f.decode()], size = decode_number(v), size + len(f) + len(v)
    state = ctx.states[name]
    add_sums = getattr(state.backing, "add_sums", None)
    if add_sums is None:
        return len(apply_combined(state, ctx.tx.txid, partials, add)), 0, size
    state.begin_commit(ctx.tx.txid)
    written = add_sums(ctx.tx.txid, state.kind.value, [(state.key_codec.decode(f), v) for f, v in partials.items()])
    state.commit(ctx.tx.txid)
    return written, len(partials) - written, size


__all__ = ["CommitContext", "Fired", "KVTarget", "apply_sums", "sink_position", "window_evaluator"]

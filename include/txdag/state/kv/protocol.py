"""The checkpoint protocol of a KeyValueState namespace as plain functions over a client (seed 002, in txdag's
split): a processing step stages one attempt's writes (:func:`stage_writes` from each Spark partition, then
:func:`seal_stage` on the driver); later, in txid order, the commit task runs :func:`prepare` then
:func:`commit` (or :func:`rollback`). Each step is one script, atomic and idempotent.

    stage (executors)   txdag:kv:{ns}:stage:<txid>:<attempt>  +  stages[<txid>:<attempt>] = open
    seal (driver)       stages[<txid>:<attempt>] = number of keys staged
    prepare             COPY the sealed stage to :prepared; meta.prepared_txid/attempt = txid/attempt
    commit              apply :prepared to the committed hash (deletes too); meta.committed_txid = txid;
                        drop :prepared and every staging of txid or older
    rollback            drop :prepared and meta.prepared_*

Each step's docstring gives the race its script closes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import redis

from txdag.attempt import TransactionAttempt, attempt_id, parse_attempt_id
from txdag.errors import ServiceUnavailable
from txdag.luascripts import run
from txdag.redisio import describe, how_to_start_redis, is_cluster, redis_errors, replicate
from txdag.state.kv import scripts
from txdag.state.kv.errors import KVStateError
from txdag.state.kv.layout import PUT_TAG, TOMBSTONE, KVNamespace

HSET_FIELDS = 1000  # fields per HSET command
PIPELINE_DEPTH = 10  # HSET commands per round trip


class StateHooks(Protocol):
    """Seed 002's IStatefulBolt hooks; each runs before its step, and an exception aborts the step untouched."""

    def pre_prepare(self, txid: int) -> None: ...

    def pre_commit(self, txid: int) -> None: ...

    def pre_rollback(self) -> None: ...


@dataclass(frozen=True)
class StepResult:
    namespace: str
    step: str  # prepare | commit | rollback
    outcome: str  # prepared, already prepared, committed, already committed, rolled back, nothing prepared, ...
    txid: int | None
    keys: int = 0  # keys prepared; puts for a commit
    deletes: int = 0


@dataclass(frozen=True)
class StagedAttempt:
    tx: TransactionAttempt
    sealed: int | None  # number of keys sealed; None while open
    keys: int


@dataclass(frozen=True)
class NamespaceStatus:
    """One consistent read of a namespace's record (one HMGET) plus counts around it."""

    namespace: str
    version: str | None
    key_serializer: str | None
    value_serializer: str | None
    committed_txid: int  # 0: nothing committed yet
    prepared_txid: int | None
    prepared_attempt: int | None
    committed_keys: int
    prepared_keys: int
    staged: list[StagedAttempt] = field(default_factory=list)
    migrating: str | None = None
    moved: int = 0


@contextlib.contextmanager
def kv_errors(client: redis.Redis, doing: str, spec: KVNamespace) -> Iterator[None]:
    """A server or cluster that is down as ServiceUnavailable (script refusals are txdag exceptions already)."""
    try:
        with redis_errors(client, f"{doing} of KeyValueState {spec.namespace!r}", keys=[spec.committed, spec.meta]):
            yield
    except ServiceUnavailable as exc:  # redis_errors' message, with the cluster's own hint for a cluster
        if getattr(client, "nodes_manager", None) is None:
            raise
        raise _down(client, doing, spec, exc.__cause__ or exc) from exc
    except redis.exceptions.ClusterDownError as exc:
        raise _down(client, doing, spec, exc) from exc
    except (redis.exceptions.ClusterError, redis.exceptions.RedisClusterException) as exc:
        raise _down(client, doing, spec, exc) from exc


def _down(client: redis.Redis, doing: str, spec: KVNamespace, exc: BaseException) -> ServiceUnavailable:
    hint = how_to_start_redis(is_cluster(client))
    return ServiceUnavailable(f"Redis at {describe(client)} cannot serve {doing} of KeyValueState "
                              f"{spec.namespace!r} ({type(exc).__name__}: {exc}); {hint}")


def _text(value: Any) -> str | None:
    return None if value is None else value.decode() if isinstance(value, bytes) else str(value)


def open_namespace(client: redis.Redis, spec: KVNamespace) -> tuple[int, int | None]:
    """Create the namespace's record if absent, refuse other serializers; returns (committed, prepared) txids."""
    with kv_errors(client, "opening", spec):
        committed, prepared = run(client, scripts.OPEN, [spec.meta],
                                  [spec.namespace, spec.key_serializer, spec.value_serializer])
    return int(_text(committed) or 0), int(_text(prepared)) if _text(prepared) else None


def stage_writes(client: redis.Redis, spec: KVNamespace, tx: TransactionAttempt,
                 writes: Iterable[tuple[Any, Any]]) -> int:
    """Stage ``(key, value)`` writes (``value`` DELETE for a delete) of attempt ``tx``: HSET in pipelined chunks.

    Usable from a Spark partition with a plain client. A key written twice keeps its last write; returns the
    number of distinct keys, which the driver adds up and passes to :func:`seal_stage` (each key must be
    staged by one partition only: group by key first)."""
    encode_key = spec.keys_codec.encode
    return stage_encoded(client, spec, tx, {encode_key(k): spec.encode_write(v) for k, v in writes})


def stage_encoded(client: redis.Redis, spec: KVNamespace, tx: TransactionAttempt, fields: dict[bytes, bytes]) -> int:
    """stage_writes for writes already encoded (key bytes -> tagged write)."""
    items = list(fields.items())
    with kv_errors(client, f"staging {tx}", spec):
        pipe = client.pipeline(transaction=False)
        pipe.hsetnx(spec.stages, attempt_id(tx), "open")
        for n, start in enumerate(range(0, len(items), HSET_FIELDS), start=1):
            pipe.hset(spec.stage(tx), mapping=dict(items[start:start + HSET_FIELDS]))
            if n % PIPELINE_DEPTH == 0:
                pipe.execute()
        pipe.execute()
    return len(items)


def seal_stage(client: redis.Redis, spec: KVNamespace, tx: TransactionAttempt, keys: int) -> None:
    """Record that attempt ``tx`` is completely staged with ``keys`` distinct keys (prepare checks the count)."""
    if isinstance(keys, bool) or not isinstance(keys, int) or keys < 0:
        raise ValueError(f"seal_stage needs the number of staged keys (an int >= 0), got {keys!r}")
    with kv_errors(client, f"sealing {tx}", spec):
        client.hset(spec.stages, attempt_id(tx), str(keys))


def clear_stage(client: redis.Redis, spec: KVNamespace, tx: TransactionAttempt) -> None:
    """Forget what attempt ``tx`` staged (before staging it again from scratch)."""
    with kv_errors(client, f"clearing {tx}", spec):
        pipe = client.pipeline(transaction=False)
        pipe.delete(spec.stage(tx))
        pipe.hdel(spec.stages, attempt_id(tx))
        pipe.execute()


def prepare(client: redis.Redis, spec: KVNamespace, tx: TransactionAttempt, *,
            hooks: StateHooks | None = None) -> StepResult:
    """Copy attempt ``tx``'s sealed staging into the prepared area, recording txid and attempt (idempotent).

    The race the script closes (checks and copy in one step):
        commit task A   prepares txid 5 attempt 1, stalls
        retry A'        prepares txid 5 attempt 2, commits 5
        A wakes         prepares attempt 1 again -> finds 5 committed: no-op (before the commit: refused, stale)
    Checked in Python first, A could copy attempt 1 over attempt 2, or leave a prepared 5 behind a committed 5
    for recovery to apply a second time."""
    if hooks is not None:
        hooks.pre_prepare(tx.txid)
    with kv_errors(client, f"preparing {tx}", spec):
        outcome, n = run(client, scripts.PREPARE, [spec.meta, spec.prepared, spec.stage(tx), spec.stages],
                         [spec.namespace, spec.key_serializer, spec.value_serializer, tx.txid, tx.attempt,
                          attempt_id(tx)])
    outcome = _text(outcome)
    return StepResult(spec.namespace, "prepare", outcome, tx.txid if outcome != "already committed" else int(n),
                      int(n) if outcome != "already committed" else 0)


def commit(client: redis.Redis, spec: KVNamespace, txid: int, *, hooks: StateHooks | None = None) -> StepResult:
    """Apply prepared ``txid`` to the committed values and record it (a txid <= the committed one: no-op).

    The race the script closes (txid check, apply and record in one step):
        commit task A   applies half of txid 5's writes
        reader          sees half a transaction
        retry A'        applies 5 again after A recorded it, undoing a write txid 6 made meanwhile
    In one script no reader sees half of 5, and the second commit finds 5 committed and changes nothing. On a Redis
    Cluster it returns once a replica of the namespace's master has the commit (txdag.redisio.replicate)."""
    if hooks is not None:
        hooks.pre_commit(txid)
    with kv_errors(client, f"committing txid {txid}", spec):
        reply = run(client, scripts.COMMIT, [spec.meta, spec.committed, spec.prepared, spec.stages, spec.undo],
                    [spec.namespace, spec.key_serializer, spec.value_serializer, txid, spec.stage_prefix])
        replicate(client, [spec.committed], f"the commit of txid {txid} of KeyValueState {spec.namespace!r}")
    if _text(reply[0]) == "already committed":
        return StepResult(spec.namespace, "commit", "already committed", int(reply[1]))
    return StepResult(spec.namespace, "commit", "committed", txid, int(reply[1]), int(reply[2]))


def rollback(client: redis.Redis, spec: KVNamespace, txid: int | None = None, *,
             hooks: StateHooks | None = None) -> StepResult:
    """Discard the prepared, uncommitted txid (only ``txid`` if given; another one is left alone).

    The race the script closes (read and drop in one step, naming the txid):
        recovery        reads "5 prepared, not everywhere", decides to roll back 5
        commit task     prepares 5 everywhere, commits 5, prepares 6
        recovery        drops the prepared area -> would discard 6; naming txid 5, it leaves 6 alone"""
    if hooks is not None:
        hooks.pre_rollback()
    with kv_errors(client, "rolling back", spec):
        outcome, held = run(client, scripts.ROLLBACK, [spec.meta, spec.prepared],
                            [spec.namespace, "" if txid is None else txid])
    return StepResult(spec.namespace, "rollback", _text(outcome), int(held) or None)


def status(client: redis.Redis, spec: KVNamespace) -> NamespaceStatus:
    """The namespace's record, its committed/prepared sizes and its staged attempts (three round trips)."""
    names = ["v", "key_serializer", "value_serializer", "committed_txid", "prepared_txid", "prepared_attempt",
             "migrating", "moved"]
    with kv_errors(client, "reading the status", spec):
        pipe = client.pipeline(transaction=False)
        pipe.hmget(spec.meta, names)
        pipe.hlen(spec.committed)
        pipe.hlen(spec.prepared)
        pipe.hgetall(spec.stages)
        meta, committed_keys, prepared_keys, stages = pipe.execute()
        ids = sorted((parse_attempt_id(_text(k)), _text(v)) for k, v in stages.items())
        pipe = client.pipeline(transaction=False)
        for tx, _ in ids:
            pipe.hlen(spec.stage(tx))
        sizes = pipe.execute() if ids else []
    m = dict(zip(names, (_text(x) for x in meta)))
    staged = [StagedAttempt(tx, None if seal == "open" else int(seal), int(n)) for (tx, seal), n in zip(ids, sizes)]
    return NamespaceStatus(
        spec.namespace, m["v"], m["key_serializer"], m["value_serializer"], int(m["committed_txid"] or 0),
        int(m["prepared_txid"]) if m["prepared_txid"] else None,
        int(m["prepared_attempt"]) if m["prepared_attempt"] else None, int(committed_keys), int(prepared_keys),
        staged, m["migrating"], int(m["moved"] or 0))


def read_as_of(client: redis.Redis, spec: KVNamespace, keys: Sequence[Any], txid: int) -> dict[Any, Any]:
    """The committed values of ``keys`` (absent ones left out) as the processing of ``txid`` must see them: as of
    txid - 1, in one round trip. When txid itself is committed already (its commit stopped after the state's, and
    it is processed again), the values it overwrote are read back from the undo record."""
    fields = [spec.keys_codec.encode(key) for key in keys]
    with kv_errors(client, f"reading as of txid {txid - 1}", spec):
        pipe = client.pipeline(transaction=False)
        pipe.hmget(spec.meta, ["committed_txid", "undo_txid"])
        if fields:
            pipe.hmget(spec.committed, fields)
            pipe.hmget(spec.undo, fields)
        replies = pipe.execute()
    committed, undo_txid = (int(_text(x) or 0) for x in replies[0])
    fresh = replies[0][0] is None  # never committed: a state added to a running topology starts empty
    if committed < txid - 1 and not fresh:
        raise KVStateError(f"KeyValueState {spec.namespace!r}: txid {txid} is processed before txid {txid - 1} was "
                           f"committed (the state holds txid {committed}); its processing must wait for it")
    if committed > txid or (committed == txid and undo_txid != txid):
        raise KVStateError(f"KeyValueState {spec.namespace!r} holds txid {committed} already, so txid {txid} cannot "
                           f"be read as of txid {txid - 1}; replay from txid {committed + 1} instead")
    if not fields:
        return {}
    values, undone = replies[1], replies[2] if committed == txid else [None] * len(fields)
    result = {}
    for key, value, before in zip(keys, values, undone):
        if before is not None:
            value = None if before == TOMBSTONE else before[len(PUT_TAG):]
        if value is not None:
            result[key] = spec.values_codec.decode(value)
    return result

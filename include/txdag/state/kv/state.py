"""KeyValueState: seed 002's key-value state of one namespace, with Storm's State methods in Python style.

Reads see this object's own writes first (pending, or prepared by it and not yet committed), then the values
committed in Redis, i.e. the state as of the last committed txid; never another txid's uncommitted writes.
``prepare_commit(txid)`` stages the pending writes as attempt ``(txid, attempt)`` and prepares them;
``commit(txid)`` applies them; ``rollback()`` discards what is prepared and pending. Each calls its hook
(``pre_prepare``/``pre_commit``/``pre_rollback``) first: a hook that raises leaves everything as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import redis

from txdag.attempt import TransactionAttempt
from txdag.state.kv.errors import KVStateError
from txdag.state.kv.layout import DELETE, TOMBSTONE, KVNamespace
from txdag.state.kv.protocol import (
    StateHooks,
    StepResult,
    clear_stage,
    commit,
    kv_errors,
    open_namespace,
    prepare,
    rollback,
    seal_stage,
    stage_encoded,
)
from txdag.state.kv.serializers import DEFAULT_SERIALIZER

SCAN_COUNT = 1000
_MISSING = object()


class KeyValueState:
    """``KeyValueState(client, "tweets:counter")``; ``client`` is a redis.Redis or a redis.cluster.RedisCluster."""

    def __init__(self, client: redis.Redis, namespace: str | KVNamespace, *,
                 key_serializer: str = DEFAULT_SERIALIZER, value_serializer: str = DEFAULT_SERIALIZER,
                 hooks: StateHooks | None = None) -> None:
        self.spec = (namespace if isinstance(namespace, KVNamespace)
                     else KVNamespace(namespace, key_serializer, value_serializer))
        self.client = client
        self.hooks = hooks
        self._pending: dict[bytes, bytes] = {}  # key bytes -> tagged write
        self._prepared: dict[bytes, bytes] = {}
        self.prepared_txid: int | None = None
        self.committed_txid, _ = open_namespace(client, self.spec)

    @property
    def namespace(self) -> str:
        return self.spec.namespace

    def __repr__(self) -> str:
        return f"KeyValueState({self.namespace!r}, committed_txid={self.committed_txid})"

    # --- reads and writes ----------------------------------------------------------------------------------

    def get(self, key: Any, default: Any = None) -> Any:
        field = self.spec.keys_codec.encode(key)
        write = self._pending.get(field, self._prepared.get(field))
        if write is not None:
            value = self.spec.decode_write(write)
            return default if value is DELETE else value
        with kv_errors(self.client, "reading", self.spec):
            raw = self.client.hget(self.spec.committed, field)
        return default if raw is None else self.spec.values_codec.decode(raw)

    def put(self, key: Any, value: Any) -> None:
        if value is DELETE:
            raise ValueError("put(key, DELETE): use delete(key)")
        self._pending[self.spec.keys_codec.encode(key)] = self.spec.encode_write(value)

    def delete(self, key: Any) -> None:
        self._pending[self.spec.keys_codec.encode(key)] = TOMBSTONE

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Committed items (HSCAN, never one reply for the whole hash) overlaid with this object's writes."""
        overlay = {**self._prepared, **self._pending}
        keys, values = self.spec.keys_codec, self.spec.values_codec
        with kv_errors(self.client, "iterating", self.spec):
            for field, raw in self.client.hscan_iter(self.spec.committed, count=SCAN_COUNT):
                if field not in overlay:
                    yield keys.decode(field), values.decode(raw)
        for field, write in overlay.items():
            if write != TOMBSTONE:
                yield keys.decode(field), self.spec.decode_write(write)

    def __iter__(self) -> Iterator[Any]:
        return (key for key, _ in self.items())

    def __contains__(self, key: Any) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    # --- State: prepare_commit / commit / rollback ---------------------------------------------------------

    def prepare_commit(self, txid: int, *, attempt: int = 1) -> StepResult:
        """Stage the pending writes as ``(txid, attempt)`` and prepare them (a txid already committed: dropped)."""
        if self.hooks is not None:
            self.hooks.pre_prepare(txid)
        tx = TransactionAttempt(txid, attempt)
        if self.prepared_txid == txid:
            if self._pending:
                raise KVStateError(f"KeyValueState {self.namespace!r}: txid {txid} is already prepared; commit it "
                                   f"before writing for the next txid")
            return prepare(self.client, self.spec, tx)  # a re-run: the script finds it prepared
        clear_stage(self.client, self.spec, tx)
        seal_stage(self.client, self.spec, tx, stage_encoded(self.client, self.spec, tx, dict(self._pending)))
        result = prepare(self.client, self.spec, tx)
        if result.outcome == "already committed":
            clear_stage(self.client, self.spec, tx)
            self._pending.clear()
            return result
        self._prepared = dict(self._pending)
        self._pending.clear()
        self.prepared_txid = txid
        return result

    def commit(self, txid: int) -> StepResult:
        """Apply the prepared writes of ``txid``; a txid <= the committed one changes nothing."""
        if self.hooks is not None:
            self.hooks.pre_commit(txid)
        result = commit(self.client, self.spec, txid)
        if self.prepared_txid is not None and self.prepared_txid <= txid:
            self._prepared.clear()
            self.prepared_txid = None
        self.committed_txid = max(self.committed_txid, result.txid or 0)
        return result

    def rollback(self) -> StepResult:
        """Discard the prepared (not committed) txid and every pending write."""
        if self.hooks is not None:
            self.hooks.pre_rollback()
        result = rollback(self.client, self.spec)
        self._pending.clear()
        self._prepared.clear()
        self.prepared_txid = None
        return result

"""RedisBackingMap: a map state's values in Redis hashes, read and written in bulk (one round trip per batch).

Key layout of a namespace ``ns`` (``{ns}`` is a Redis Cluster hash tag, so one script can touch all four):

    ns            hash  field -> JSON of the current value       (readable as is: HGET words hello -> 3)
    {ns}:txid     hash  field -> txid of the batch in the value  (transactional and opaque states)
    {ns}:prev     hash  field -> JSON of the value before the txid in {ns}:txid (absent means None): an opaque
                  state's prev; kept for transactional states too, for reads as of the committed txid
                  (txdag.state.committed)
    {ns}:meta     hash  v -> 1, kind -> non_transactional | transactional | opaque

A field is the key tuple through a KeyCodec. Integers are stored as decimal text, so the server-side commit
(``txdag.state.redis_commit``) can HINCRBY them exactly. The kind in ``{ns}:meta`` is checked by every
write, so two topologies writing different kinds of state into one namespace fail loudly.
``keys``/``acl_patterns``: the shape of txdag.keyspace (the owner is the namespace).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import redis

from txdag.errors import ConfigError, FormatVersionError
from txdag.keyspace import glob_escape
from txdag.luascripts import run
from txdag.redisio import redis_errors
from txdag.state.base import Key, StateKind, check_keys
from txdag.state.keys import DEFAULT_KEY_CODEC, KeyCodec
from txdag.state.lua import PUT
from txdag.state.values import OpaqueValue, TransactionalValue

FORMAT_VERSION = "1"
NONE = ""  # stands for "no value" in script arguments; JSON never encodes to the empty string


def aux_key(namespace: str, suffix: str) -> str:
    """``{ns}:suffix``, in the same Redis Cluster slot as ``ns`` (unless ns carries its own hash tag)."""
    return f"{namespace}:{suffix}" if "{" in namespace else f"{{{namespace}}}:{suffix}"


def state_keys(namespace: str) -> list[str]:
    """The four keys of a namespace, in the order the scripts expect them."""
    return [namespace, aux_key(namespace, "txid"), aux_key(namespace, "prev"), aux_key(namespace, "meta")]


keys = state_keys


def acl_patterns(namespace: str) -> list[str]:
    return [glob_escape(k) for k in state_keys(namespace)]


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class RedisBackingMap:
    """Stores TransactionalValue / OpaqueValue / plain values of one namespace."""

    def __init__(
        self, client: redis.Redis, namespace: str, *, key_codec: KeyCodec = DEFAULT_KEY_CODEC, chunk_size: int = 5000
    ) -> None:
        if not isinstance(namespace, str) or not namespace or any(c.isspace() for c in namespace):
            raise ConfigError(f"RedisBackingMap needs a non-empty namespace without spaces, got {namespace!r}")
        self.client = client
        self.namespace = namespace
        self.key_codec = key_codec
        self.chunk_size = chunk_size
        self.keys = state_keys(namespace)

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        check_keys(keys)
        if not keys:
            return []
        fields = [self.key_codec.encode(key) for key in keys]
        with redis_errors(self.client, f"reading state {self.namespace!r}", keys=self.keys):
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(self.keys[3], "v", "kind")
            for start in range(0, len(fields), self.chunk_size):
                chunk = fields[start : start + self.chunk_size]
                for hash_key in self.keys[:3]:
                    pipe.hmget(hash_key, chunk)
            replies = pipe.execute()
        kind = self.kind_of(replies[0])
        values, txids, prevs = ([] for _ in range(3))
        for i in range(1, len(replies), 3):
            values += replies[i]
            txids += replies[i + 1]
            prevs += replies[i + 2]
        return [self.decode(kind, f, v, t, p) for f, v, t, p in zip(fields, values, txids, prevs)]

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        check_keys(keys)
        if len(keys) != len(values):
            raise ValueError(f"multi_put got {len(keys)} keys and {len(values)} values")
        if not keys:
            return
        kind = _kind_of(values)
        args = []
        for key, value in zip(keys, values):
            args += self._put_args(key, value)
        with redis_errors(self.client, f"writing state {self.namespace!r}", keys=self.keys):
            for start in range(0, len(args), 4 * self.chunk_size):
                run(self.client, PUT, self.keys, [kind.value, *args[start : start + 4 * self.chunk_size]])

    def _put_args(self, key: Key, value: Any) -> list[str]:
        field = self.key_codec.encode(key)
        if isinstance(value, TransactionalValue):
            return [field, dumps(value.value), str(value.txid), NONE]
        if isinstance(value, OpaqueValue):
            return [field, dumps(value.curr), str(value.txid), NONE if value.prev is None else dumps(value.prev)]
        return [field, dumps(value), NONE, NONE]

    def kind_of(self, meta: list[bytes | None]) -> StateKind:
        version, kind = meta
        if version is None:
            return StateKind.NON_TRANSACTIONAL  # nothing written by txdag yet: plain values, if any
        if version.decode() != FORMAT_VERSION:
            raise FormatVersionError(
                f"state {self.namespace!r} has format version {version.decode()!r} in {self.keys[3]}; this "
                f"txdag reads version {FORMAT_VERSION}: upgrade txdag or migrate the namespace"
            )
        return StateKind((kind or b"").decode())

    def decode(self, kind: StateKind, field: str, value: Any, txid: Any, prev: Any) -> Any:
        if value is None:
            return None
        curr = self.loads(field, value)
        if kind is StateKind.NON_TRANSACTIONAL:
            return curr
        if txid is None:
            raise FormatVersionError(
                f"state {self.namespace!r} field {field!r} has a value but no txid in {self.keys[1]}"
            )
        if kind is StateKind.TRANSACTIONAL:
            return TransactionalValue(int(txid), curr)
        return OpaqueValue(int(txid), curr, None if prev is None else self.loads(field, prev))

    def loads(self, field: str, raw: bytes) -> Any:
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise FormatVersionError(
                f"state {self.namespace!r} field {field!r} holds {raw[:40]!r}, which is not JSON: was the hash "
                f"written by something other than txdag? Use another namespace or fix the value"
            ) from exc


def _kind_of(values: Sequence[Any]) -> StateKind:
    kinds = {
        StateKind.TRANSACTIONAL
        if isinstance(v, TransactionalValue)
        else StateKind.OPAQUE
        if isinstance(v, OpaqueValue)
        else StateKind.NON_TRANSACTIONAL
        for v in values
    }
    if len(kinds) != 1:
        raise ValueError(f"multi_put mixes value kinds {sorted(k.value for k in kinds)} in one namespace")
    return kinds.pop()

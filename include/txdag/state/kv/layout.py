"""Where a KeyValueState lives in Redis, and how a staged write (a put or a delete) is stored.

A namespace ``ns`` (default ``<topology>:<step>``, see :func:`kv_namespace`) owns these keys; ``{ns}`` is a Redis
Cluster hash tag, so every key of a namespace is in one slot and one Lua script may touch them all:

    txdag:kv:{ns}                          hash  key bytes -> value bytes     the committed values
    txdag:kv:{ns}:meta                     hash  v, key_serializer, value_serializer, committed_txid,
                                                 prepared_txid, prepared_attempt (and migrating, moved while a
                                                 migration runs)
    txdag:kv:{ns}:prepared                 hash  key bytes -> tagged write    the prepared txid's writes
    txdag:kv:{ns}:undo                     hash  key bytes -> tagged write    what the last committed txid
                                                 overwrote (``undo_txid`` in meta): the state as of the txid before
    txdag:kv:{ns}:stage:<txid>:<attempt>   hash  key bytes -> tagged write    one attempt's staged writes
    txdag:kv:{ns}:stages                   hash  "<txid>:<attempt>" -> "open" or the sealed number of keys
    txdag:kv:{ns}:migrating, <stage key>:migrating   the converted half of a hash during ``txdag state migrate``

The two staging keys are this state's own (kv_stage_key, kv_stages_key); a topology's staging is txdag.staging.layout.
``keys``/``acl_patterns``: the shape of txdag.keyspace; a topology's user is granted its steps' default namespaces.

A tagged write is ``b"="`` + the encoded value for a put and ``b"-"`` alone for a delete: every put is at least
one byte longer than the tombstone and starts with another byte, so no value can pass for a delete.
"""

from __future__ import annotations

from dataclasses import dataclass

from txdag.attempt import TransactionAttempt, attempt_id
from txdag.errors import ConfigError
from txdag.keyspace import glob_escape
from txdag.state.kv.serializers import DEFAULT_SERIALIZER, Serializer, get_serializer

FORMAT_VERSION = "1"
PUT_TAG = b"="
TOMBSTONE = b"-"
KEY_PREFIX = "txdag:kv:"


def kv_stage_prefix(base: str) -> str:
    """What a KeyValueState's attempt stage keys start with (its commit script deletes ``prefix .. attempt id``)."""
    return f"{base}:stage:"


def kv_stage_key(base: str, tx: TransactionAttempt) -> str:
    return kv_stage_prefix(base) + attempt_id(tx)


def kv_stages_key(base: str) -> str:
    return f"{base}:stages"


class _Delete:
    """The write that deletes a key (``stage_writes`` takes ``(key, DELETE)``)."""

    def __repr__(self) -> str:
        return "DELETE"


DELETE = _Delete()


def check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not namespace or any(c.isspace() or c in "{}" for c in namespace):
        raise ConfigError(f"a KeyValueState namespace must be a non-empty string without spaces or braces, got "
                          f"{namespace!r}")
    return namespace


def kv_namespace(topology: str, step: str) -> str:
    """The default namespace of a step's state: ``<topology>:<step>`` (:func:`acl_patterns` grants a topology's
    user these, so a namespace outside them needs its own grant)."""
    return check_namespace(f"{check_namespace(topology)}:{check_namespace(step)}")


def migrating_key(key: str) -> str:
    """The converted half of hash ``key`` while ``txdag state migrate`` runs."""
    return f"{key}:migrating"


def keys(namespace: str, tx: TransactionAttempt) -> list[str]:
    """Every key of a namespace, with attempt ``tx``'s staging."""
    ns = KVNamespace(namespace)
    hashes = [ns.committed, ns.meta, ns.prepared, ns.undo, ns.stages, ns.stage(tx)]
    return [*hashes, migrating_key(ns.committed), migrating_key(ns.stage(tx))]


def acl_patterns(topology: str) -> list[str]:
    """The keys of every namespace :func:`kv_namespace` gives the topology's steps: ``<prefix>{<topology>:*``."""
    return [glob_escape(f"{KEY_PREFIX}{{{check_namespace(topology)}:") + "*"]


@dataclass(frozen=True)
class KVNamespace:
    """A namespace and the serializers (by name) that write it: small and picklable, so a Spark executor can
    get it in a closure and stage writes with a plain client."""

    namespace: str
    key_serializer: str = DEFAULT_SERIALIZER
    value_serializer: str = DEFAULT_SERIALIZER

    def __post_init__(self) -> None:
        check_namespace(self.namespace)
        get_serializer(self.key_serializer, for_keys=True)
        get_serializer(self.value_serializer)

    @property
    def keys_codec(self) -> Serializer:
        return get_serializer(self.key_serializer, for_keys=True)

    @property
    def values_codec(self) -> Serializer:
        return get_serializer(self.value_serializer)

    @property
    def base(self) -> str:
        return f"{KEY_PREFIX}{{{self.namespace}}}"

    @property
    def committed(self) -> str:
        return self.base

    @property
    def meta(self) -> str:
        return f"{self.base}:meta"

    @property
    def prepared(self) -> str:
        return f"{self.base}:prepared"

    @property
    def undo(self) -> str:
        return f"{self.base}:undo"

    @property
    def stages(self) -> str:
        return kv_stages_key(self.base)

    @property
    def stage_prefix(self) -> str:
        return kv_stage_prefix(self.base)

    def stage(self, tx: TransactionAttempt) -> str:
        return kv_stage_key(self.base, tx)

    def encode_write(self, value: object) -> bytes:
        """The tagged form of a put of ``value`` (or of a delete, for DELETE)."""
        return TOMBSTONE if value is DELETE else PUT_TAG + self.values_codec.encode(value)

    def decode_write(self, tagged: bytes) -> object:
        """A tagged write back to a value, or DELETE."""
        if tagged == TOMBSTONE:
            return DELETE
        if not tagged.startswith(PUT_TAG):
            raise ConfigError(f"namespace {self.namespace!r}: staged write {tagged[:40]!r} has no put/delete tag")
        return self.values_codec.decode(tagged[1:])

"""The shapes every map state shares: keys, updaters, the backing-map protocol (Trident's IBackingMap)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

Key = tuple[Any, ...]
"""A key is a tuple of grouping-field values, e.g. ``("hello",)`` or ``("@bob", "#storm")``."""

ValueUpdater = Callable[[Any], Any]
"""Trident's ValueUpdater: old value (None when absent) -> new value."""


class StateKind(str, enum.Enum):
    """What a map state stores per key, and so which spouts it makes exactly-once (seed 004's table)."""

    NON_TRANSACTIONAL = "non_transactional"
    TRANSACTIONAL = "transactional"
    OPAQUE = "opaque"


@runtime_checkable
class BackingMap(Protocol):
    """Bulk get/put of stored objects; it knows nothing of txids (the map states do)."""

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        ...

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        ...


class StateFactory:
    """Trident's StateFactory: where a topology's state lives when it is not a Redis hash. A subclass is a dataclass
    whose fields are JSON values (a path, a table, an Airflow connection id): the topology's definition carries it,
    its fingerprint names it, and the commit task (or LocalTopology) calls ``backing_map`` to get the state's
    BackingMap, whose multi_get/multi_put store what the map state gives them (plain values, TransactionalValue,
    OpaqueValue). ``topology`` and ``state`` name the state, so that two topologies (or two states) never share a
    table by default. A backing map that also defines ``begin_commit(txid)`` and ``commit(txid)`` gets them around
    each txid's writes to the state, so that a store with transactions applies the txid whole (docs/stores.md)."""

    def backing_map(self, topology: str, state: str, key_fields: int) -> BackingMap:
        raise NotImplementedError

    def __repr__(self) -> str:
        return type(self).__name__


def check_keys(keys: Sequence[Key]) -> None:
    """Keys must be tuples: a bare string would silently become a tuple of characters elsewhere."""
    for key in keys:
        if not isinstance(key, tuple):
            raise TypeError(f"map state keys are tuples of grouping-field values, got {key!r}; use ({key!r},)")


def combine_sum(delta: Any) -> ValueUpdater:
    """The updater of a Count/Sum combiner aggregate: adds ``delta`` to the old value (None counts as 0)."""
    return lambda old: delta if old is None else old + delta

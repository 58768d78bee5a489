"""The shapes every map state shares: keys, updaters, the backing-map protocol (Trident's IBackingMap)."""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable, Iterable, Iterator, Sequence
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

    def conn_ids(self) -> dict[str, str]:
        """The Airflow connections the store uses, with their type: the coordinate task checks that they exist
        before it allocates a txid (as for the topology's Redis and ZooKeeper)."""
        return {}

    def __repr__(self) -> str:
        return type(self).__name__


def begin_shared(backings: Iterable[Any], txid: int, *, resumed: bool = True) -> list[Any]:
    """One transaction per txid for the states of one database: each distinct ``shared_transaction`` of the
    backing maps (an object with ``begin(txid, whole=True, resumed=...)``, ``commit(txid)`` and ``rollback()``;
    txdag.state.postgres) begun before any of the txid's writes, once however many states it holds. ``resumed``:
    this commit of the txid had begun before (a store that holds the txid already is then not a store that went
    backwards). When one fails to begin, it and those begun are rolled back."""
    shared = list({id(t): t for t in (getattr(b, "shared_transaction", None) for b in backings) if t}.values())
    for i, transaction in enumerate(shared):
        try:
            transaction.begin(txid, whole=True, resumed=resumed)
        except BaseException:
            for begun in shared[:i + 1]:
                begun.rollback()
            raise
    return shared


@contextlib.contextmanager
def committing(shared: list[Any], txid: int) -> Iterator[None]:
    """The txid's writes inside the shared transactions ``begin_shared`` began: committed after all of them, rolled
    back when they fail (and every one not committed yet, when a commit fails)."""
    try:
        yield
    except BaseException:
        for transaction in shared:
            transaction.rollback()
        raise
    for i, transaction in enumerate(shared):
        try:
            transaction.commit(txid)
        except BaseException:
            for rest in shared[i:]:
                rest.rollback()
            raise


@contextlib.contextmanager
def shared_transactions(backings: Iterable[Any], txid: int, *, resumed: bool = True) -> Iterator[None]:
    """begin_shared, then the block inside committing: the txid's writes of a database's states as one."""
    with committing(begin_shared(backings, txid, resumed=resumed), txid):
        yield


def check_keys(keys: Sequence[Key]) -> None:
    """Keys must be tuples: a bare string would silently become a tuple of characters elsewhere."""
    for key in keys:
        if not isinstance(key, tuple):
            raise TypeError(f"map state keys are tuples of grouping-field values, got {key!r}; use ({key!r},)")


def combine_sum(delta: Any) -> ValueUpdater:
    """The updater of a Count/Sum combiner aggregate: adds ``delta`` to the old value (None counts as 0)."""
    return lambda old: delta if old is None else old + delta

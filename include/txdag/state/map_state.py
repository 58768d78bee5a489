"""What the three map states share: the txid of the batch being committed and the batch-reads cache.

The cache is Trident's CachedBatchReadsMap: a key written earlier in the *same* batch must be read back as
already including this batch. Without it, a transactional map would skip a second update of a key in one
batch (its stored txid already equals the batch's txid).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from txdag.errors import ConfigError, TxidOrderError
from txdag.state.base import BackingMap, Key, StateKind, ValueUpdater, check_keys
from txdag.state.keys import DefaultKeyCodec, KeyCodec
from txdag.state.values import OpaqueValue, TransactionalValue


class MapStateBase:
    """begin_commit/commit bookkeeping; subclasses implement the kind's txid rules."""

    kind: StateKind
    stored_type: type | None = None  # what the backing map must hold for this kind (None: plain values)

    def __init__(self, backing: BackingMap, key_codec: KeyCodec | None = None) -> None:
        if not isinstance(backing, BackingMap):
            raise TypeError(f"{type(self).__name__} needs a backing map with multi_get/multi_put, got {backing!r}")
        self.backing = backing
        # how a key is written as one staged field (the staging is Redis hashes whatever the store): the backing
        # map's own codec (RedisBackingMap's), else the state definition's, else JSON arrays
        self.key_codec: KeyCodec = key_codec or getattr(backing, "key_codec", None) or DefaultKeyCodec()
        self.current_txid: int | None = None
        self.last_committed: int | None = None
        self._written: dict[Key, Any] = {}

    def begin_commit(self, txid: int) -> None:
        """Start applying batch ``txid``. Replaying the last txid is allowed; an older one is refused."""
        if self.last_committed is not None and txid < self.last_committed:
            raise TxidOrderError(txid, self.last_committed, where=f"{type(self).__name__}.begin_commit")
        self.current_txid = txid
        self._written.clear()
        if hasattr(self.backing, "begin_commit"):  # a store with transactions: one per txid (StateFactory)
            self.backing.begin_commit(txid)

    def commit(self, txid: int) -> None:
        if self.current_txid != txid:
            raise ValueError(f"commit({txid}) without begin_commit({txid}); the open batch is {self.current_txid}")
        if hasattr(self.backing, "commit"):
            self.backing.commit(txid)
        self.last_committed = txid
        self.current_txid = None
        self._written.clear()

    def _txid_or_fail(self, what: str) -> int:
        if self.current_txid is None:
            raise ValueError(f"{type(self).__name__}.{what} needs an open batch: call begin_commit(txid) first")
        return self.current_txid

    def _read(self, keys: Sequence[Key]) -> list[tuple[Any, bool]]:
        """(stored object, written earlier in this batch) per key; one backing call for the uncached keys."""
        check_keys(keys)
        missing = [key for key in keys if key not in self._written]
        fetched = dict(zip(missing, self.backing.multi_get(missing))) if missing else {}
        for key, stored in fetched.items():
            self._check_stored(key, stored)
        return [(self._written[key], True) if key in self._written else (fetched[key], False) for key in keys]

    def _check_stored(self, key: Key, stored: Any) -> None:
        plain = not isinstance(stored, (TransactionalValue, OpaqueValue))
        expected = self.stored_type
        if stored is not None and (type(stored) is not expected if expected else not plain):
            found = "plain values" if plain else type(stored).__name__
            raise ConfigError(
                f"{type(self).__name__} found {found} at key {key!r}: the backing map holds another kind of state; "
                f"give each state its own namespace"
            )

    def _write(self, keys: Sequence[Key], stored: Sequence[Any]) -> None:
        if keys:
            self.backing.multi_put(keys, stored)
            self._written.update(zip(keys, stored))

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        """Replace the values of ``keys`` (an update whose updater ignores the old value)."""
        if len(keys) != len(values):
            raise ValueError(f"multi_put got {len(keys)} keys and {len(values)} values")
        self.multi_update(keys, [_replace(value) for value in values])

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        raise NotImplementedError

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[ValueUpdater]) -> list[Any]:
        raise NotImplementedError


def _replace(value: Any) -> ValueUpdater:
    return lambda _old: value

"""TransactionalMap: exactly-once with a transactional spout (a txid's batch never changes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from txdag.errors import TxidOrderError
from txdag.state.base import Key, StateKind, ValueUpdater
from txdag.state.map_state import MapStateBase
from txdag.state.values import TransactionalValue


class TransactionalMap(MapStateBase):
    """Stores TransactionalValue(txid, value); a key already holding this txid is skipped on a replay."""

    stored_type = TransactionalValue
    kind = StateKind.TRANSACTIONAL

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        return [None if stored is None else stored.value for stored, _ in self._read(keys)]

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[ValueUpdater]) -> list[Any]:
        txid = self._txid_or_fail("multi_update")
        if len(keys) != len(updaters):
            raise ValueError(f"multi_update got {len(keys)} keys and {len(updaters)} updaters")
        results, changed_keys, changed = [], [], []
        for key, (stored, cached), updater in zip(keys, self._read(keys), updaters):
            if stored is not None and stored.txid > txid:
                raise TxidOrderError(txid, stored.txid, where=f"key {key!r}")
            if stored is not None and stored.txid == txid and not cached:
                results.append(stored.value)  # this batch is already in the stored value
                continue
            new = TransactionalValue(txid, updater(None if stored is None else stored.value))
            results.append(new.value)
            changed_keys.append(key)
            changed.append(new)
        self._write(changed_keys, changed)
        return results

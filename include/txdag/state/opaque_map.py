"""OpaqueMap: exactly-once with an opaque spout (a replayed txid may carry a different batch)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from txdag.state.base import Key, StateKind, ValueUpdater
from txdag.state.map_state import MapStateBase
from txdag.state.values import OpaqueValue


class OpaqueMap(MapStateBase):
    """Stores OpaqueValue(txid, curr, prev); a replay of txid recomputes from prev."""

    stored_type = OpaqueValue
    kind = StateKind.OPAQUE

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        return [self._visible(stored, cached) for stored, cached in self._read(keys)]

    def _visible(self, stored: OpaqueValue | None, cached: bool) -> Any:
        if stored is None:
            return None
        return stored.curr if cached else stored.get(self.current_txid)

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[ValueUpdater]) -> list[Any]:
        txid = self._txid_or_fail("multi_update")
        if len(keys) != len(updaters):
            raise ValueError(f"multi_update got {len(keys)} keys and {len(updaters)} updaters")
        results, new_values = [], []
        for (stored, cached), updater in zip(self._read(keys), updaters):
            value = updater(self._visible(stored, cached))
            results.append(value)
            # a key written earlier in this batch holds txid already, so update() keeps its prev
            new_values.append(OpaqueValue(txid, value) if stored is None else stored.update(txid, value))
        self._write(list(keys), new_values)
        return results

"""NonTransactionalMap: stores plain values; a replay is applied again (at-least-once, never exactly-once)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from txdag.state.base import Key, StateKind, ValueUpdater
from txdag.state.map_state import MapStateBase


class NonTransactionalMap(MapStateBase):
    """The cheapest state: no txid stored, so it cannot tell a replay from a new batch (seed 004)."""

    kind = StateKind.NON_TRANSACTIONAL

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        return [stored for stored, _ in self._read(keys)]

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[ValueUpdater]) -> list[Any]:
        if len(keys) != len(updaters):
            raise ValueError(f"multi_update got {len(keys)} keys and {len(updaters)} updaters")
        results = [updater(stored) for (stored, _), updater in zip(self._read(keys), updaters)]
        self._write(list(keys), results)
        return results

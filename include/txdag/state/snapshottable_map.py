"""SnapshottableMap: a global (ungrouped) aggregate kept under one fixed key of a map state."""

from __future__ import annotations

from typing import Any

from txdag.state.base import Key, ValueUpdater
from txdag.state.map_state import MapStateBase

GLOBAL_KEY: Key = ("$GLOBAL$",)


class SnapshottableMap:
    """Trident's Snapshottable over a MapState: get/update/set one value with the map's txid rules."""

    def __init__(self, delegate: MapStateBase, key: Key = GLOBAL_KEY) -> None:
        if not isinstance(key, tuple):
            raise TypeError(f"SnapshottableMap key must be a tuple, got {key!r}")
        self.delegate = delegate
        self.key = key

    @property
    def kind(self) -> Any:
        return self.delegate.kind

    def begin_commit(self, txid: int) -> None:
        self.delegate.begin_commit(txid)

    def commit(self, txid: int) -> None:
        self.delegate.commit(txid)

    def get(self) -> Any:
        return self.delegate.multi_get([self.key])[0]

    def update(self, updater: ValueUpdater) -> Any:
        return self.delegate.multi_update([self.key], [updater])[0]

    def set(self, value: Any) -> None:
        self.delegate.multi_put([self.key], [value])

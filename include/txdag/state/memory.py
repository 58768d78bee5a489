"""MemoryBackingMap: Trident's MemoryMapState backing, for development and unit tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from txdag.state.base import Key, check_keys


class MemoryBackingMap:
    """A dict in this process. Nothing survives the process: use RedisBackingMap for real topologies."""

    def __init__(self) -> None:
        self.data: dict[Key, Any] = {}

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        check_keys(keys)
        return [self.data.get(key) for key in keys]

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        check_keys(keys)
        if len(keys) != len(values):
            raise ValueError(f"multi_put got {len(keys)} keys and {len(values)} values")
        self.data.update(zip(keys, values))

"""CachedMap: an LRU cache in front of a backing map (Trident's CachedMap), write-through."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from txdag.state.base import BackingMap, Key, check_keys


class CachedMap:
    """Serves repeated reads of hot keys from memory. Only safe when this process is the state's only writer
    (one committer per topology, as the 1-slot commit pool ensures)."""

    def __init__(self, backing: BackingMap, cache_size: int = 1000) -> None:
        if cache_size < 1:
            raise ValueError(f"CachedMap cache_size must be >= 1, got {cache_size}")
        self.backing = backing
        self.cache_size = cache_size
        self._cache: OrderedDict[Key, Any] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self._open = False  # a txid begun and not committed: what the cache holds of it may have been rolled back
        self._ended: int | None = None  # the store's count of transactions ended unfinished, at the last commit

    def begin_commit(self, txid: int) -> None:
        """The wrapped map's transaction, when it has them (docs/stores.md); a txid that died inside one leaves
        the cache holding writes the store rolled back, so it is emptied; so does a transaction that ended
        unfinished after this cache's last commit (a shared one, which commits after this state's commit)."""
        if self._open or self._ended != self._ended_now():
            self._cache.clear()
        if hasattr(self.backing, "begin_commit"):
            self.backing.begin_commit(txid)
        self._open = True

    def commit(self, txid: int) -> None:
        if getattr(self.shared_transaction, "held", False):  # the store held the txid and dropped these writes
            self._cache.clear()
        if hasattr(self.backing, "commit"):
            self.backing.commit(txid)
        self._open, self._ended = False, self._ended_now()

    def _ended_now(self) -> int | None:
        return getattr(self.shared_transaction, "ended", None)

    @property
    def shared_transaction(self) -> Any:
        """The wrapped map's transaction shared with other states (txdag.state.base.begin_shared), if any."""
        return getattr(self.backing, "shared_transaction", None)

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        check_keys(keys)
        missing = list(dict.fromkeys(key for key in keys if key not in self._cache))
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        fetched = dict(zip(missing, self.backing.multi_get(missing))) if missing else {}
        values = [fetched[key] if key in fetched else self._cache[key] for key in keys]
        for key, value in zip(keys, values):
            self._remember(key, value)
        return values

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        self.backing.multi_put(keys, values)
        for key, value in zip(keys, values):
            self._remember(key, value)

    def _remember(self, key: Key, value: Any) -> None:
        self._cache[key] = value
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

"""Trident state on Redis: txid-aware map states over backing maps (seed 004)."""

from txdag.state.base import BackingMap, Key, StateFactory, StateKind, ValueUpdater, combine_sum
from txdag.state.cached_map import CachedMap
from txdag.state.committed import CommittedRead, CommittedValue, read_committed
from txdag.state.keys import DefaultKeyCodec, JoinedKeyCodec, KeyClashError, KeyCodec
from txdag.state.kv import KeyValueState
from txdag.state.memory import MemoryBackingMap
from txdag.state.non_transactional_map import NonTransactionalMap
from txdag.state.opaque_map import OpaqueMap
from txdag.state.redis_backing import RedisBackingMap
from txdag.state.redis_commit import (
    ApplyResult,
    EncodedPartials,
    StagedPartials,
    apply_encoded,
    apply_partials,
    apply_staged,
)
from txdag.state.snapshottable_map import SnapshottableMap
from txdag.state.transactional_map import TransactionalMap
from txdag.state.values import OpaqueValue, TransactionalValue

MAP_STATES = {kind.kind: kind for kind in (NonTransactionalMap, TransactionalMap, OpaqueMap)}

__all__ = [
    "MAP_STATES",
    "ApplyResult",
    "BackingMap",
    "CachedMap",
    "CommittedRead",
    "CommittedValue",
    "DefaultKeyCodec",
    "EncodedPartials",
    "JoinedKeyCodec",
    "Key",
    "KeyClashError",
    "KeyCodec",
    "KeyValueState",
    "MemoryBackingMap",
    "NonTransactionalMap",
    "OpaqueMap",
    "OpaqueValue",
    "RedisBackingMap",
    "SnapshottableMap",
    "StagedPartials",
    "StateFactory",
    "StateKind",
    "TransactionalMap",
    "TransactionalValue",
    "ValueUpdater",
    "apply_encoded",
    "apply_partials",
    "apply_staged",
    "read_committed",
    "combine_sum",
]

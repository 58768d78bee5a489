"""The txid rules of Trident state, as pure values (seed 004; Storm's TransactionalValue and OpaqueValue).

A transactional value stores the txid of the batch it last absorbed: a replay of that txid is skipped.
An opaque value also keeps the value before that batch, so a replay of the same txid with a *different*
batch recomputes from ``prev`` instead of adding on top of the first attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from txdag.errors import TxidOrderError


@dataclass(frozen=True)
class TransactionalValue:
    """``value`` includes every batch up to and including ``txid``."""

    txid: int
    value: Any

    def update(self, txid: int, value: Any) -> TransactionalValue:
        if txid < self.txid:
            raise TxidOrderError(txid, self.txid)
        return TransactionalValue(txid, value)


@dataclass(frozen=True)
class OpaqueValue:
    """``curr`` includes batch ``txid``; ``prev`` is the value before batch ``txid`` was applied."""

    txid: int
    curr: Any
    prev: Any = None

    def get(self, txid: int | None) -> Any:
        """The value a batch ``txid`` builds on: ``curr`` for a later batch, ``prev`` for a replay of ``txid``."""
        if txid is None or txid > self.txid:
            return self.curr
        if txid == self.txid:
            return self.prev
        raise TxidOrderError(txid, self.txid)

    def update(self, txid: int, value: Any) -> OpaqueValue:
        """The value after batch ``txid`` produced ``value`` on top of ``self.get(txid)``."""
        return OpaqueValue(txid, value, self.get(txid))


def committed_value(stored: Any) -> Any:
    """What a reader of the state sees: a stored value without its txid bookkeeping (None when absent)."""
    if isinstance(stored, TransactionalValue):
        return stored.value
    if isinstance(stored, OpaqueValue):
        return stored.curr
    return stored

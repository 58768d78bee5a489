"""TransactionAttempt: which txid a batch belongs to, and which emission of it this is."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class TransactionAttempt:
    """Storm's TransactionAttempt: ``txid`` never changes across replays, ``attempt`` grows by one each emission.

    txids start at 1 and have no gaps; attempts start at 1.
    """

    txid: int
    attempt: int

    def __post_init__(self) -> None:
        for name in ("txid", "attempt"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TransactionAttempt.{name} must be an int >= 1, got {value!r}")

    def __str__(self) -> str:
        return f"txid {self.txid} attempt {self.attempt}"


def attempt_id(tx: TransactionAttempt) -> str:
    """``<txid>:<attempt>``: the suffix of an attempt's staging keys, and its field in a KeyValueState's stages."""
    return f"{tx.txid}:{tx.attempt}"


def parse_attempt_id(text: str) -> TransactionAttempt:
    txid, attempt = text.split(":")
    return TransactionAttempt(int(txid), int(attempt))

"""What each per-txid step returns: one typed outcome per case, so every driver (the Airflow tasks, the
in-process runner, the soak) branches on values, never on exceptions or on strings.

The coordinator's outcomes (``Emission``, ``NotReady``, ``Busy``, ``Wait``, ``SourceDown``) and the commit's
(``Committed``, ``AlreadyCommitted``: what ``txdag.commit.phase`` returns, with ``Wait``) live in
``txdag.txid.decisions``; the step outcomes below complete them. Drivers import them all from ``txdag.protocol``.

    coordinate  Emission | NotReady | Busy | Wait | SourceDown | Halted | OwnerChanged
    process     Processed | AlreadyCommitted | Wait | Superseded | OwnerChanged
    commit      Committed | AlreadyCommitted | Wait | Superseded | Refused | Halted | OwnerChanged
    fail        Failed | None (the run owns no txid)
"""

from __future__ import annotations

from dataclasses import dataclass

from txdag.attempt import TransactionAttempt
from txdag.txid.decisions import AlreadyCommitted, Busy, Committed, Emission, NotReady, SourceDown, Wait


@dataclass(frozen=True)
class Processed:
    """The batch of ``emission`` is staged, sealed and marked processed; ``tuples``/``rejected`` when the job
    reports them (a Spark job run by spark-submit does not)."""

    emission: Emission
    tuples: int | None = None
    rejected: int | None = None

    @property
    def tx(self) -> TransactionAttempt:
        return self.emission.tx


@dataclass(frozen=True)
class Superseded:
    """``tx`` is no longer the txid's current attempt (re-emitted or failed meanwhile): its result is dropped and
    the step must not be retried; the run of the current attempt goes on."""

    tx: TransactionAttempt
    reason: str


@dataclass(frozen=True)
class Refused:
    """``tx`` must not commit: txid ``failed_txid`` (it, or an earlier one) failed and is to be replayed first
    (the cascade), or, with ``failed_txid`` None, its batch was never processed. Nothing was failed by it."""

    tx: TransactionAttempt
    reason: str
    failed_txid: int | None = None


@dataclass(frozen=True)
class Halted:
    """A store or the source holds less than ZooKeeper says was committed or emitted (a Redis restarted without
    its data, a backup restored): the topology stops until an operator restores the data or resets it; no retry
    can help. ``tx``: the txid whose commit found it, None at coordinate."""

    reason: str
    tx: TransactionAttempt | None = None


@dataclass(frozen=True)
class OwnerChanged:
    """The definition a step runs is not the one recorded as the topology's owner (its fingerprint differs:
    ``txdag.protocol.ownership``). A coordinate allocates no txid, a process stages nothing, a commit writes nothing,
    until the change is accepted (``txdag topology accept``) or undone. ``changes`` names each difference."""

    reason: str
    changes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Failed:
    """``tx`` failed for good; ``txids`` are those newly failed with it (empty: it was stale or committed)."""

    tx: TransactionAttempt
    txids: tuple[int, ...]


CoordinateOutcome = Emission | NotReady | Busy | Wait | SourceDown | Halted | OwnerChanged
ProcessOutcome = Processed | AlreadyCommitted | Wait | Superseded | OwnerChanged
CommitStepOutcome = Committed | AlreadyCommitted | Wait | Superseded | Refused | Halted | OwnerChanged

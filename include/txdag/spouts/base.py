"""The spout contract: a coordinator side (is_ready, initialize_transaction) and an emitter side (emit_batch).

Metadata is a JSON-serialisable dict; the coordinator stores it in ZooKeeper with its txid, so that a replay
can re-emit the batch. Storm's ITransactionalSpout, IPartitionedTransactionalSpout and
IOpaquePartitionedTransactionalSpout collapse into one protocol with a ``kind``:

- ``transactional``: a replay of a txid re-emits its stored metadata, hence exactly the same tuples.
- ``opaque``: a replay recomputes the metadata from the previous txid's metadata; the batch may differ, yet
  every tuple is committed in exactly one batch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from txdag.attempt import TransactionAttempt

Metadata = dict[str, Any]


class SpoutKind(str, enum.Enum):
    TRANSACTIONAL = "transactional"
    OPAQUE = "opaque"


@dataclass(frozen=True)
class Record:
    """One tuple of a batch: ``id`` is unique within the source (partition-qualified for partitioned spouts)."""

    id: str
    value: Any
    partition: str | None = None


@dataclass(frozen=True)
class Rejection:
    """A source entry that could not be turned into a tuple; counted and kept for an operator, never dropped."""

    id: str
    reason: str
    partition: str | None = None


@dataclass(frozen=True)
class Batch:
    """What an emitter produced for one TransactionAttempt."""

    tx: TransactionAttempt
    records: list[Record]
    rejections: list[Rejection] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.records)


@runtime_checkable
class TransactionalSpout(Protocol):
    """What the coordinator and the processing step need from a spout."""

    kind: SpoutKind

    def is_ready(self, prev_metadata: Metadata | None) -> bool:
        """True when there is something to read after ``prev_metadata`` (None: no txid yet)."""
        ...

    def initialize_transaction(self, txid: int, prev_metadata: Metadata | None) -> Metadata:
        """The metadata of ``txid``'s batch, continuing from the previous txid's metadata."""
        ...

    def emit_batch(self, tx: TransactionAttempt, metadata: Metadata) -> Batch:
        """Read exactly the tuples ``metadata`` describes."""
        ...

    def batch_size(self, metadata: Metadata) -> int:
        """How many source entries ``metadata`` covers (records + rejections)."""
        ...

    def lag(self, prev_metadata: Metadata | None) -> int:
        """Source entries after ``prev_metadata``'s batch; raises StoreWentBackwards when the source no longer
        holds that batch (restarted without its data, trimmed): the coordinator must not skip or re-read."""
        ...

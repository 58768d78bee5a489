"""Spouts: where batches come from. The public spout API (``base``: Source, TransactionalSpout, SpoutContext, the
batch's shapes) and the Redis-backed spouts for seed 000's layouts, two ordinary implementations of it."""

from txdag.spouts.base import (
    BATCH_COLUMNS,
    Batch,
    Metadata,
    Record,
    Rejection,
    Source,
    SourceInput,
    SpoutContext,
    SpoutKind,
    TransactionalSpout,
    unavailable_partitions,
)
from txdag.spouts.streams import (
    OpaquePartitionedStreamSpout,
    PartitionedTransactionalStreamSpout,
    StreamPartition,
    append_entries,
)
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets

__all__ = [
    "BATCH_COLUMNS",
    "Batch",
    "Metadata",
    "OpaquePartitionedStreamSpout",
    "PartitionedTransactionalStreamSpout",
    "Record",
    "Rejection",
    "Source",
    "SourceInput",
    "SpoutContext",
    "SpoutKind",
    "StreamPartition",
    "TransactionalSpout",
    "TweetsTransactionalSpout",
    "append_entries",
    "append_tweets",
    "unavailable_partitions",
]

"""Spouts: where batches come from. The contract (``base``) and Redis-backed spouts for seed 000's layouts."""

from txdag.spouts.base import Batch, Metadata, Record, Rejection, SpoutKind, TransactionalSpout
from txdag.spouts.streams import (
    OpaquePartitionedStreamSpout,
    PartitionedTransactionalStreamSpout,
    StreamPartition,
    append_entries,
)
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets

__all__ = [
    "Batch",
    "Metadata",
    "OpaquePartitionedStreamSpout",
    "PartitionedTransactionalStreamSpout",
    "Record",
    "Rejection",
    "SpoutKind",
    "StreamPartition",
    "TransactionalSpout",
    "TweetsTransactionalSpout",
    "append_entries",
    "append_tweets",
]

"""ZooKeeper side of txdag: the connection, the persisted records, and the per-topology znode store."""

from txdag.zk.client import close_zk, connect_zk
from txdag.zk.records import HistoryEntry, RunRecord, TopologyRecord, TxidRecord, TxStatus
from txdag.zk.store import AllocationRefused, TransactionStore, VersionConflict

__all__ = [
    "AllocationRefused",
    "HistoryEntry",
    "RunRecord",
    "TopologyRecord",
    "TransactionStore",
    "TxStatus",
    "TxidRecord",
    "VersionConflict",
    "close_zk",
    "connect_zk",
]

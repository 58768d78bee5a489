"""ZooKeeper side of txdag: the connection, the persisted records, and the per-topology znode store."""

from txdag.zk.client import close_zk, connect_zk
from txdag.zk.records import HistoryEntry, RunRecord, TopologyRecord, TxidRecord, TxStatus
from txdag.zk.store import AllocationRefused, LockBusy, TransactionStore, VersionConflict, ZnodeExists, ZnodeMissing

__all__ = [
    "AllocationRefused",
    "HistoryEntry",
    "LockBusy",
    "RunRecord",
    "TopologyRecord",
    "TransactionStore",
    "TxStatus",
    "TxidRecord",
    "VersionConflict",
    "ZnodeExists",
    "ZnodeMissing",
    "close_zk",
    "connect_zk",
]

"""What every exactly-once test checks of a topology's txid records in ZooKeeper, once its runs are done."""

from __future__ import annotations

from txdag.zk.records import TxidRecord, TxStatus
from txdag.zk.store import TransactionStore


def check_commits(store: TransactionStore, expected_last: int | None = None) -> dict[int, TxidRecord]:
    """Committed up to the last txid (``expected_last`` when given), every txid COMMITTED with no gap, first commits
    in strictly increasing txid order. Returns the records by txid."""
    topo, _ = store.read_topology()
    last = topo.committed_txid if expected_last is None else expected_last
    assert (topo.last_txid, topo.committed_txid) == (last, last), f"{store.topology}: txids still in flight"
    records = {t: r for t, (r, _) in store.read_txids(range(1, last + 1)).items()}
    assert sorted(records) == list(range(1, last + 1)), f"{store.topology}: a txid has no record: a gap"
    assert all(r.status is TxStatus.COMMITTED for r in records.values())
    committed_at = [min(h.at for h in records[t].history if h.status is TxStatus.COMMITTED) for t in sorted(records)]
    assert committed_at == sorted(committed_at) and len(set(committed_at)) == len(committed_at), \
        f"{store.topology}: commits out of txid order: {committed_at}"
    return records

"""Accepting a hole in the source on purpose (``txdag accept-missing``): the ids of a failed txid's batch that are
missing in the source are recorded in its metadata, so that every replay reads the same batch without them and
emits a Rejection for each (counted, listed by ``txdag rejections``), and the topology goes on.

Only where that keeps the guarantee: a spout whose batch is a list of ids it can name (``HoleAccepting``), a txid
that failed (nothing of its batch is in the states; a committed one would rewrite history), and ids missing now.
The metadata is written with ZooKeeper's version check: a txid changed meanwhile (re-emitted, failed again) is
refused, never overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from txdag.errors import TxdagError
from txdag.spouts.base import Metadata
from txdag.zk.records import TxidRecord, TxStatus
from txdag.zk.store import TransactionStore, VersionConflict


class AcceptRefused(TxdagError):
    """An accept-missing that would break the guarantee, or has nothing to accept; the message says why and the
    way out."""


@runtime_checkable
class HoleAccepting(Protocol):
    """A spout whose batch is a range of ids it can name one by one (the tweets spout)."""

    def missing_ids(self, metadata: Metadata) -> list[int]:
        """The ids of the batch missing in the source now (not those accepted already)."""
        ...

    def accept_missing(self, metadata: Metadata, ids: list[int], at: str) -> Metadata:
        """``metadata`` with ``ids`` accepted as missing at ``at``."""
        ...


@dataclass(frozen=True)
class Accepted:
    """What accept-missing found and (unless ``recorded`` is False: a dry run) recorded."""

    txid: int
    attempt: int
    run_id: str
    missing: list[int]
    metadata: dict[str, Any]
    recorded: bool
    replay_from: int  # the lowest failed txid up to ``txid``: the replay that helps starts there


def first_failed(store: TransactionStore, committed_txid: int, txid: int) -> int:
    """The lowest failed txid in ``committed_txid + 1 .. txid`` (``txid`` itself when none below it failed): a txid
    failed behind an earlier one commits only once that one is replayed."""
    records = store.read_txids(range(committed_txid + 1, txid))
    return min((t for t, (r, _) in records.items() if r.status is TxStatus.FAILED), default=txid)


def refusal(topology: str, record: TxidRecord | None, txid: int, committed_txid: int) -> str | None:
    """Why txid ``txid`` (its ``record``) must not have a hole accepted, or None. Only a failed txid whose commit
    never began: its batch is in no state, and no attempt of it is running."""
    replay = f"txdag replay {topology} --from {txid}"
    if record is None or txid <= committed_txid or record.status is TxStatus.COMMITTED:
        return (f"topology {topology!r}: txid {txid} is committed: its batch is in the states, and accepting ids as "
                f"missing now would rewrite history (a replay would no longer read what was committed); there is "
                f"nothing to accept: give the txid that failed (txdag status {topology})")
    if record.commit_begun:
        return (f"topology {topology!r}: txid {txid}'s commit has begun, so its batch is frozen (part of it may be "
                f"in the states): restore the missing entries, then `{replay}`")
    if record.status is not TxStatus.FAILED:
        return (f"topology {topology!r}: txid {txid} is {record.status.value}, not failed: a hole is accepted only in "
                f"a failed txid (no attempt of it running); wait until its process task has failed for good "
                f"(txdag status {topology}), then run this again")
    return None  # failed, on its own or behind an earlier txid (its own batch may have a hole too)


def accept_missing(store: TransactionStore, spout: Any, txid: int, at: str, *, record: bool) -> Accepted:
    """Find the ids of txid ``txid``'s batch missing in the source and, with ``record``, write them into its
    metadata (compare-and-set on the znode's version). Raises AcceptRefused when it must not, or has nothing to."""
    name = store.topology
    if not isinstance(spout, HoleAccepting):
        raise AcceptRefused(f"topology {name!r}: its spout ({type(spout).__name__}) cannot name the entries of a "
                            f"batch one by one, so accepting a hole would change the batch a replay reads: restore "
                            f"the entries, then `txdag replay {name} --from {txid}`, or start over with "
                            f"`txdag reset {name} --confirm`")
    topo, _ = store.read_topology()
    if topo.last_txid == 0:
        raise AcceptRefused(f"topology {name!r} has no txid yet: no batch has missing entries to accept")
    if not 1 <= txid <= topo.last_txid:
        raise AcceptRefused(f"topology {name!r} has txids 1..{topo.last_txid}, so there is no txid {txid}: give the "
                            f"failed txid (txdag status {name} leads with it)")
    got = store.read_txid(txid)
    why = refusal(name, got[0] if got else None, txid, topo.committed_txid)
    if why is not None or got is None:
        raise AcceptRefused(why or f"topology {name!r}: txid {txid} has no record")
    rec, version = got
    replay_from = first_failed(store, topo.committed_txid, txid)
    missing = spout.missing_ids(rec.metadata)
    if not missing:
        raise AcceptRefused(f"topology {name!r}: no entry of txid {txid}'s batch is missing in the source now, so "
                            f"there is no hole to accept: fix what its error says, then `txdag replay {name} --from "
                            f"{replay_from}`")
    metadata = spout.accept_missing(rec.metadata, missing, at)
    if record:
        try:
            store.update([(replace(rec, metadata=metadata, updated_at=at), version)])
        except VersionConflict:
            raise AcceptRefused(f"topology {name!r}: txid {txid} changed while its hole was being accepted (a run "
                                f"re-emitted or failed it); nothing was recorded: check `txdag status {name}` and run "
                                "this again") from None
    return Accepted(txid, rec.attempt, rec.run_id, missing, metadata, record, replay_from)

"""The coordinator's outcomes and its pure decision rules, unit-tested without ZooKeeper.

The Coordinator (``txdag.txid.coordinator``) reads the txid records, asks these functions, and writes back; the
commit phase (``txdag.commit.phase``) asks plan_commit and check_outputs between ZooKeeper's decision and its writes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from txdag.attempt import TransactionAttempt
from txdag.errors import CascadeError, ConfigError, StaleAttemptError, StoreWentBackwards, TxdagError, start_over
from txdag.spouts.base import Metadata, SpoutKind
from txdag.txid.failure import headline
from txdag.txid.waits import predecessor_note
from txdag.zk.records import TopologyRecord, TxidRecord, TxStatus


class TransactionStateError(TxdagError):
    """A step that makes no sense for the txid's status (never allocated, never processed, not begun)."""


class NotProcessedError(TransactionStateError):
    """A commit of an attempt whose batch was never processed: refuse it, and fail nothing."""


@dataclass(frozen=True)
class Emission:
    """Process ``tx`` over ``metadata``. ``already_committed``: a replay of a committed txid (commit is a no-op)."""

    tx: TransactionAttempt
    metadata: Metadata
    replay: bool
    already_committed: bool = False
    unavailable_partitions: tuple[str, ...] = ()  # an opaque batch planned without these (their source was down)


@dataclass(frozen=True)
class NotReady:
    """The spout has nothing to read: skip the run; no txid was consumed."""

    reason: str


@dataclass(frozen=True)
class Busy:
    """``max_active_transactions`` txids are uncommitted (or the lock is held): try again later; ``waiting_on``,
    when known, is the txid whose commit frees a place."""

    reason: str
    waiting_on: int | None = None


@dataclass(frozen=True)
class SourceDown:
    """The spout could not be read to plan a batch (its Redis is down): no txid was consumed; try again later."""

    reason: str


@dataclass(frozen=True)
class Wait:
    """Come back when ``waiting_on`` has moved on (been re-emitted, or committed). ``replay``: the run owns its
    txid already (it waits to be re-emitted); else it was refused a new txid and consumed none."""

    reason: str
    waiting_on: int
    replay: bool = False
    until_committed: bool = False  # ``waiting_on`` is failed already and being replayed: only its commit ends it


@dataclass(frozen=True)
class Go:
    """``tx`` may commit now. ``resumed``: its commit had begun before (a commit cut short and run again), so the
    states may hold it already."""

    tx: TransactionAttempt
    resumed: bool = False


@dataclass(frozen=True)
class AlreadyCommitted:
    """``tx``'s txid is committed already: the commit is a no-op."""

    tx: TransactionAttempt
    reason: str


@dataclass(frozen=True)
class Committed:
    """``tx`` is in the states and recorded in ZooKeeper: ``applied`` keys written, ``skipped`` already held it;
    ``staged_bytes``: the txid's staged outputs this commit applied, fields and values as staged (0 when a marker
    showed them in already; key-value states' writes are not counted)."""

    tx: TransactionAttempt
    applied: int = 0
    skipped: int = 0
    staged_bytes: int = 0


@dataclass(frozen=True)
class Snapshot:
    """What an operator sees: the counters and every txid record still kept."""

    topology: TopologyRecord
    txids: list[TxidRecord]


CommitDecision = Go | Wait | AlreadyCommitted


def lowest_failed(records: Iterable[TxidRecord]) -> TxidRecord | None:
    """The first FAILED txid among ``records``: everything after it waits for its replay."""
    failed = [r for r in records if r.status is TxStatus.FAILED]
    return min(failed, key=lambda r: r.txid) if failed else None


def cascade(later: Iterable[TxidRecord], failed_by: int, error: str, at: str, *, auto_replay: bool = False
            ) -> list[TxidRecord]:
    """Fail every later uncommitted txid: its batch was computed on top of ``failed_by``. ``auto_replay``: only
    because ``failed_by`` was re-emitted with another batch; txdag replays them itself, and a FAILED one is marked
    too (its processed batch is void: clearing only its commit must not commit it). Otherwise a FAILED txid keeps
    its own failure."""
    return [
        r.moved(TxStatus.FAILED, at, failed_by=failed_by, auto_replay=auto_replay,
                error=error if r.status is not TxStatus.FAILED else f"{error} (it had failed: {headline(r.error)})")
        for r in later
        if r.txid > failed_by and r.status is not TxStatus.COMMITTED
        and (r.status is not TxStatus.FAILED or (auto_replay and not r.auto_replay))
    ]


def revival_refused(record: TxidRecord, previous: TxidRecord | None) -> str | None:
    """Why the commit of FAILED ``record`` cannot run as it stands (None: it can). Clearing only the ``commit`` task
    of a failed txid commits the attempt it failed with when that attempt's batch was processed (it failed in its
    commit, or behind an earlier txid) and is still valid: planned after the metadata of ``previous`` (txid - 1)
    as it stands."""
    if record.auto_replay:
        return (f"its batch was planned before txid {record.failed_by} was re-emitted with another batch: txdag "
                f"re-emits txid {record.txid} itself once txid {record.failed_by} commits")
    done = (TxStatus.PROCESSED, TxStatus.COMMITTING)
    if not any(e.attempt == record.attempt and e.status in done for e in record.history):
        return (f"attempt {record.attempt} failed before its batch was processed: clear its whole run, or its "
                "process task with its downstream commit, to process the batch again")
    if record.txid > 1 and (previous is None or record.planned_on != previous.metadata_digest):
        return (f"its batch is not known to follow txid {record.txid - 1}'s as it stands (planned after another "
                f"batch of it, or recorded by an older txdag): clear its whole run to plan it again")
    return None


def automatic_replays(committed_txid: int, records: Iterable[TxidRecord]) -> list[TxidRecord]:
    """The txids to re-emit now that ``committed_txid`` is committed: the run of FAILED txids marked
    ``auto_replay`` that starts right after it, in txid order (a txid failed for another reason ends the run: it
    waits for an operator's replay, and so do the txids after it)."""
    by_txid = {r.txid: r for r in records}
    due, n = [], committed_txid + 1
    while n in by_txid and by_txid[n].status is TxStatus.FAILED and by_txid[n].auto_replay:
        due.append(by_txid[n])
        n += 1
    return due


def frozen_metadata(kind: SpoutKind, record: TxidRecord) -> bool:
    """A re-emission reuses the stored metadata for transactional spouts, and once a commit has begun."""
    return kind is SpoutKind.TRANSACTIONAL or record.commit_begun or record.status is TxStatus.COMMITTING


def commit_decision(
    topology: str, tx: TransactionAttempt, committed_txid: int, records: dict[int, TxidRecord]
) -> CommitDecision:
    """May ``tx`` commit? ``records`` holds the txids committed_txid+1 .. tx.txid at least (and committed_txid: a failed
    txid's batch is checked against it). Raises on a stale attempt,
    a failed txid at or before ``tx`` (cascade), or a txid that was never processed."""
    n, rec = tx.txid, records[tx.txid]
    if n <= committed_txid or rec.status is TxStatus.COMMITTED:
        return AlreadyCommitted(tx, f"topology {topology!r}: txid {n} is committed; the commit is a no-op")
    if rec.attempt != tx.attempt:
        raise StaleAttemptError(
            f"topology {topology!r}: {tx} is stale, the current attempt is {rec.attempt}: drop this "
            f"attempt's result; the run of attempt {rec.attempt} commits txid {n}"
        )
    failed = lowest_failed(r for t, r in records.items() if committed_txid < t <= n)
    refused = revival_refused(rec, records.get(n - 1)) if failed is rec else "an earlier txid failed"
    if failed is not None and refused is not None:
        raise CascadeError(cascade_message(topology, tx, failed, refused), failed_txid=failed.txid)
    if rec.status is TxStatus.EMITTED:
        raise NotProcessedError(
            f"topology {topology!r}: {tx} was never processed (status emitted): run its process task before its commit"
        )
    if n == committed_txid + 1:
        return Go(tx)
    note = predecessor_note(topology, records.get(n - 1), datetime.now(UTC))
    return Wait(
        f"topology {topology!r}: {tx} waits for txid {n - 1} to commit (committed: {committed_txid}){note}",
        waiting_on=n - 1,
    )


def cascade_message(topology: str, tx: TransactionAttempt, failed: TxidRecord, refused: str) -> str:
    """Why ``tx`` cannot commit over failed txid ``failed`` (``tx``'s own txid: ``refused`` says why not)."""
    said = f"topology {topology!r}: txid {tx.txid} (attempt {tx.attempt}) cannot commit: "
    if failed.txid == tx.txid:
        return f"{said}it failed (attempt {failed.attempt}: {failed.error}), and {refused}"
    return (f"{said}txid {failed.txid} failed (attempt {failed.attempt}: {failed.error}); replay txid {failed.txid} "
            f"and later (clear run {failed.run_id!r} with its future runs), or, when txid {failed.txid} failed in its "
            "commit, clear its commit task (with its future runs: this commit waits for it)")


def key_value_wait(topology: str, tx: TransactionAttempt, committed_txid: int, key_values: bool) -> Wait | None:
    """May ``tx`` be processed now? A topology with key-value states (seed 002) reads them as of txid - 1 while
    processing, so txid - 1 must be committed first (else the read would see an older state and count twice, or
    miss); other topologies process txids in any order. None: go on."""
    if not key_values or committed_txid >= tx.txid - 1:
        return None
    return Wait(
        f"topology {topology!r} {tx}: its key-value states are read as of txid {tx.txid - 1}, which is not "
        f"committed yet (committed: {committed_txid})",
        waiting_on=tx.txid - 1,
        replay=True,
    )


def marker_holds(topology: str, txid: int, marker: int | None, store: str, *, resumed: bool) -> bool:
    """True when the marker shows ``txid`` (the next txid) committed already: a marker behind txid - 1 is a store
    that lost committed state, and a marker at txid is this txid's only when its commit had begun before
    (``resumed``); else ZooKeeper lost its records. Raises StoreWentBackwards (see :func:`check_marker`)."""
    check_marker(topology, txid - 1, marker, store, next_commit_begun=resumed)
    return marker is not None and marker >= txid


def check_marker(topology: str, committed_txid: int, marker: int | None, store: str, *,
                 next_commit_begun: bool) -> None:
    """ZooKeeper's committed txid against the state store's commit marker (written last by every commit, in the
    same pipeline as the sums). The marker may be one ahead only where ZooKeeper shows that txid's commit begun
    (``next_commit_begun``: a commit cut short between the states and its ZooKeeper record). Behind, two ahead, or
    one ahead of a txid whose commit never began: a store or a ZooKeeper that lost what it acknowledged."""
    held = marker or 0
    if held == committed_txid or (held == committed_txid + 1 and next_commit_begun):
        return
    shown = "no commit marker" if marker is None else f"commit marker {marker}"
    if held < committed_txid:
        raise StoreWentBackwards(
            f"topology {topology!r}: ZooKeeper records txid {committed_txid} committed, but the state store "
            f"({store}) holds {shown}: the store lost committed state (restarted without its data, or restored "
            f"from an older backup). txdag halts this topology rather than build on it. Ways out: restore the "
            f"store's data (its appendonly file or a backup taken after txid {committed_txid}), or "
            f"{start_over(topology)}"
        )
    begun = f", and no commit begun of txid {held}" if held == committed_txid + 1 else ""
    raise StoreWentBackwards(
        f"topology {topology!r}: the state store ({store}) holds {shown}, but ZooKeeper records only txid "
        f"{committed_txid} committed{begun}: ZooKeeper lost the topology's records (a new data directory, an "
        f"older snapshot, or a ZooKeeper connection that now points elsewhere). txdag halts this topology rather "
        f"than emit txids twice. Ways out: restore ZooKeeper's data or connection, or {start_over(topology)}"
    )


@dataclass(frozen=True)
class CommitPlan:
    """What a commit writes once ZooKeeper decided: ``tx``'s outputs go into the states unless ``held`` (the marker
    shows them in already), then its record and the staging's deletion; ``done``: the txid is committed already, only
    the staging is left to delete."""

    tx: TransactionAttempt
    held: bool = False
    resumed: bool = False
    done: AlreadyCommitted | None = None


def plan_commit(topology: str, decision: Go | AlreadyCommitted, marker: int | None,
                marker_where: str | None) -> CommitPlan:
    """What the commit of ``decision`` writes: the marker (``marker_where`` None: no marker) must agree with ``tx``'s
    txid being next (see :func:`marker_holds`)."""
    if isinstance(decision, AlreadyCommitted):
        return CommitPlan(decision.tx, done=decision)
    tx = decision.tx
    held = marker_where is not None and marker_holds(topology, tx.txid, marker, marker_where, resumed=decision.resumed)
    return CommitPlan(tx, held, decision.resumed)


def check_outputs(topology: str, tx: TransactionAttempt, outputs: Collection[str], known: Collection[str]) -> None:
    """Every staged output is a state or sink of the topology: else the job and the topology disagree."""
    unknown = sorted(set(outputs) - set(known))
    if unknown:
        raise ConfigError(f"topology {topology!r} {tx}: staged outputs {unknown} are neither states nor sinks of the "
                          f"topology ({sorted(known)}); the job and the topology disagree")

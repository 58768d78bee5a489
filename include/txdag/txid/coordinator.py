"""The coordinator: Storm's MasterBatchCoordinator as an Airflow-free state machine, one DAG run = one txid.

Each method reads the txid records from ZooKeeper, decides with the pure functions of ``txdag.txid.decisions``
(unit-tested without a service), and writes back with compare-and-set; a conflict means another task moved a txid in
between, so the step re-reads and decides again. Allocation and re-emission also hold the topology's lock.

Rules in one place:
- txids are allocated in order with no gaps, at most ``max_active_transactions`` uncommitted at once;
- a failure of txid N, or its re-emission with a different batch, fails every later uncommitted txid: they
  were computed on top of N (a re-emission of the same batch leaves them valid);
- nothing new is allocated, and nothing re-emitted, on top of a FAILED txid;
- a commit happens only for ``committed_txid + 1``, for the current attempt, once processed; a FAILED txid whose
  commit runs again (its commit task cleared) commits the attempt it failed with, if that was processed and its
  batch is still valid (``decisions.revival_refused``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from txdag.attempt import TransactionAttempt
from txdag.defaults import KEEP_TXIDS
from txdag.errors import ConfigError, StaleAttemptError, TxdagError
from txdag.faults import crash_if_requested
from txdag.spouts.base import Metadata, SpoutKind, TransactionalSpout, unavailable_partitions
from txdag.txid.decisions import (  # noqa: F401  (re-exported: the coordinator's public outcomes)
    AlreadyCommitted,
    Busy,
    CommitDecision,
    Emission,
    Go,
    NotProcessedError,
    NotReady,
    Snapshot,
    SourceDown,
    TransactionStateError,
    Wait,
    automatic_replays,
    cascade,
    commit_decision,
    frozen_metadata,
    lowest_failed,
)
from txdag.txid.failure import headline, ways_out, ways_out_text
from txdag.zk.records import TopologyRecord, TxidRecord, TxStatus, digest_of
from txdag.zk.store import LockBusy, TransactionStore, VersionConflict

log = logging.getLogger("txdag.txid.coordinator")
T = TypeVar("T")
CAS_TRIES = 20


def refused_behind(topology: str, run_id: str, failed: TxidRecord) -> str:
    """Why ``run_id`` gets no new txid: the failed txid, its error's headline and the ways out."""
    return (f"topology {topology!r}: no new txid while txid {failed.txid} is failed (attempt {failed.attempt}, run "
            f"{failed.run_id!r}: {headline(failed.error)}); run {run_id!r} consumed no txid. Ways out: "
            f"{ways_out_text(ways_out(topology, failed.txid, failed.error))}")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Coordinator:
    """Allocates, re-emits, fails and commits the txids of one topology (see the module docstring)."""

    def __init__(
        self,
        store: TransactionStore,
        spout: TransactionalSpout,
        *,
        max_active_transactions: int = 1,
        keep_txids: int = KEEP_TXIDS,
        lock_timeout: float = 30.0,
    ) -> None:
        for name, value in (("max_active_transactions", max_active_transactions), ("keep_txids", keep_txids)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"topology {store.topology!r}: {name} must be an int >= 1, got {value!r}")
        if getattr(spout, "kind", None) not in (SpoutKind.TRANSACTIONAL, SpoutKind.OPAQUE):
            raise ConfigError(f"topology {store.topology!r}: spout {spout!r} has no kind (transactional/opaque)")
        self.store, self.spout, self.name = store, spout, store.topology
        self.max_active, self.keep_txids, self.lock_timeout = max_active_transactions, keep_txids, lock_timeout
        self._ensured = False

    def coordinate(self, run_id: str) -> Emission | NotReady | Busy | Wait:
        """The txid of ``run_id``: its own txid again (a replay), else the next one, under the topology lock."""
        self.ensure()
        lock = self.store.lock()
        try:
            lock.acquire(timeout=self.lock_timeout)
        except LockBusy:
            return Busy(
                f"topology {self.name!r}: another coordinator held the lock for {self.lock_timeout:g}s; "
                f"run {run_id!r} should try again"
            )
        try:
            outcome = self._cas(lambda: self._coordinate(run_id))
            if isinstance(outcome, Emission):  # the metadata is written, the lock still held
                crash_if_requested("coordinate", self.name, outcome.tx)
                outcome = replace(outcome, unavailable_partitions=unavailable_partitions(outcome.metadata))
        finally:
            lock.release()
        log.info("topology=%s run=%s: %s", self.name, run_id, outcome)
        return outcome

    def mark_processed(self, tx: TransactionAttempt) -> bool:
        """Record that ``tx``'s batch is processed (Storm's ack); False for a stale or failed attempt."""

        def step() -> bool:
            rec, ver = self._record(tx.txid)
            if rec.attempt != tx.attempt or rec.status not in (TxStatus.EMITTED, TxStatus.PROCESSED):
                log.warning(
                    "topology=%s txid=%s attempt=%s: not marked processed (current attempt %s, %s)",
                    self.name,
                    tx.txid,
                    tx.attempt,
                    rec.attempt,
                    rec.status.value,
                )
                return False
            if rec.status is TxStatus.EMITTED:
                self.store.update([(rec.moved(TxStatus.PROCESSED, _now()), ver)])
            log.info("topology=%s txid=%s attempt=%s: processed", self.name, tx.txid, tx.attempt)
            return True

        return self._cas(step)

    def fail(self, tx: TransactionAttempt, error: str) -> list[int]:
        """Fail ``tx`` and every later uncommitted txid in one transaction; returns the txids newly failed."""

        def step() -> list[int]:
            topo, tv = self.store.read_topology()
            if tx.txid <= topo.committed_txid:
                log.warning("topology=%s txid=%s attempt=%s: committed, not failed", self.name, tx.txid, tx.attempt)
                return []
            recs = self.store.read_txids(range(tx.txid, topo.last_txid + 1))
            rec, _ = self._pick(recs, tx.txid)
            if rec.attempt != tx.attempt or rec.status is TxStatus.COMMITTED:
                log.warning(
                    "topology=%s txid=%s attempt=%s: stale or committed (current attempt %s, %s), not failed",
                    self.name,
                    tx.txid,
                    tx.attempt,
                    rec.attempt,
                    rec.status.value,
                )
                return []
            at, why = _now(), f"txid {tx.txid} failed (attempt {tx.attempt}): {error}"
            changed = (
                []
                if rec.status is TxStatus.FAILED
                else [rec.moved(TxStatus.FAILED, at, failed_by=tx.txid, error=error)]
            )
            changed += cascade((r for r, _ in recs.values()), tx.txid, why, at)
            if changed:
                self.store.update([(r, recs[r.txid][1]) for r in changed], topology=(topo, tv))
            log.warning(
                "topology=%s txid=%s attempt=%s: failed (%s); failed txids %s",
                self.name,
                tx.txid,
                tx.attempt,
                error,
                [r.txid for r in changed],
            )
            return [r.txid for r in changed]

        return self._cas(step)

    def check_commit(self, tx: TransactionAttempt) -> CommitDecision:
        """May ``tx`` commit now? Read-only; see :func:`commit_decision`."""
        decision = self._commit_check(tx)[0]
        log.info("topology=%s txid=%s attempt=%s: check commit: %s", self.name, tx.txid, tx.attempt, decision)
        return decision

    def begin_commit(self, tx: TransactionAttempt) -> CommitDecision:
        """Check, and on Go mark ``tx`` COMMITTING, which freezes its metadata for any later emission."""

        def step() -> CommitDecision:
            decision, got = self._commit_check(tx)
            if isinstance(decision, Go) and got is not None:
                decision = replace(decision, resumed=got[0].commit_begun)
                if got[0].status is TxStatus.FAILED:  # its commit task was cleared: commit the attempt it failed with
                    log.warning("topology=%s txid=%s attempt=%s: failed (%s), and its commit runs again: committing "
                                "the processed attempt", self.name, tx.txid, tx.attempt, got[0].error)
                if got[0].status in (TxStatus.PROCESSED, TxStatus.FAILED):
                    self.store.update([(got[0].moved(TxStatus.COMMITTING, _now()), got[1])])
            log.info("topology=%s txid=%s attempt=%s: begin commit: %s", self.name, tx.txid, tx.attempt, decision)
            return decision

        return self._cas(step)

    def undo_begin_commit(self, tx: TransactionAttempt) -> None:
        """Back to PROCESSED, ``commit_begun`` cleared: for a commit that halted before it wrote anything, whose
        txid's commit had not begun before (a later try must not take a marker it finds for this txid's)."""

        def step() -> bool:
            rec, ver = self._window()[2].get(tx.txid) or (None, 0)  # not in it: committed since, nothing to undo
            if rec is None or rec.attempt != tx.attempt or rec.status is not TxStatus.COMMITTING:
                return False
            self.store.update([(replace(rec.moved(TxStatus.PROCESSED, _now()), commit_begun=False), ver)])
            return True

        if self._cas(step):
            log.warning("topology=%s txid=%s attempt=%s: commit halted before writing; back to processed",
                        self.name, tx.txid, tx.attempt)

    def record_commit(self, tx: TransactionAttempt) -> bool:
        """Mark ``tx`` COMMITTED and move committed_txid to it in one transaction, then clean up old txids.

        Returns False when it had been recorded before (a re-run commit task changes nothing). The spout is then
        told (``committed``), so that it can publish its position (the Kafka spout: its consumer group's offsets)."""
        metadata: list[Metadata] = []

        def step() -> bool:
            topo, tv = self.store.read_topology()
            if tx.txid <= topo.committed_txid:
                return False
            rec, ver = self._record(tx.txid)
            if rec.attempt != tx.attempt:
                raise StaleAttemptError(
                    f"topology {self.name!r}: cannot record the commit of {tx}: the current "
                    f"attempt is {rec.attempt}; let that run commit"
                )
            if rec.status is not TxStatus.COMMITTING or tx.txid != topo.committed_txid + 1:
                raise TransactionStateError(
                    f"topology {self.name!r}: cannot record the commit of {tx} (status {rec.status.value}, "
                    f"committed up to {topo.committed_txid}): call begin_commit and wait for its Go first"
                )
            committed = TopologyRecord(topo.last_txid, tx.txid)
            self.store.update([(rec.moved(TxStatus.COMMITTED, _now()), ver)], topology=(committed, tv))
            metadata[:] = [rec.metadata]
            return True

        done = self._cas(step)
        log.info(
            "topology=%s txid=%s attempt=%s: %s",
            self.name,
            tx.txid,
            tx.attempt,
            "committed" if done else "already committed",
        )
        if done:
            self._tell_spout("committed", tx.txid, tx.txid, metadata[0])
        self._cleanup(tx.txid)
        return done

    def automatic_replays(self, committed: int) -> list[TxidRecord]:
        """The txids whose runs are to be replayed now that txid ``committed`` is committed (see
        :func:`txdag.txid.decisions.automatic_replays`)."""
        topo, _ = self.store.read_topology()
        recs = self.store.read_txids(range(committed + 1, topo.last_txid + 1))
        return automatic_replays(committed, (r for r, _ in recs.values()))

    def status(self) -> Snapshot:
        self.ensure()
        topo, _ = self.store.read_topology()
        recs = self.store.read_txids(self.store.list_txids())
        return Snapshot(topo, [r for _, (r, _) in sorted(recs.items())])

    # -- steps ----------------------------------------------------------------------------------------

    def _coordinate(self, run_id: str) -> Emission | NotReady | Busy | Wait:
        topo, tv = self.store.read_topology()
        txid = self.store.txid_of_run(run_id)
        if txid is not None:
            return self._reemit(txid, topo, tv)
        recs = self.store.read_txids(range(topo.committed_txid + 1, topo.last_txid + 1))
        failed = lowest_failed(r for r, _ in recs.values())
        if failed is not None and failed.auto_replay:
            return NotReady(
                f"topology {self.name!r}: txid {failed.txid} is re-emitted automatically once txid "
                f"{failed.failed_by} commits (it was re-emitted with another batch); run {run_id!r} is skipped and "
                "consumes no txid"
            )
        if failed is not None:
            return Wait(refused_behind(self.name, run_id, failed), failed.txid)
        if topo.last_txid - topo.committed_txid >= self.max_active:
            return Busy(
                f"topology {self.name!r}: {self.max_active} txid(s) uncommitted (txids "
                f"{topo.committed_txid + 1}..{topo.last_txid}); run {run_id!r} waits for a commit",
                waiting_on=topo.committed_txid + 1,
            )
        last = recs.get(topo.last_txid) or (self._record(topo.last_txid) if topo.last_txid else None)
        prev = last[0].metadata if last else None
        if not self.spout.is_ready(prev):
            return NotReady(
                f"topology {self.name!r}: spout has nothing after txid {topo.last_txid}; run "
                f"{run_id!r} is skipped and consumes no txid"
            )
        rec = replace(TxidRecord.new(topo.last_txid + 1, run_id, self._initialize(topo.last_txid + 1, prev), _now()),
                      planned_on=None if prev is None else digest_of(prev))
        self.store.allocate(rec, topo, tv)
        return Emission(rec.tx, rec.metadata, replay=False)

    def _reemit(self, n: int, topo: TopologyRecord, tv: int) -> Emission | Wait:
        span = [n] if n <= topo.committed_txid else range(max(n - 1, 1), topo.last_txid + 1)
        recs = self.store.read_txids(span)
        if n not in recs and n <= topo.committed_txid:
            log.warning(
                "topology=%s txid=%s: committed and rotated out (keep_txids=%s); replay is a no-op",
                self.name,
                n,
                self.keep_txids,
            )
            return Emission(TransactionAttempt(n, 1), {}, replay=True, already_committed=True)
        rec, ver = self._pick(recs, n)
        if n <= topo.committed_txid or rec.status is TxStatus.COMMITTED:
            again = rec.moved(TxStatus.COMMITTED, _now(), attempt=rec.attempt + 1)
            self.store.update([(again, ver)])
            return Emission(again.tx, rec.metadata, replay=True, already_committed=True)
        prev = recs.get(n - 1)
        if prev is not None and n - 1 > topo.committed_txid and prev[0].status is TxStatus.FAILED:
            return Wait(
                f"topology {self.name!r}: txid {n} is re-emitted after txid {n - 1}, which is failed; "
                f"replay the run {prev[0].run_id!r} of txid {n - 1} first",
                n - 1,
                replay=True,
            )
        planned_on = rec.planned_on
        if frozen_metadata(self.spout.kind, rec):
            metadata = rec.metadata
        else:
            after = self._pick(recs, n - 1)[0].metadata if n > 1 else None
            metadata, planned_on = self._initialize(n, after), None if after is None else digest_of(after)
        at = _now()
        again = rec.moved(TxStatus.EMITTED, at, attempt=rec.attempt + 1, metadata=metadata, planned_on=planned_on)
        # Later txids were planned from this txid's metadata: only a different batch invalidates them; txdag
        # re-emits them itself once this txid commits (automatic_replays), as Storm re-emits every later batch.
        why = (f"txid {n} was re-emitted (attempt {again.attempt}) with a different batch, and this txid followed it: "
               f"it is re-emitted automatically once txid {n} commits")
        later = [] if metadata == rec.metadata else cascade((r for t, (r, _) in recs.items() if t > n), n, why, at,
                                                            auto_replay=True)
        self.store.update([(again, ver)] + [(r, recs[r.txid][1]) for r in later], topology=(topo, tv))
        return Emission(again.tx, metadata, replay=True)

    def _window(self) -> tuple[TopologyRecord, int, dict[int, tuple[TxidRecord, int]]]:
        """The topology record and every txid record from the last committed one to the last allocated."""
        topo, tv = self.store.read_topology()
        return topo, tv, self.store.read_txids(range(max(topo.committed_txid, 1), topo.last_txid + 1))

    def _commit_check(self, tx: TransactionAttempt) -> tuple[CommitDecision, tuple[TxidRecord, int] | None]:
        topo, _, recs = self._window()
        if tx.txid <= topo.committed_txid:
            return AlreadyCommitted(
                tx, f"topology {self.name!r}: txid {tx.txid} is committed (committed up to {topo.committed_txid})"
            ), None
        got = self._pick(recs, tx.txid)
        return commit_decision(self.name, tx, topo.committed_txid, {t: r for t, (r, _) in recs.items()}), got

    def _initialize(self, txid: int, prev: Metadata | None) -> Metadata:
        """The spout's metadata for ``txid``, refused early if ZooKeeper could not store it as a JSON object."""
        metadata = self.spout.initialize_transaction(txid, prev)
        if not isinstance(metadata, dict):
            raise ConfigError(
                f"topology {self.name!r}: spout returned {type(metadata).__name__} as metadata "
                f"of txid {txid}: initialize_transaction must return a dict"
            )
        try:
            json.dumps(metadata)
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"topology {self.name!r}: spout metadata of txid {txid} cannot be stored as "
                f"JSON ({exc}): return a dict of strings, numbers, lists and dicts"
            ) from None
        return metadata

    def _record(self, txid: int) -> tuple[TxidRecord, int]:
        got = self.store.read_txid(txid)
        return self._pick({txid: got} if got else {}, txid)

    def _pick(self, recs: dict[int, tuple[TxidRecord, int]], txid: int) -> tuple[TxidRecord, int]:
        if txid not in recs:
            raise TransactionStateError(
                f"topology {self.name!r}: txid {txid} has no record in ZooKeeper ({self.store.txid_path(txid)}):"
                " it was never allocated, or deleted by hand; check the topology status"
            )
        return recs[txid]

    def _cas(self, step: Callable[[], T]) -> T:
        """Run ``step`` until its compare-and-set writes land (each try re-reads)."""
        for _ in range(CAS_TRIES):
            try:
                return step()
            except VersionConflict as exc:
                log.info("topology=%s: %s", self.name, exc)
        raise TxdagError(f"topology {self.name!r}: {CAS_TRIES} conflicting writes in a row; retry the task")

    def committed_txid(self) -> int:
        """ZooKeeper's committed txid (0 for a topology that never ran)."""
        self.ensure()
        return self.store.read_topology()[0].committed_txid

    def ensure(self) -> None:
        """Create the topology's znodes the first time this coordinator needs them."""
        if not self._ensured:
            self.store.ensure()
            self._ensured = True

    def _cleanup(self, txid: int) -> None:
        """Rotate old txids out (never ``txid`` itself); a failure is logged and retried at the next commit."""
        try:
            deleted = self.store.cleanup_before(txid - self.keep_txids + 1)
            self.store.cleanup_runs(txid)
        except TxdagError as exc:
            log.warning("topology=%s txid=%s: cleanup failed (%s); retried after the next commit", self.name, txid, exc)
            return
        if deleted:
            log.info("topology=%s: deleted txids %s..%s", self.name, deleted[0], deleted[-1])
        self._tell_spout("cleanup_before", txid, txid - self.keep_txids + 1)  # Storm's cleanupBefore

    def _tell_spout(self, hook: str, txid: int, *args: Any) -> None:
        """Call the spout's ``hook`` after the commit of ``txid``; its own housekeeping never fails a committed
        txid (a failure is logged, and the hook called again after the next commit)."""
        call = getattr(self.spout, hook, None)
        try:
            if call is not None:
                call(*args)
        except Exception as exc:
            log.warning("topology=%s txid=%s: the spout's %s failed (%s: %s); called again after the next commit",
                        self.name, txid, hook, type(exc).__name__, exc)

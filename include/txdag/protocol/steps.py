"""The per-txid protocol, written once: coordinate, process, commit, fail. Airflow-free and Spark-free.

Each step takes a ``Runtime`` (clients and states, see ``txdag.protocol.runtime``) and returns a typed outcome
(``txdag.protocol.outcomes``); the drivers only turn outcomes into their own actions: the Airflow tasks into
skip / reschedule / fail, the in-process runner into return values and errors, the soak's worker into JSON.
What a step cannot decide (a Redis that stays down, a job that crashes) is raised; the driver retries it, and
on the last failure calls ``fail``, which fails the txid and every later uncommitted one (Storm's cascade).

    coordinate -> Emission | NotReady | Busy | Wait | SourceDown | Halted | OwnerChanged
    process    -> Processed | AlreadyCommitted | Wait | Superseded | OwnerChanged  (runs the job in between)
    commit     -> Committed | AlreadyCommitted | Wait | Superseded | Refused | Halted | OwnerChanged
    fail       -> Failed | Superseded | None
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from txdag.attempt import TransactionAttempt
from txdag.commit.phase import check_store, commit_transaction
from txdag.errors import CascadeError, ServiceUnavailable, SourceUnavailable, StaleAttemptError, StoreWentBackwards
from txdag.faults import crash_if_requested
from txdag.protocol.outcomes import (
    CommitStepOutcome,
    CoordinateOutcome,
    Failed,
    Halted,
    OwnerChanged,
    Processed,
    ProcessOutcome,
    Refused,
    Superseded,
)
from txdag.protocol.ownership import check_owner
from txdag.protocol.runtime import Runtime
from txdag.staging.claims import ReemitError, claim_attempt
from txdag.topology.owner import Owner
from txdag.txid.decisions import (
    AlreadyCommitted,
    Emission,
    NotProcessedError,
    SourceDown,
    key_value_wait,
)

log = logging.getLogger("txdag.steps")


@dataclass(frozen=True)
class JobReport:
    """What a job that read the batch itself can tell: tuples processed, and source entries rejected."""

    tuples: int
    rejected: int = 0


Job = Callable[[Emission], JobReport | None]  # stages and seals the batch of the emission it is given


def coordinate(rt: Runtime, run_id: str, definition: Owner | None = None) -> CoordinateOutcome:
    """The txid of ``run_id``: its own again (a replay), else the next one. A source that cannot be read to plan
    the batch is an outcome too (SourceDown): no txid is consumed, the run tries again later. A state store or
    source behind ZooKeeper halts the topology (Halted) before anything is emitted over it. With ``definition``
    (what the driver runs), a definition that is not the topology's owner is refused first (OwnerChanged)."""
    refused = owner_changed(rt, definition, "coordinate")
    if refused is not None:
        return refused
    try:
        check_states(rt)
        return rt.coordinator.coordinate(run_id)
    except SourceUnavailable as exc:
        log.warning("topology=%s run=%s: source down: %s", rt.coordinator.name, run_id, exc)
        return SourceDown(str(exc))
    except StoreWentBackwards as exc:
        log.error("topology=%s run=%s: halted: %s", rt.coordinator.name, run_id, exc)
        return Halted(str(exc))


def check_states(rt: Runtime) -> None:
    """ZooKeeper's committed txid against the states' commit marker; raises StoreWentBackwards
    (``txdag.commit.phase.check_store``). A commit checks the same before it writes, so a loss between two runs
    is caught too."""
    rt.coordinator.ensure()
    check_store(rt.coordinator.store, rt.client, rt.marker_key, rt.coordinator.name)


def process(rt: Runtime, run_id: str, emission: Emission, job: Job, *, owner: str,
            definition: Owner | None = None) -> ProcessOutcome:
    """Claim the attempt for ``owner`` (an attempt claimed by an earlier try is re-emitted, attempt + 1, so two
    jobs never stage one attempt), run ``job`` on it, mark it processed. A job that raises is the driver's to
    retry or fail; an attempt replaced meanwhile is Superseded, never Processed. A ``definition`` changed since the
    txid was coordinated waits (OwnerChanged) until the change is accepted or undone."""
    tx = emission.tx
    if emission.already_committed:  # before any client is built: there is nothing to read or write
        return AlreadyCommitted(tx, f"{tx}: committed already; nothing to process")
    changed = owner_changed(rt, definition, "process")
    if changed is not None:
        return changed
    name = rt.coordinator.name
    committed = rt.coordinator.store.read_topology()[0].committed_txid if rt.kv_targets else 0
    wait = key_value_wait(name, tx, committed, bool(rt.kv_targets))
    if wait is not None:
        return wait
    try:
        emission = claim_attempt(rt.coordinator, rt.staging, run_id, emission, owner=owner)
    except ReemitError as exc:
        return Superseded(tx, str(exc))
    report = job(emission)
    if not rt.coordinator.mark_processed(emission.tx):
        why = "processed, but the txid moved on meanwhile (re-emitted or failed); this result is dropped"
        return Superseded(emission.tx, f"topology {name!r} {emission.tx}: {why}: see the coordinate log")
    crash_if_requested("staged", name, emission.tx)
    return Processed(emission, *((report.tuples, report.rejected) if report else (None, None)))


def commit(rt: Runtime, tx: TransactionAttempt, definition: Owner | None = None) -> CommitStepOutcome:
    """Commit ``tx`` when it is next (see ``txdag.commit.phase`` for the order of writes). A commit that must not
    happen (cascade, never processed, stale attempt) is refused as an outcome and fails no txid; one whose
    ``definition`` changed since the txid was coordinated waits (OwnerChanged), writing nothing."""
    changed = owner_changed(rt, definition, "commit")
    if changed is not None:
        return changed
    try:
        return commit_transaction(rt.coordinator, rt.staging, rt.client, tx, rt.states, marker_key=rt.marker_key,
                                  load_job=rt.job_loader, key_values=rt.kv_targets, sinks=rt.sinks)
    except CascadeError as exc:
        return Refused(tx, str(exc), exc.failed_txid)
    except NotProcessedError as exc:
        return Refused(tx, str(exc))
    except StaleAttemptError as exc:
        return Superseded(tx, str(exc))
    except StoreWentBackwards as exc:
        log.error("topology=%s %s: halted: %s", rt.coordinator.name, tx, exc)
        return Halted(str(exc), tx)


def owner_changed(rt: Runtime, definition: Owner | None, step: str) -> OwnerChanged | None:
    """``definition`` (what the driver runs; None: no check) against the topology's owner, adopting it if none is
    recorded: one set of txids must not go into two states (``txdag.protocol.ownership``)."""
    return None if definition is None else check_owner(rt.coordinator.store, definition, step)


def fail(rt: Runtime, run_id: str, error: str, *, attempt: int | None = None, owner: str | None = None
         ) -> Failed | Superseded | None:
    """The run's txid failed for good: fail its current attempt (a retry may have re-emitted it) and every later
    uncommitted txid. None when the run owns no txid (its coordinate never allocated one). A try that was
    superseded (a paused or cut-off try that ends after its retry took over) fails nothing: Superseded. It is
    known by the ``attempt`` it worked on (a commit), or by the ``owner`` that claimed the current attempt (a
    process try: another try holds the claim)."""
    store = rt.coordinator.store
    txid = store.txid_of_run(run_id)
    got = store.read_txid(txid) if txid is not None else None
    if got is None:
        return None
    tx = got[0].tx
    if attempt is not None and attempt != tx.attempt:
        return Superseded(tx, f"this try worked on attempt {attempt}, and attempt {tx.attempt} replaced it")
    held = claim_holder(rt, tx) if owner is not None else None
    if held is not None and held != owner:
        return Superseded(tx, f"{tx} is claimed by {held!r}, not by this try ({owner})")
    return Failed(tx, tuple(rt.coordinator.fail(tx, error)))


def claim_holder(rt: Runtime, tx: TransactionAttempt) -> str | None:
    """Who claimed ``tx`` in Redis; None when Redis cannot say. Recording a failure must not depend on the service
    whose outage may have caused it: a Redis down for longer than the retries once left the txid ``processing`` in
    ZooKeeper after its run had failed, and every later run waiting for a place that never freed. While Redis is
    down no later try can be processing ``tx`` either (it claims in Redis first), so failing it is safe."""
    try:
        return rt.staging.holder(tx)
    except ServiceUnavailable as exc:
        log.warning("topology=%s %s: the claim cannot be read (%s); failing the txid without it",
                    rt.coordinator.name, tx, exc)
        return None

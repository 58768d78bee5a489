"""The commit phase of one txid: decide (ZooKeeper, the marker), read the sealed staging, write, record, clean up.

Before anything is written: the marker is checked against ZooKeeper (check_store); a txid that is not next returns
a Wait. Then the order of writes, and why each crash point is safe:
1. ZooKeeper: status COMMITTING (freezes the batch: any replay re-emits the same metadata). The marker, the staged
   outputs (every one a state or sink of the topology) and every sink's own record are checked next; a store found
   behind ZooKeeper there takes COMMITTING back, where this try began the commit, and halts.
2. The outputs of each state and sink, each idempotent for the txid, applied kind by kind as the table of kinds
   says (txdag.commit.kinds), after every sink's own record was checked: combiner partials, windows, state
   updaters, sinks (skipped where the sink's last_applied holds the txid), key-value states (prepared then
   committed), then the numeric partials, added inside Redis (or through the map state, for a state in a store of
   the user's: each key's txid makes a second pass a no-op). The states of one PostgreSQL database are written in
   one transaction of the txid, committed after every kind, with the txid the database holds; the Redis marker
   is written last.
   On a Redis Cluster, a replica of every master written has acknowledged the writes (WAIT) before step 3.
3. ZooKeeper: COMMITTED and committed_txid = txid, in one transaction; then txids older than the kept window.
4. Redis: the staging of every attempt of txid is deleted.
A crash after 1 or 2 leaves a txid that re-runs 2 with the same partials (no change where already applied);
a crash after 3 leaves the txid's staging, which a re-run of the commit task deletes (it finds the txid committed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

import redis

from txdag.attempt import TransactionAttempt
from txdag.commit.apply import CommitContext, KVTarget
from txdag.commit.kinds import Outputs, apply_outputs, check_sinks
from txdag.errors import ServiceUnavailable, StoreWentBackwards
from txdag.faults import crash_if_requested
from txdag.redisio import replicate
from txdag.staging.store import Staging
from txdag.state.base import begin_shared, committing
from txdag.state.map_state import MapStateBase
from txdag.state.marker import read_marker, where
from txdag.state.redis_commit import commit_keys, write_marker
from txdag.txid.coordinator import Coordinator
from txdag.txid.decisions import (
    AlreadyCommitted,
    CommitPlan,
    Committed,
    Go,
    Wait,
    check_marker,
    check_outputs,
    plan_commit,
)
from txdag.zk.store import TransactionStore

log = logging.getLogger("txdag.commit.phase")


def commit_transaction(
    coordinator: Coordinator,
    staging: Staging,
    client: redis.Redis,
    tx: TransactionAttempt,
    states: Mapping[str, MapStateBase],
    *,
    marker_key: str | None = None,
    extra: Mapping[str, str] | None = None,
    load_job: Callable[[], ModuleType] | None = None,
    key_values: Mapping[str, KVTarget] | None = None,
    sinks: Collection[str] = (),
) -> Committed | AlreadyCommitted | Wait:
    """Commit ``tx`` if it is next (Committed), or say why not: its txid is committed already, or it waits for txid - 1
    (a Wait of the run that owns its txid). Raises CascadeError, NotProcessedError or StaleAttemptError when it must
    not commit at all, StoreWentBackwards when a store holds less than ZooKeeper says, BatchReadError when the
    sealed staging cannot be read, ConfigError when it holds outputs the topology does not have.
    ``load_job`` imports the topology's job file, for outputs whose aggregator (or committer) the job defines;
    ``key_values`` are the topology's key-value states, every one prepared and committed at each txid; ``sinks``
    the names of its sinks (their committers are rebuilt from the staging).
    Decide, read, write: ZooKeeper decides, the marker is checked (txid.decisions.plan_commit); a commit that goes
    ahead reads its sealed staging and checks every sink's own record (begin_writes); write_commit writes."""
    topology = coordinator.name
    if marker_key is not None:  # before COMMITTING is written: a marker at tx.txid then is not a commit of tx's
        check_store(coordinator.store, client, marker_key, topology)
    decision = coordinator.begin_commit(tx)
    if isinstance(decision, Wait):  # nothing read: a waiting commit holds the topology's pool slot
        return replace(decision, replay=True)  # the run owns its txid: it waits, and consumes no other
    marker = None
    if isinstance(decision, Go) and marker_key is not None:
        marker = read_marker(client, marker_key, topology, f"reading the marker of txid {tx.txid}")
    try:
        plan = plan_commit(topology, decision, marker, None if marker_key is None else where(client, marker_key))
        read, ctx, shared = begin_writes(plan, staging, client, states, load_job, key_values or {},
                                         [*states, *(key_values or {}), *sinks], topology=topology)
    except StoreWentBackwards:
        if isinstance(decision, Go) and not decision.resumed:  # this try wrote nothing: its COMMITTING must not
            coordinator.undo_begin_commit(tx)  # vouch for that marker at a retry
        raise
    return write_commit(plan, read, ctx, shared, coordinator, staging, client, states, marker_key=marker_key,
                        extra=extra, sinks=sinks)


@dataclass(frozen=True)
class CommitRead:
    """The sealed outputs of a commit that goes ahead, and their bytes as read (the sums', in Redis, are counted
    where they are applied)."""

    outputs: Outputs
    read_bytes: int = 0


def begin_writes(plan: CommitPlan, staging: Staging, client: redis.Redis, states: Mapping[str, MapStateBase],
                 load_job: Callable[[], ModuleType] | None, key_values: Mapping[str, KVTarget],
                 known: Collection[str], *, topology: str) -> tuple[CommitRead, CommitContext | None, list[Any]]:
    """A commit that goes ahead: its sealed staging, every output a state or sink of ``known``; the context of its
    writes (None where the marker holds the txid already), once every sink's own record was checked: a sink that
    went backwards halts the commit before anything is written. The states of a database (PostgreSQL) get one
    transaction, begun here: it checks the txid it holds."""
    if plan.done is not None:
        return CommitRead({}), None, []
    outputs, read_bytes = staging.read_staged(plan.tx, commit=True)
    read = CommitRead(outputs, read_bytes)
    check_outputs(topology, plan.tx, outputs, known)
    if plan.held:
        return read, None, []
    ctx = CommitContext(topology, plan.tx, client, states, load_job, key_values)
    check_sinks(ctx, outputs)
    return read, ctx, begin_shared((state.backing for state in states.values()), plan.tx.txid, resumed=plan.resumed)


def write_commit(plan: CommitPlan, read: CommitRead, ctx: CommitContext | None, shared: list[Any],
                 coordinator: Coordinator,
                 staging: Staging, client: redis.Redis, states: Mapping[str, MapStateBase], *,
                 marker_key: str | None, extra: Mapping[str, str] | None,
                 sinks: Collection[str]) -> Committed | AlreadyCommitted:
    """The writes of ``plan``, in the order of the module docstring: the outputs through ``ctx`` and the marker (none
    where ``ctx`` is None: the marker holds the txid already), ZooKeeper's record, the staging's deletion."""
    topology, tx = coordinator.name, plan.tx
    names = [*states, *sinks]
    if plan.done is not None:
        staging.delete(tx.txid, range(1, tx.attempt + 1), names)
        return plan.done
    applied = skipped = staged_bytes = 0
    if ctx is not None:
        with committing(shared, tx.txid):
            applied, skipped, in_redis = apply_outputs(ctx, read.outputs)
        staged_bytes = read.read_bytes + in_redis
        write_marker(client, tx.txid, marker_key, extra, topology=topology, written=commit_keys(states, topology))
    written = commit_keys(states, topology) + ([marker_key] if marker_key else [])
    replicate(client, written, f"the commit of {tx} of topology {topology!r}")
    crash_if_requested("commit", topology, tx)  # the states hold txid, ZooKeeper does not know yet
    coordinator.record_commit(tx)
    crash_if_requested("committed", topology, tx)  # recorded; the staging is still there
    staging.delete(tx.txid, range(1, tx.attempt + 1), names)
    log.info(
        "topology=%s txid=%s attempt=%s: committed %s keys (%s already held this txid; %s bytes staged) into %s",
        topology,
        tx.txid,
        tx.attempt,
        applied,
        skipped,
        staged_bytes,
        sorted(read.outputs),
    )
    return Committed(tx, applied, skipped, staged_bytes)


def check_store(store: TransactionStore, client: redis.Redis, marker_key: str, topology: str) -> int | None:
    """ZooKeeper's committed txid against the states' commit marker, which this phase writes after COMMITTING and
    before the ZooKeeper record: the marker is at committed_txid, or one ahead where that txid's commit began.
    Anything else raises StoreWentBackwards. Returns the marker. A commit that moves committed_txid between the two
    reads is read again rather than taken for a store that went backwards."""
    for _ in range(5):
        committed = store.read_topology()[0].committed_txid
        marker = read_marker(client, marker_key, topology, "checking the commit marker against ZooKeeper")
        begun = marker == committed + 1 and store.commit_begun(committed + 1)
        try:
            check_marker(topology, committed, marker, where(client, marker_key), next_commit_begun=begun)
            return marker
        except StoreWentBackwards:
            if store.read_topology()[0].committed_txid == committed:
                raise
    raise ServiceUnavailable(f"topology {topology!r}: ZooKeeper's committed txid moved at each of 5 reads of the "
                             f"commit marker ({where(client, marker_key)}); run the task again")



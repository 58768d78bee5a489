"""The commit phase of one txid: wait for txid-1, apply the sealed staging to the states, record, clean up.

Order of writes, and why each crash point is safe:
1. ZooKeeper: status COMMITTING (freezes the batch: any replay re-emits the same metadata).
2. Redis: the outputs of each state, each idempotent for the txid, applied kind by kind as the table of kinds says
   (txdag.commit.kinds): combiner partials, windows, state updaters, key-value states (prepared then committed),
   then the numeric partials, read from the staging and added inside Redis, with the marker written last.
   On a Redis Cluster, a replica of every master written has acknowledged the writes (WAIT) before step 3.
3. ZooKeeper: COMMITTED and committed_txid = txid, in one transaction.
4. Redis: the staging of every attempt of txid is deleted; ZooKeeper: txids older than the kept window.
A crash after 1 or 2 leaves a txid that re-runs 2 with the same partials (no change where already applied);
a crash after 3 leaves garbage that the next commit's cleanup, or a re-run, removes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType

import redis

from txdag.attempt import TransactionAttempt
from txdag.commit.apply import CommitContext, KVTarget
from txdag.commit.kinds import apply_outputs
from txdag.commit.staging import Staging
from txdag.errors import ConfigError
from txdag.faults import crash_if_requested
from txdag.redisio import replicate
from txdag.state.map_state import MapStateBase
from txdag.state.marker import read_marker, where
from txdag.state.redis_commit import commit_keys
from txdag.txid.coordinator import AlreadyCommitted, Coordinator, Wait
from txdag.txid.decisions import check_marker

log = logging.getLogger("txdag.commit.phase")


@dataclass(frozen=True)
class CommitOutcome:
    tx: TransactionAttempt
    status: str  # "committed", "already committed" or "waiting"
    waiting_on: int | None = None
    applied: int = 0
    skipped: int = 0
    reason: str = ""


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
) -> CommitOutcome:
    """Commit ``tx`` if it is next; raises CascadeError/StaleAttemptError when it must not commit at all.
    ``load_job`` imports the topology's job file, for outputs whose aggregator the job defines; ``key_values``
    are the topology's key-value states, every one prepared and committed at each txid."""
    topology = coordinator.name
    decision = coordinator.begin_commit(tx)
    if isinstance(decision, Wait):
        return CommitOutcome(tx, "waiting", waiting_on=decision.waiting_on, reason=decision.reason)
    if isinstance(decision, AlreadyCommitted):
        staging.delete(tx.txid, range(1, tx.attempt + 1), states)
        return CommitOutcome(tx, "already committed", reason=decision.reason)
    outputs = staging.read_outputs(tx, commit=True)
    unknown = sorted(set(outputs) - set(states) - set(key_values or {}))
    if unknown:
        raise ConfigError(
            f"topology {topology!r} {tx}: staged partials for unknown states {unknown}; the job and "
            f"the topology's states ({sorted(states)}) disagree"
        )
    applied = skipped = 0
    if not _marker_at(client, marker_key, tx.txid, topology):  # a marker >= txid: every output is in already
        ctx = CommitContext(topology, tx, client, states, load_job, key_values or {}, marker_key, extra)
        applied, skipped = apply_outputs(ctx, outputs)
    written = commit_keys(states, topology) + ([marker_key] if marker_key else [])
    replicate(client, written, f"the commit of {tx} of topology {topology!r}")
    crash_if_requested("commit", topology, tx)  # the states hold txid, ZooKeeper does not know yet
    coordinator.record_commit(tx)
    crash_if_requested("committed", topology, tx)  # recorded; the staging is still there
    staging.delete(tx.txid, range(1, tx.attempt + 1), states)
    log.info(
        "topology=%s txid=%s attempt=%s: committed %s keys (%s already held this txid) into %s",
        topology,
        tx.txid,
        tx.attempt,
        applied,
        skipped,
        sorted(outputs),
    )
    return CommitOutcome(tx, "committed", applied=applied, skipped=skipped)


def _marker_at(client: redis.Redis, marker_key: str | None, txid: int, topology: str) -> bool:
    """True when the marker shows ``txid`` (or a later one) committed already. ``txid`` is next (txid - 1 is
    ZooKeeper's committed txid), so a marker behind txid - 1 is a Redis that lost committed state: halt."""
    if marker_key is None:
        return False
    value = read_marker(client, marker_key, topology, f"reading the marker of txid {txid}")
    check_marker(topology, txid - 1, value, where(client, marker_key))
    return value is not None and value >= txid


"""The commit phase of one txid: wait for txid-1, apply the sealed staging to the states, record, clean up.

Order of writes, and why each crash point is safe:
1. ZooKeeper: status COMMITTING (freezes the batch: any replay re-emits the same metadata).
2. Redis: the partials, one script call per chunk, per-key txid rules, marker last (idempotent).
3. ZooKeeper: COMMITTED and committed_txid = txid, in one transaction.
4. Redis: the staging of every attempt of txid is deleted; ZooKeeper: txids older than the kept window.
A crash after 1 or 2 leaves a txid that re-runs 2 with the same partials (no change where already applied);
a crash after 3 leaves garbage that the next commit's cleanup, or a re-run, removes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import redis

from txdag.attempt import TransactionAttempt
from txdag.coordinator import AlreadyCommitted, Coordinator, Wait
from txdag.errors import ConfigError
from txdag.faults import crash_if_requested
from txdag.staging import Staging
from txdag.state.map_state import MapStateBase
from txdag.state.redis_backing import RedisBackingMap
from txdag.state.redis_commit import EncodedPartials, apply_encoded

log = logging.getLogger("txdag.commit")


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
) -> CommitOutcome:
    """Commit ``tx`` if it is next; raises CascadeError/StaleAttemptError when it must not commit at all."""
    topology = coordinator.name
    decision = coordinator.begin_commit(tx)
    if isinstance(decision, Wait):
        return CommitOutcome(tx, "waiting", waiting_on=decision.waiting_on, reason=decision.reason)
    if isinstance(decision, AlreadyCommitted):
        staging.delete(tx.txid, range(1, tx.attempt + 1), states)
        return CommitOutcome(tx, "already committed", reason=decision.reason)
    partials = staging.read(tx)
    unknown = sorted(set(partials) - set(states))
    if unknown:
        raise ConfigError(
            f"topology {topology!r} {tx}: staged partials for unknown states {unknown}; the job and "
            f"the topology's states ({sorted(states)}) disagree"
        )
    encoded = [
        EncodedPartials(_namespace(states[name]), states[name].kind, deltas) for name, deltas in partials.items()
    ]
    result = apply_encoded(client, tx.txid, encoded, marker_key=marker_key, extra=extra, topology=topology)
    crash_if_requested("commit", topology, tx)  # the states hold txid, ZooKeeper does not know yet
    coordinator.record_commit(tx)
    crash_if_requested("committed", topology, tx)  # recorded; the staging is still there
    staging.delete(tx.txid, range(1, tx.attempt + 1), states)
    log.info(
        "topology=%s txid=%s attempt=%s: committed %s keys (%s already held this txid) into %s",
        topology,
        tx.txid,
        tx.attempt,
        result.applied,
        result.skipped,
        sorted(partials),
    )
    return CommitOutcome(tx, "committed", applied=result.applied, skipped=result.skipped)


def _namespace(state: MapStateBase) -> str:
    if not isinstance(state.backing, RedisBackingMap):
        raise ConfigError(f"committing staged partials needs states over RedisBackingMap, got {state.backing!r}")
    return state.backing.namespace

"""Each processing try owns an attempt of its own: claim it, or have the txid re-emitted and claim that.

A retried process task (or a soak worker started again) finds its attempt claimed by the try before it,
whose job may still be running; writing the same attempt's staging from two jobs would mix their partials.
So the new try re-emits the txid (attempt + 1, the same batch for a transactional spout) and claims that.
"""

from __future__ import annotations

import logging
import re

from txdag.attempt import TransactionAttempt
from txdag.errors import StaleAttemptError, TxdagError
from txdag.staging.store import Staging
from txdag.txid.coordinator import Coordinator, Emission

log = logging.getLogger("txdag.staging.claims")


class ReemitError(TxdagError):
    """The txid could not be re-emitted for a new try (it failed, or another run moved it on)."""


def claim_attempt(coordinator: Coordinator, staging: Staging, run_id: str, emission: Emission, owner: str) -> Emission:
    """``emission`` if ``owner`` claimed its attempt, else a re-emission of the txid claimed by ``owner``. An
    attempt that another try holds, or that a newer attempt fenced off, is not ``owner``'s to process."""
    try:
        mine = staging.claim(emission.tx, owner) == owner
    except StaleAttemptError:
        mine = False
    if mine:
        return emission
    later = later_try(coordinator, staging, emission.tx.txid, owner)
    if later is not None:  # this try was given up on and woke up: re-emitting would take the txid from its retry
        raise ReemitError(f"topology {coordinator.name!r} {emission.tx}: a later try ({later!r}) holds the txid's "
                          f"current attempt, so this try ({owner}) was superseded: it processes nothing")
    outcome = coordinator.coordinate(run_id)
    if not isinstance(outcome, Emission):
        raise ReemitError(f"topology {coordinator.name!r} {emission.tx}: claimed by an earlier try, and a new "
                          f"attempt could not be emitted: {outcome.reason}")
    log.info("topology=%s txid=%s: attempt %s was claimed by an earlier try; re-emitted as attempt %s",
             coordinator.name, emission.tx.txid, emission.tx.attempt, outcome.tx.attempt)
    staging.claim(outcome.tx, owner)
    return outcome


_TRY = re.compile(r"(.*) try (\d+)")


def later_try(coordinator: Coordinator, staging: Staging, txid: int, owner: str) -> str | None:
    """The try of the same run, later than ``owner``, that holds the txid's current attempt (None: none does).
    Owners are ``<run> try <n>`` (the Airflow task's try number); owners of another shape are never compared."""
    mine = _TRY.fullmatch(owner)
    got = coordinator.store.read_txid(txid)
    if mine is None or got is None:
        return None
    held = staging.holder(TransactionAttempt(txid, got[0].attempt))
    theirs = _TRY.fullmatch(held or "")
    if theirs is None or theirs.group(1) != mine.group(1) or int(theirs.group(2)) <= int(mine.group(2)):
        return None
    return held

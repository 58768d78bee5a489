"""Where staged writes wait for their commit: every staging key, keyed by (txid, attempt) as ``<txid>:<attempt>``.

A topology's staging, written by ``txdag.staging.store`` (``{topology}`` is a Redis Cluster hash tag, so a
topology's staging shares one slot):

    txdag:stage:{topology}:<txid>:<attempt>:<state>   hash  field -> partial (a number, or JSON: txdag.staging.format)
    txdag:stage:{topology}:<txid>:<attempt>           hash  the seal: v, and per state its output (txdag.staging.format)
    txdag:claim:{topology}:<txid>:<attempt>           string  which processing try owns the attempt
    txdag:claim:{topology}:<txid>                     string  the fence: the highest attempt claimed; a write of
                                                              a lower (stale) attempt is refused (staging.store)

A KeyValueState's staging lives in the state's namespace instead (txdag.state.kv.layout), so that one script
reaches it with the state's other keys; its field in ``stages`` is the attempt's id as here (txdag.attempt.attempt_id).

Keying by attempt keeps a stale attempt's writes from passing for the current one's; the seal (the topology's
seal hash, a KeyValueState's ``stages`` field) says the attempt is complete. ``keys``/``acl_patterns``: the
shape of txdag.keyspace.
"""

from __future__ import annotations

from collections.abc import Iterable

from txdag.attempt import TransactionAttempt, attempt_id
from txdag.keyspace import below


def _stage_base(topology: str) -> str:
    return f"txdag:stage:{{{topology}}}"


def _claim_base(topology: str) -> str:
    return f"txdag:claim:{{{topology}}}"


def stage_key(topology: str, tx: TransactionAttempt, state: str | None = None) -> str:
    """The seal of ``tx``'s staging, or with ``state`` the hash of that state's partials."""
    base = f"{_stage_base(topology)}:{attempt_id(tx)}"
    return base if state is None else f"{base}:{state}"


def claim_key(topology: str, tx: TransactionAttempt) -> str:
    return f"{_claim_base(topology)}:{attempt_id(tx)}"


def fence_key(topology: str, txid: int) -> str:
    """The txid's fence: the highest attempt claimed. Not among ``keys``: it outlives the commit's cleanup, so a
    stale attempt that wakes up after it is still refused (it expires a week after the last claim)."""
    return f"{_claim_base(topology)}:{txid}"


def keys(topology: str, tx: TransactionAttempt, states: Iterable[str]) -> list[str]:
    """Every staging key of attempt ``tx`` of a topology whose staged outputs are ``states``."""
    return [stage_key(topology, tx), claim_key(topology, tx), *(stage_key(topology, tx, s) for s in states)]


def acl_patterns(topology: str) -> list[str]:
    return [below(_stage_base(topology)), below(_claim_base(topology))]

"""Where staged writes wait for their commit: every staging key, keyed by (txid, attempt) as ``<txid>:<attempt>``.

A topology's staging, written by ``txdag.commit.staging`` (``{topology}`` is a Redis Cluster hash tag, so a
topology's staging shares one slot):

    txdag:stage:{topology}:<txid>:<attempt>:<state>   hash  field -> partial (a number, or JSON: txdag.commit.outputs)
    txdag:stage:{topology}:<txid>:<attempt>           hash  the seal: v, and per state its output (txdag.commit.outputs)
    txdag:claim:{topology}:<txid>:<attempt>           string  which processing try owns the attempt
    txdag:claim:{topology}:<txid>                     string  the fence: the highest attempt claimed; a write of
                                                              a lower (stale) attempt is refused (commit.staging)

A KeyValueState's staging, written by ``txdag.state.kv``, lives in the state's namespace (``base`` is
``txdag:kv:{ns}``, see txdag.state.kv.layout) so that one script reaches it with the state's other keys:

    <base>:stage:<txid>:<attempt>   hash  key bytes -> tagged write    one attempt's staged writes
    <base>:stages                   hash  "<txid>:<attempt>" -> "open" or the sealed number of keys

Keying by attempt keeps a stale attempt's writes from passing for the current one's; the seal (the topology's
seal hash, a KeyValueState's ``stages`` field) says the attempt is complete. ``keys``/``acl_patterns``: the
shape of txdag.keyspace.
"""

from __future__ import annotations

from collections.abc import Iterable

from txdag.attempt import TransactionAttempt
from txdag.keyspace import below


def attempt_id(tx: TransactionAttempt) -> str:
    """``<txid>:<attempt>``: the suffix of an attempt's staging keys, and its field in a KeyValueState's stages."""
    return f"{tx.txid}:{tx.attempt}"


def parse_attempt_id(text: str) -> TransactionAttempt:
    txid, attempt = text.split(":")
    return TransactionAttempt(int(txid), int(attempt))


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


def kv_stage_prefix(base: str) -> str:
    """What a KeyValueState's attempt stage keys start with (its commit script deletes ``prefix .. attempt id``)."""
    return f"{base}:stage:"


def kv_stage_key(base: str, tx: TransactionAttempt) -> str:
    return kv_stage_prefix(base) + attempt_id(tx)


def kv_stages_key(base: str) -> str:
    return f"{base}:stages"

"""Recovery (seed 002): when a topology starts, finish or undo a commit that a crash interrupted.

Storm's checkpoint spout records whether the topology's last txid was being prepared or committed. txdag needs
no extra record: each namespace's ``meta`` hash holds ``committed_txid`` and ``prepared_txid``, and the prepare
script sets ``prepared_txid`` in the same atomic step that copies the writes, so one HMGET of a namespace shows
it either fully prepared or not prepared at all. Across the namespaces of one topology (its steps' states,
which one commit task prepares all, then commits all) the decision is:

- no namespace holds a prepared txid: nothing to do;
- txid T is prepared in some namespaces and every other one has prepared or committed T: the commit task had
  finished preparing (it commits only after preparing every namespace) -> **commit** T where it is prepared;
- T is prepared in some namespaces but at least one has neither prepared nor committed it: the crash came
  during the prepare phase -> **roll back** T where it is prepared;
- anything else (two different prepared txids, or T committed somewhere and missing elsewhere) cannot come
  from the protocol: refuse, naming the namespaces, rather than guess.

Run it where no commit of the topology runs at the same time: at the start of the topology's commit task (the
1-slot pool serialises those) or when the topology starts, before its first commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import redis

from txdag.state.kv.errors import KVStateError
from txdag.state.kv.layout import KVNamespace
from txdag.state.kv.protocol import StateHooks, commit, rollback, status


@dataclass(frozen=True)
class Txids:
    namespace: str
    committed: int  # 0 when nothing is committed
    prepared: int | None


@dataclass(frozen=True)
class RecoveryPlan:
    action: str  # "nothing", "commit" or "rollback"
    txid: int | None = None
    namespaces: tuple[str, ...] = ()  # where the action applies

    def __str__(self) -> str:
        if self.action == "nothing":
            return "nothing to recover: no namespace holds a prepared txid"
        verb = "committed" if self.action == "commit" else "rolled back"
        why = ("it was prepared in every namespace" if self.action == "commit"
               else "it was not prepared in every namespace")
        return f"{verb} txid {self.txid} in {', '.join(self.namespaces)} ({why})"


def plan_recovery(states: Sequence[Txids]) -> RecoveryPlan:
    """The decision above, as a pure function of each namespace's committed and prepared txids."""
    prepared = sorted({s.prepared for s in states if s.prepared is not None})
    if not prepared:
        return RecoveryPlan("nothing")
    if len(prepared) > 1:
        held = ", ".join(f"{s.namespace}: {s.prepared}" for s in states if s.prepared is not None)
        raise KVStateError(f"namespaces hold different prepared txids ({held}); one commit task prepares one txid "
                           f"in all of them: inspect them with `txdag state dump` and roll back by hand")
    txid = prepared[0]
    holders = tuple(s.namespace for s in states if s.prepared == txid)
    missing = [s for s in states if s.prepared != txid and s.committed < txid]
    if not missing:
        return RecoveryPlan("commit", txid, holders)
    ahead = [s.namespace for s in states if s.prepared != txid and s.committed >= txid]
    if ahead:
        raise KVStateError(f"txid {txid} is committed in {ahead}, prepared in {list(holders)} and neither in "
                           f"{[s.namespace for s in missing]}: the namespaces do not belong to one commit; check "
                           f"that they are the states of one topology")
    return RecoveryPlan("rollback", txid, holders)


def recover(client: redis.Redis, specs: Sequence[KVNamespace], *, hooks: StateHooks | None = None) -> RecoveryPlan:
    """Read every namespace, decide (plan_recovery) and commit or roll back; returns what it did, for the log.

    ``specs`` are all the KeyValueState namespaces one commit task prepares together (one when alone)."""
    if not specs:
        raise ValueError("recover needs the namespaces of the topology's KeyValueStates")
    by_name = {s.namespace: s for s in specs}
    txids = [Txids(s.namespace, st.committed_txid, st.prepared_txid) for s, st in ((s, status(client, s))
                                                                                for s in specs)]
    plan = plan_recovery(txids)
    for name in plan.namespaces:
        if plan.action == "commit":
            commit(client, by_name[name], plan.txid, hooks=hooks)  # type: ignore[arg-type]
        else:
            rollback(client, by_name[name], plan.txid, hooks=hooks)
    return plan

"""One owner per topology, at run time: before it allocates anything, the coordinate step compares the definition
it runs with the one recorded in ZooKeeper (``<root>/<topology>/owner``, an OwnerRecord).

- No owner recorded (a new topology, or one from before owners were recorded), or one of an older fingerprint
  scheme: this definition adopts it.
- The same fingerprint: go on. A DAG file moved or renamed is logged, not refused: it writes the same txids into
  the same places.
- Another fingerprint: OwnerChanged, naming each change and the command that accepts it; no txid is allocated,
  and the next runs are refused the same way until the change is accepted or undone.

:func:`accept` records a definition as the owner on purpose (``txdag topology accept``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from txdag.errors import FormatVersionError, TxdagError
from txdag.protocol.outcomes import OwnerChanged
from txdag.topology.owner import FINGERPRINT_SCHEME, Owner, as_now, changes, same_definition
from txdag.zk.records import OwnerRecord
from txdag.zk.store import TransactionStore

log = logging.getLogger("txdag.protocol.ownership")
TRIES = 10


def record_of(owner: Owner, how: str) -> OwnerRecord:
    return OwnerRecord(owner.dag_file, owner.fingerprint, owner.definition,
                       datetime.now(UTC).isoformat(timespec="seconds"), how, FINGERPRINT_SCHEME)


def check_owner(store: TransactionStore, owner: Owner, step: str = "coordinate") -> OwnerChanged | None:
    """None when ``owner`` may run ``step`` of the topology (adopting the topology if it has no owner), else why
    not."""
    for _ in range(TRIES):
        got = store.read_owner()
        if got is not None and got[0].scheme > FINGERPRINT_SCHEME:
            raise FormatVersionError(
                f"topology {owner.topology_id!r}: its owner record {store.owner_path} has fingerprint scheme "
                f"{got[0].scheme}, newer than this txdag's {FINGERPRINT_SCHEME}: run every task with the newer txdag")
        if got is not None and got[0].scheme == FINGERPRINT_SCHEME:
            recorded = got[0]
            if not same_definition(recorded.definition, recorded.fingerprint, owner):
                return refusal(owner, recorded, step)
            if owner.dag_file and recorded.dag_file and owner.dag_file != recorded.dag_file:
                log.warning("topology=%s: defined by %s now, recorded owner %s (same definition, fingerprint %s); "
                            "txdag topology accept %s records the new file", owner.topology_id, owner.dag_file,
                            recorded.dag_file, owner.fingerprint, owner.topology_id)
            return None
        if store.write_owner(record_of(owner, "adopted"), None if got is None else got[1]):
            log.info("topology=%s: owner adopted: %s (fingerprint %s)%s", owner.topology_id, owner.dag_file,
                     owner.fingerprint, "" if got is None else f", replacing a record of scheme {got[0].scheme}")
            return None
    raise TxdagError(f"topology {owner.topology_id!r}: its owner record {store.owner_path} kept changing while "
                     f"being read {TRIES} times; retry the task")


def refusal(owner: Owner, recorded: OwnerRecord, step: str = "coordinate") -> OwnerChanged:
    """The refusal of a definition that differs from the recorded owner: what changed, and the two ways out. A
    coordinate allocates nothing (its run is cleared once the change is accepted); a process or commit step of a
    txid coordinated under the owner waits for the change to be accepted (it then goes on with the new definition)
    or undone."""
    changed = tuple(changes(as_now(recorded.definition), owner.definition))
    name = owner.topology_id
    accept_it = f"run `txdag topology accept {name}` with the new definition in the DAG folder"
    if step == "coordinate":
        then = (f"No txid was allocated: two definitions of one topology would write its txids into two places. If "
                f"the change is on purpose, {accept_it}, then clear this run; if not, restore the definition (or "
                f"delete the copy that defines {name!r} too)")
    else:
        then = (f"This txid was coordinated under the owner: its {step} waits, writing nothing, until you {accept_it} "
                f"(it then goes on with the new definition) or restore the definition")
    return OwnerChanged(
        f"topology {name!r}: the definition this run uses ({owner.dag_file or 'DAG file unknown'}, fingerprint "
        f"{owner.fingerprint}) is not the one that owns the topology ({recorded.dag_file or 'DAG file unknown'}, "
        f"fingerprint {recorded.fingerprint}, {recorded.how} {recorded.since}): {'; '.join(changed) or 'changed'}. "
        f"{then}",
        changed,
    )


def accept(store: TransactionStore, owner: Owner) -> tuple[OwnerRecord | None, OwnerRecord]:
    """Record ``owner`` as the topology's owner, whatever was recorded; returns (the previous record, the new)."""
    for _ in range(TRIES):
        got = store.read_owner()
        new = record_of(owner, "accepted")
        if store.write_owner(new, None if got is None else got[1]):
            log.info("topology=%s: owner accepted: %s (fingerprint %s)", owner.topology_id, owner.dag_file,
                     owner.fingerprint)
            return (None if got is None else got[0]), new
    raise TxdagError(f"topology {owner.topology_id!r}: its owner record {store.owner_path} kept changing while "
                     f"being written {TRIES} times; run the command again")

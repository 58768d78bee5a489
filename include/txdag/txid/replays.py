"""One replay of a topology at a time, and none of runs a replay already queued again (issue 37).

Two ``txdag replay --from 7`` at once (or the page's button and the command) would both clear the same runs: the
second clear restarts runs the first had just queued, and their txids spend an attempt for nothing. So a replay

    1. takes the topology's replay lock (kazoo's Lock recipe on ``/txdag/<topology>/replay-lock``) without
       waiting: held by another replay -> refused, naming who holds it;
    2. reads the last replay's record (``/txdag/<topology>/replay``): if it cleared the run of every txid asked
       for and that run is queued or running in Airflow again -> refused, the replay is already under way;
    3. clears its runs (the caller's ``clear``), then records them, and releases the lock.

A run that a replay cleared but that is not queued or running any more (it failed again, or was marked by hand)
can be replayed again. Timeline of the race the lock prevents:

    A: lock (ok)          A: clear run 7, run 8          A: record, unlock
    B:      lock (held by A) -> refused: "a replay of topology T is in progress"
    B':                                                              read record: run 7 queued -> refused
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from txdag.txid.report import ReplayRefused
from txdag.zk.records import TxidRecord

FORMAT_VERSION = 1
AGAIN = ("queued", "running")  # the Airflow run states of a run a replay's clear set going again


def replay_path(store: Any) -> str:
    return f"{store.path}/replay"


def replay_lock_path(store: Any) -> str:
    return f"{store.path}/replay-lock"


def read_last(store: Any) -> dict[str, Any] | None:
    """The record of the topology's last replay, or None (none yet, or not a record this txdag reads)."""
    from txdag.zk.store import ZnodeMissing

    try:
        data, _ = store._retry(store.client.get, replay_path(store))
    except ZnodeMissing:
        return None
    try:
        record = json.loads(data)
    except ValueError:
        return None
    return record if isinstance(record, dict) and record.get("v") == FORMAT_VERSION else None


def write_last(store: Any, record: dict[str, Any]) -> None:
    from txdag.zk.store import ZnodeMissing

    data = json.dumps({"v": FORMAT_VERSION, **record}, sort_keys=True).encode()
    try:
        store._retry(store.client.set, replay_path(store), data)
    except ZnodeMissing:
        store._retry(store.client.create, replay_path(store), data)


def already_under_way(store: Any, records: Sequence[TxidRecord], last: dict[str, Any] | None,
                      run_state: Callable[[str], str | None]) -> str | None:
    """Why the replay of ``records`` is already done (the last replay cleared their runs and Airflow runs them
    again), or None."""
    if not last or not records:
        return None
    first = records[0]
    if last.get("runs", {}).get(str(first.txid)) != first.run_id:
        return None
    state = run_state(first.run_id)
    if state not in AGAIN:
        return None
    return (f"topology {store.topology!r}: a replay from txid {last['from_txid']} cleared the runs of txids "
            f"{first.txid}..{records[-1].txid} at {last['at']} ({last['by']}), and txid {first.txid}'s run "
            f"{first.run_id} is {state} again in Airflow: the replay is already under way, so this one would clear "
            f"them again and spend an attempt for nothing. Wait for it: `txdag status {store.topology}`; replay again "
            f"only if it fails")


def guarded_replay(store: Any, records: Sequence[TxidRecord], by: str, run_state: Callable[[str], str | None],
                   clear: Callable[[], Any]) -> Any:
    """``clear()`` (the replay of ``records``) under the topology's replay lock, unless another replay holds it or
    the last replay already set these runs going again (ReplayRefused); the replay is then recorded."""
    from txdag.zk.store import TopologyLock

    store.wait_connected()
    lock = TopologyLock(store, store.client.Lock(replay_lock_path(store), identifier=by))
    if not lock.acquire(blocking=False):
        holders = ", ".join(lock.lock.contenders()) or "another process"
        raise ReplayRefused(f"topology {store.topology!r}: a replay of it is in progress ({holders}); it clears the "
                            f"same runs, so this one would spend their attempts for nothing. Wait for it to finish, "
                            f"then see `txdag status {store.topology}`")
    try:
        why = already_under_way(store, records, read_last(store), run_state)
        if why:
            raise ReplayRefused(why)
        done = clear()
        write_last(store, {"from_txid": records[0].txid if records else None, "by": by,
                           "at": datetime.now(UTC).isoformat(timespec="seconds"),
                           "runs": {str(r.txid): r.run_id for r in records}})
        return done
    finally:
        lock.release()

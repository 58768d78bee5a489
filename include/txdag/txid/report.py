"""What ZooKeeper holds about a topology's txids, as plain data: ``txdag status``/``show`` print it and the UI's
transactions page shows it, so an operator reads the same figures, phases and cascades in both.

Pure functions of the records (no kazoo, no Airflow) except :func:`read_snapshot`, :func:`read_unsettled` and
:func:`replay_targets`, which read a :class:`~txdag.zk.store.TransactionStore`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from txdag.errors import TxdagError
from txdag.txid.failure import headline, ways_out
from txdag.txid.slots import queued_behind
from txdag.txid.waits import age, duration, stalled, stalled_advice, waits_on
from txdag.zk.records import TopologyRecord, TxidRecord, TxStatus

# Phases of a txid in flight, in the order a txid goes through them. "coordinating" is a run whose coordinate
# task has not allocated or re-emitted its txid yet: only Airflow knows it (see txdag.airflow.transactions).
COORDINATING, PROCESSING, PROCESSED, WAITING, COMMITTING = (
    "coordinating", "processing", "processed", "waiting to commit", "committing")
RATE_WINDOW = timedelta(minutes=10)


class ReplayRefused(TxdagError):
    """A replay that cannot be done as asked; the message says why and what to do instead."""


def read_snapshot(store: Any) -> tuple[TopologyRecord, list[TxidRecord]]:
    """The topology record and every kept txid record, ascending (two ZooKeeper round trips)."""
    topo, _ = store.read_topology()
    return topo, [r for _, (r, _) in sorted(store.read_txids(store.list_txids()).items())]


def read_unsettled(store: Any) -> tuple[TopologyRecord, list[TxidRecord]]:
    """The topology record and the txid records from the one after the committed txid to the last begun, with the
    last's even when it is the committed one (two ZooKeeper round trips, however many txids are kept)."""
    topo, _ = store.read_topology()
    wanted = {*range(topo.committed_txid + 1, topo.last_txid + 1), topo.last_txid} - {0}
    return topo, [r for _, (r, _) in sorted(store.read_txids(wanted).items())]


def last_batch(records: list[TxidRecord], last_txid: int) -> dict[str, Any] | None:
    """The metadata of the last txid's batch, which a spout counts its lag from (None before the first txid).
    LookupError when that txid's record is not among ``records``: the lag is then unknown."""
    last = next((r for r in records if r.txid == last_txid), None)
    if last_txid and last is None:
        raise LookupError(f"txid {last_txid}'s record is not in ZooKeeper: the source's lag is unknown")
    return last.metadata if last else None


def phase(record: TxidRecord, committed_txid: int) -> str:
    """A txid's phase for an operator. A processed txid waits to commit while an earlier one is not committed;
    the next one to commit is just "processed" (its commit task is about to take the pool slot)."""
    if record.status is TxStatus.EMITTED:
        return PROCESSING
    if record.status is TxStatus.PROCESSED:
        return PROCESSED if record.txid == committed_txid + 1 else WAITING
    return record.status.value  # committing, committed, failed


def batch_of(metadata: dict[str, Any]) -> tuple[str, int | None]:
    """A batch's range as text and its size, for the two spout metadata layouts (anything else: as JSON)."""
    if isinstance(metadata.get("from"), int) and isinstance(metadata.get("quantity"), int):
        start, quantity = metadata["from"], metadata["quantity"]
        missing = metadata.get("missing")
        accepted = f" ({len(missing)} accepted as missing)" if isinstance(missing, dict) and missing else ""
        return f"ids {start}..{start + quantity - 1}{accepted}", quantity
    parts = metadata.get("partitions")
    if isinstance(parts, dict):
        ranges = [f"{name} ({p.get('after')}, {p.get('last')}]" for name, p in sorted(parts.items()) if p.get("count")]
        return "; ".join(ranges) or "empty", sum(int(p.get("count") or 0) for p in parts.values())
    return str(metadata), None


def failures(records: list[TxidRecord], topology: str) -> list[dict[str, Any]]:
    """Each failed txid that started a cascade, with the later txids its failure failed, its error's headline
    (``error`` keeps all of it) and the ways out as commands."""
    failed = {r.txid: r for r in records if r.status is TxStatus.FAILED}
    roots = [r for r in failed.values() if r.failed_by in (None, r.txid) or r.failed_by not in failed]
    return [{"txid": r.txid, "attempt": r.attempt, "run_id": r.run_id, "error": r.error,
             "automatic_replay": r.auto_replay,
             "headline": headline(r.error), "ways_out": ways_out(topology, r.txid, r.error),
             "cascade": sorted(t for t, c in failed.items() if c.failed_by == r.txid and t != r.txid)}
            for r in sorted(roots, key=lambda r: r.txid)]


def in_flight(records: list[TxidRecord]) -> list[TxidRecord]:
    """The txids neither committed nor failed."""
    return [r for r in records if r.status not in (TxStatus.COMMITTED, TxStatus.FAILED)]


def wait_fields(record: TxidRecord, committed_txid: int, now: datetime, run_state: str | None = None
                ) -> dict[str, Any]:
    """What a txid in flight waits on and for how long (``txdag.txid.waits``)."""
    return {"waits_on": waits_on(record, committed_txid, run_state), "since": record.updated_at,
            "for": duration(age(record.updated_at, now))}


def stalls(name: str, records: list[TxidRecord], committed_txid: int, now: datetime,
           runs: dict[str, str] | None = None) -> list[str]:
    """The advice about a stalled head of the line (at most one txid), for status and the page. A head whose run is
    queued in Airflow has no task to retry: its wait is a run slot (``run_slots``), not its task; one whose run
    failed in Airflow is stuck at once, however recent."""
    states = runs or {}
    return [stalled_advice(name, r, now, states.get(r.run_id)) for r in in_flight(records)
            if states.get(r.run_id) != "queued" and (stalled(r, committed_txid, now) or (
                r.txid == committed_txid + 1 and states.get(r.run_id) == "failed"))]


def topology_status(topo: TopologyRecord, records: list[TxidRecord], name: str, rejected: int | None,
                    now: datetime | None = None, *, runs: dict[str, str] | None = None,
                    max_active_runs: int | None = None, paused: bool | None = None) -> dict[str, Any]:
    """``txdag status TOPOLOGY``'s document. ``runs``: the DAG's queued and running runs' states, None when Airflow
    could not be read (``run_slots`` is None then, as when no run is queued)."""
    now = now or datetime.now(UTC)
    states = runs or {}
    return {
        "topology": name,
        "last_txid": topo.last_txid,
        "committed_txid": topo.committed_txid,
        "in_flight": [{"txid": r.txid, "attempt": r.attempt, "phase": phase(r, topo.committed_txid),
                       "run_id": r.run_id, **wait_fields(r, topo.committed_txid, now, states.get(r.run_id))}
                      for r in in_flight(records)],
        "stalled": stalls(name, records, topo.committed_txid, now, states),
        "run_slots": queued_behind(topo, records, states, max_active_runs, paused),
        "failed": failures(records, name),
        "rejections": rejected,
        "kept_txids": [r.txid for r in records],
    }


def committed_at(record: TxidRecord) -> datetime | None:
    """When the txid was first committed (its first COMMITTED history step; replays add later ones)."""
    for entry in record.history:
        if entry.status is TxStatus.COMMITTED:
            return datetime.fromisoformat(entry.at)
    return None


def phase_seconds(records: list[TxidRecord]) -> dict[str, float]:
    """How long the newest committed txid took in each phase, from its history (seconds), as first committed (a
    replay of it adds steps, not time): ``process`` the committing attempt's emission to processed, ``wait``
    processed to its commit's start (txid - 1 committed), ``commit`` that start to committed, ``total`` the txid's
    first emission to committed (retries included). Empty until a txid is committed; a span whose steps the capped
    history lost is left out."""
    done = next((r for r in reversed(records) if r.status is TxStatus.COMMITTED), None)
    first = next((e for e in done.history if e.status is TxStatus.COMMITTED), None) if done else None
    if done is None or first is None:
        return {}
    at: dict[TxStatus, datetime] = {}
    for entry in done.history:
        if entry.attempt == first.attempt and entry.status not in at:
            at[entry.status] = datetime.fromisoformat(entry.at)
    spans = {"process": (TxStatus.EMITTED, TxStatus.PROCESSED), "wait": (TxStatus.PROCESSED, TxStatus.COMMITTING),
             "commit": (TxStatus.COMMITTING, TxStatus.COMMITTED)}
    found = {name: (at[end] - at[start]).total_seconds() for name, (start, end) in spans.items()
             if start in at and end in at}
    if done.history[0].attempt == 1 and done.history[0].status is TxStatus.EMITTED:
        found["total"] = (at[TxStatus.COMMITTED] - datetime.fromisoformat(done.history[0].at)).total_seconds()
    return found


def commits_per_minute(records: list[TxidRecord], now: datetime, window: timedelta = RATE_WINDOW) -> float:
    """Txids first committed within ``window`` before ``now``, per minute. Only kept txids count (keep_txids):
    with more commits than that in the window, the rate shown is a lower bound."""
    since = now - window
    done = [at for at in map(committed_at, records) if at is not None and since < at <= now]
    return round(len(done) / (window.total_seconds() / 60), 2)


def txid_row(record: TxidRecord, committed_txid: int) -> dict[str, Any]:
    """One txid as the page and ``txdag show`` list it."""
    batch, size = batch_of(record.metadata)
    return {"txid": record.txid, "attempt": record.attempt, "phase": phase(record, committed_txid),
            "run_id": record.run_id, "batch": batch, "batch_size": size, "metadata": record.metadata,
            "updated_at": record.updated_at, "failed_by": record.failed_by, "error": record.error,
            "headline": headline(record.error) if record.error else None}


def replay_targets(store: Any, from_txid: int) -> list[TxidRecord]:
    """The records of txid ``from_txid`` and every later txid, in txid order: the runs a replay clears."""
    if not store.client.exists(store.path):
        raise ReplayRefused(f"topology {store.topology!r} has not run yet (no txid in ZooKeeper): nothing to replay; "
                            "trigger its DAG first")
    topo, _ = store.read_topology()
    if topo.last_txid == 0:
        raise ReplayRefused(f"topology {store.topology!r} has no txid yet: nothing to replay; trigger its DAG first")
    if not 1 <= from_txid <= topo.last_txid:
        raise ReplayRefused(f"topology {store.topology!r} has txids 1..{topo.last_txid}, so there is no txid "
                            f"{from_txid} to replay from: give one in 1..{topo.last_txid} (the first failed txid "
                            f"to retry a failure)")
    records = store.read_txids(range(from_txid, topo.last_txid + 1))
    missing = [t for t in range(from_txid, topo.last_txid + 1) if t not in records]
    if missing:
        raise ReplayRefused(f"topology {store.topology!r}: txids {missing} were rotated out of ZooKeeper "
                            "(keep_txids); their runs are unknown: clear them from the Airflow UI instead")
    return [r for _, (r, _) in sorted(records.items())]


def transactions_view(name: str, topo: TopologyRecord, records: list[TxidRecord], *, now: datetime,
                      runs: dict[str, str] | None = None, lag: int | None = None, lag_error: str | None = None,
                      paused: bool | None = None, max_active_runs: int | None = None) -> dict[str, Any]:
    """One topology as the UI's transactions page shows it. ``runs`` maps run ids to Airflow run states: the
    kept txids' runs, and the active runs that own no txid yet, which are shown as "coordinating"; with the DAG's
    ``max_active_runs``, a queued run is named with the runs that hold the slots (``run_slots``)."""
    runs = runs or {}
    committed = topo.committed_txid
    owned = {r.run_id for r in records}
    flying = in_flight(records)
    coordinating = [{"txid": None, "attempt": None, "phase": COORDINATING, "run_id": run_id, "run_state": state}
                    for run_id, state in sorted(runs.items()) if run_id not in owned and state in ("queued", "running")]
    rows = [{**txid_row(r, committed), "run_state": runs.get(r.run_id),
             **(wait_fields(r, committed, now, runs.get(r.run_id)) if r in flying else {})} for r in reversed(records)]
    return {
        "topology": name,
        "paused": paused,
        "committed_txid": committed,
        "last_txid": topo.last_txid,
        "in_flight": coordinating + [row for row in reversed(rows) if row["phase"] not in ("committed", "failed")],
        "failed": failures(records, name),
        "stalled": stalls(name, records, committed, now, runs),
        "run_slots": queued_behind(topo, records, runs, max_active_runs, paused),
        "lag": lag,
        "lag_error": lag_error,
        "commits_per_minute": commits_per_minute(records, now),
        "phase_seconds": phase_seconds(records),
        "txids": rows,
    }

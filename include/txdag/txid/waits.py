"""What a txid in flight waits on, since when, and what an operator can do about it: ``txdag status``, the
transactions page and the commit task's log say the same thing. Pure functions of the ZooKeeper records.

A txid waits on its own task (processing, committing) or on the txid before it (strict commit order). The head
of the line, the first uncommitted txid, is the one worth acting on: when it has sat in one phase for longer than
STALLED_AFTER, its task may have died; Airflow retries it once the task's heartbeat times out, and
``txdag retry`` does it at once (safe: the retry processes a new attempt, and the old one is fenced).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from txdag.zk.records import TxidRecord, TxStatus

# Longer than a healthy txid spends in one phase on the shipped settings (a cold Spark job takes 15-40 s), and
# about Airflow's heartbeat timeout: past it, a phase that has not moved is worth a look.
STALLED_AFTER = timedelta(seconds=60)


def age(at: str, now: datetime) -> timedelta:
    """How long ago ``at`` (an ISO timestamp with a zone, as the records hold) was; never negative."""
    return max(now - datetime.fromisoformat(at), timedelta(0))


def duration(span: timedelta) -> str:
    """``4 min 03 s``, ``12 s``, ``2 h 05 min``: short enough for a table cell."""
    seconds = int(span.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def waits_on(record: TxidRecord, committed_txid: int, run_state: str | None = None) -> str:
    """What ``record`` (a txid in flight) waits on, in a few words; its run queued in Airflow (``run_state``, when
    known) has no task running yet, whatever its phase says (``txdag.txid.slots`` says behind which runs)."""
    if run_state == "queued":
        return "its run to start (queued in Airflow)"
    head = committed_txid + 1
    if record.status is TxStatus.EMITTED:
        return f"its process task (attempt {record.attempt})"
    if record.status is TxStatus.COMMITTING or (record.status is TxStatus.PROCESSED and record.txid == head):
        return f"its commit task (attempt {record.attempt})"
    return f"txid {head} to commit first"


def stalled(record: TxidRecord, committed_txid: int, now: datetime) -> bool:
    """The head of the line, in one phase for longer than STALLED_AFTER."""
    return record.txid == committed_txid + 1 and age(record.updated_at, now) > STALLED_AFTER


def stalled_advice(topology: str, record: TxidRecord, now: datetime, run_state: str | None = None) -> str:
    """The lines an operator reads about a stalled head of the line: what, since when, and the ways out. Its run
    failed in Airflow (``run_state``) while ZooKeeper has it in flight: nothing recorded the failure here;
    ``txdag retry`` clears the failed task."""
    since = duration(age(record.updated_at, now))
    task = "process" if record.status is TxStatus.EMITTED else "commit"
    if run_state == "failed":
        return (f"txid {record.txid} (attempt {record.attempt}, run {record.run_id}) is {record.status.value} here "
                f"since {record.updated_at} ({since}), but its run failed in Airflow and nothing recorded that here "
                f"(its last {task} try killed, a failure callback that could not reach ZooKeeper, or a task cleared "
                f"without its downstream tasks); every later txid commits after it. To go on where it stopped (its "
                f"failed task cleared): txdag retry {topology} {record.txid}; if it is failed here by then, clear its "
                f"commit or replay it (txdag replay {topology} --from {record.txid})")
    return (f"txid {record.txid} (attempt {record.attempt}, run {record.run_id}) has waited on its {task} task for "
            f"{since} (since {record.updated_at}); every later txid commits after it. If that task failed for a "
            f"transient reason, Airflow replays it automatically (its log says when: 'replaying txid {record.txid} "
            f"automatically ... next at ...'); if it died, Airflow retries it once its heartbeat times out "
            f"([scheduler] task_instance_heartbeat_timeout); to retry it now: txdag retry {topology} {record.txid}")


def predecessor_note(topology: str, record: TxidRecord | None, now: datetime) -> str:
    """For a commit that waits on ``record`` (txid - 1): its phase, since when, and, once it is stalled, the
    command that retries it (for the waiting commit task's log)."""
    if record is None:
        return ""
    doing = {TxStatus.EMITTED: "processing", TxStatus.PROCESSED: "processed, waiting to commit",
             TxStatus.COMMITTING: "committing"}.get(record.status, record.status.value)
    waited = age(record.updated_at, now)
    hint = (f"; if its task died: txdag retry {topology} {record.txid}" if waited > STALLED_AFTER else "")
    return (f"; txid {record.txid} is {doing} (attempt {record.attempt}, run {record.run_id}) for "
            f"{duration(waited)}{hint}")

"""Replays that txdag starts itself, from inside a task: the run is cleared as the UI's *Clear* would clear it.

The task asks its supervisor, through Airflow's Execution API (the task's own token, no REST credentials), to
trigger the run with ``reset_dag_run``: the run exists, so the API server clears it (its task instances reset, the
run queued again), exactly what ``TriggerDagRunOperator(reset_dag_run=True)`` does. Its ``coordinate`` then
re-emits the run's txid.

Used by the commit task of a txid that an opaque spout re-emitted with another batch: the later txids planned on
top of the old batch were failed with ``auto_replay`` (``txdag.txid.decisions.automatic_replays``), and once it is
committed their runs are replayed, in txid order, with no operator.
"""

from __future__ import annotations

import logging

from txdag.errors import ServiceUnavailable

log = logging.getLogger("txdag.airflow")


def replay_run(dag_id: str, run_id: str, why: str) -> None:
    """Clear run ``run_id`` of ``dag_id`` from inside a running task; ``why`` becomes the run's note if Airflow
    creates the run afresh (it was deleted). A refusal is ServiceUnavailable: the task's retry asks again."""
    from airflow.sdk.execution_time.comms import ErrorResponse, TriggerDagRun
    from airflow.sdk.execution_time.task_runner import SUPERVISOR_COMMS

    try:
        answer = SUPERVISOR_COMMS.send(TriggerDagRun(dag_id=dag_id, run_id=run_id, reset_dag_run=True, conf={},
                                                     note=why))
    except Exception as exc:  # the supervisor relays the API server's error
        answer = ErrorResponse(detail={"error": f"{type(exc).__name__}: {exc}"})
    if isinstance(answer, ErrorResponse):
        raise ServiceUnavailable(f"dag {dag_id!r}: run {run_id!r} could not be replayed ({why}): Airflow's API "
                                 f"server answered {answer.error} {answer.detail}; the task tries again")
    log.warning("dag=%s: replaying run %s automatically: %s", dag_id, run_id, why)

"""Automatic replay through Airflow's own retries: a retry policy that asks txdag.txid.healing's table.

Airflow 3.3 evaluates a task's ``retry_policy`` in the worker with the exception of the failed try. A transient
failure is retried after the topology's backoff (``retry_delay`` doubled per try, at most ``max_retry_delay``), with
a reason Airflow logs and keeps on the task instance: "replaying txid N automatically, try k of n, next at T, because
..."; a failure that will recur fails at once, so that the failure callback fails the txid with its ways out. A try
that dies without an exception (killed, its heartbeat lost) is retried by the scheduler on the same backoff, from the
task's ``retry_exponential_backoff`` and ``max_retry_delay``, which rendering sets to match.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow.sdk.definitions.retry_policy import RetryDecision, RetryPolicy

from txdag.topology.topology import TransactionalTopology
from txdag.txid.healing import backoff, classify, replaying, will_recur

BACKOFF_MULTIPLIER = 2.0  # the scheduler's own backoff for a try that died without an exception


class TxidRetryPolicy(RetryPolicy):
    """Retries a transient failure with the topology's backoff; fails one that will recur at once."""

    def __init__(self, topology: TransactionalTopology) -> None:
        self.topology = topology

    def evaluate(self, exception: BaseException, try_number: int, max_tries: int,
                 context: Any = None) -> RetryDecision:
        t, verdict = self.topology, classify(exception)
        if not verdict.transient:
            return RetryDecision.fail(will_recur(t.topology_id, verdict))
        delay = backoff(t.retry_delay, t.max_retry_delay, try_number)
        next_at = (datetime.now(UTC) + delay).isoformat(timespec="seconds")
        return RetryDecision.retry(delay, replaying(t.topology_id, txid_of(context), try_number, max_tries, next_at,
                                                    verdict))

    def serialize(self) -> dict[str, Any]:
        return {"__type": type(self).__name__, "topology_id": self.topology.topology_id}


def txid_of(context: Any) -> int | None:
    """The txid of the run (what its coordinate task pushed), None before it has one or without a context."""
    try:
        pushed = context["ti"].xcom_pull(task_ids="coordinate")
    except Exception:  # noqa: BLE001 - the reason only loses its txid; the decision stands
        return None
    return pushed.get("txid") if isinstance(pushed, dict) else None

"""The retry policy every task of a topology carries (Airflow 3.3's retry_policy): a transient failure is retried
after the topology's backoff with the reason an operator reads; one that will recur fails at once."""

from __future__ import annotations

from datetime import timedelta

import pytest

from txdag.errors import ServiceUnavailable

pytestmark = pytest.mark.usefixtures("airflow_home")


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    from txdag.airflow.retries import TxidRetryPolicy
    from txdag.topology.definition import State, TweetsSource
    from txdag.topology.topology import TransactionalTopology

    job = tmp_path_factory.mktemp("job") / "job.py"
    job.write_text("")
    topology = TransactionalTopology("heals", source=TweetsSource(), job=str(job), states=[State("s")],
                                     retry_delay=timedelta(seconds=3), max_retry_delay=timedelta(seconds=20))
    return TxidRetryPolicy(topology)


class TI:
    """The one method of a task instance the policy calls: what the run's coordinate pushed."""

    def __init__(self, pushed):
        self.pushed = pushed

    def xcom_pull(self, task_ids):
        assert task_ids == "coordinate"
        return self.pushed


def test_a_transient_failure_is_retried_after_the_backoff_naming_the_txid(policy) -> None:
    from airflow.sdk.definitions.retry_policy import RetryAction

    decision = policy.evaluate(ServiceUnavailable("Redis down"), 4, 60, {"ti": TI({"txid": 33, "attempt": 2})})
    assert decision.action is RetryAction.RETRY and decision.retry_delay == timedelta(seconds=20)  # 3*2^3 capped
    assert decision.reason.startswith("topology 'heals': replaying txid 33 automatically, try 5 of 61, next at ")
    assert decision.reason.endswith("because a service (Redis, ZooKeeper) was unreachable; nothing to do unless the "
                                    "cause lasts")
    first = policy.evaluate(ServiceUnavailable("Redis down"), 1, 60, None)
    assert first.retry_delay == timedelta(seconds=3) and "this run's coordinate" in first.reason


def test_a_failure_that_will_recur_fails_at_once(policy) -> None:
    from airflow.sdk.definitions.retry_policy import RetryAction

    decision = policy.evaluate(KeyError("user"), 1, 60, {"ti": TI(None)})
    assert decision.action is RetryAction.FAIL
    assert decision.reason == ("not retried: the task raised KeyError: it will raise again on the same batch "
                               "(topology 'heals')")


def test_every_task_of_a_rendered_topology_carries_the_policy_and_the_backoff(policy) -> None:
    from txdag.airflow.rendering import render
    from txdag.airflow.retries import BACKOFF_MULTIPLIER, TxidRetryPolicy

    dag = render(policy.topology)
    for task in dag.tasks:
        assert isinstance(task.retry_policy, TxidRetryPolicy), task.task_id
        assert task.retries >= 60 and task.retry_exponential_backoff == BACKOFF_MULTIPLIER
        assert task.max_retry_delay == timedelta(seconds=20) and task.retry_delay == timedelta(seconds=3)


def test_a_txids_later_tasks_rank_first_for_workers_and_the_pool(policy) -> None:
    """Weights as Airflow's scheduler computes them (weight_rule upstream): a commit, which the next txids' process
    tasks wait for, goes before a process, which goes before a coordinate that would begin a new txid."""
    from types import SimpleNamespace

    from airflow.task.priority_strategy import validate_and_load_priority_weight_strategy

    from txdag.airflow.rendering import render

    dag = render(policy.topology)
    weights = {t.task_id: validate_and_load_priority_weight_strategy(t.weight_rule).get_weight(SimpleNamespace(task=t))
               for t in dag.tasks}
    assert weights == {"coordinate": 1, "process": 2, "commit": 3}

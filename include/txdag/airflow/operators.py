"""The three tasks of a txid's DAG run: coordinate, process (spark-submit, or warm on Spark Connect), commit.

Waiting never holds a worker or the topology's pool slot: coordinate and commit raise
AirflowRescheduleException and come back later. Every log line names the topology, the txid and the attempt.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperator, Variable
from airflow.sdk.exceptions import AirflowFailException, AirflowRescheduleException, AirflowSkipException

from txdag.airflow.connections import require_connections
from txdag.airflow.runtime import TopologyRuntime, emission_to_xcom, tx_from_xcom
from txdag.claims import ReemitError, claim_attempt
from txdag.commit import commit_transaction
from txdag.coordinator import Busy, Emission, NotReady, Wait
from txdag.errors import CascadeError, StaleAttemptError
from txdag.faults import ALLOWED_VAR, FAULTS_VAR, crash_if_requested
from txdag.topology import TransactionalTopology

FAULTS_VARIABLE = "txdag_faults"  # test hook, see txdag.faults; honoured only where TXDAG_FAULTS_ALLOWED=1


def _later(seconds: float) -> AirflowRescheduleException:
    return AirflowRescheduleException(datetime.now(UTC) + timedelta(seconds=seconds))


class CoordinateOperator(BaseOperator):
    """Allocates this run's txid (or re-emits it, attempt + 1) and pushes the batch metadata to XCom."""

    ui_color = "#e8f0fe"

    def __init__(self, *, topology: TransactionalTopology, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.topology = topology

    def execute(self, context: Any) -> dict[str, Any]:
        run_id, t = context["run_id"], self.topology
        _arm_faults()
        require_connections(t)  # first: a missing connection is named, with its topology and how to add it
        with TopologyRuntime(t) as rt:
            outcome = rt.coordinator.coordinate(run_id)
            if isinstance(outcome, Emission):
                size = rt.coordinator.spout.batch_size(outcome.metadata) if outcome.metadata else 0
                self.log.info(
                    "topology=%s txid=%s attempt=%s: %s, batch of %s tuples, metadata %s", t.topology_id,
                    outcome.tx.txid, outcome.tx.attempt,
                    "replay of a committed txid (its commit is a no-op)" if outcome.already_committed
                    else "replay" if outcome.replay else "new txid", size, outcome.metadata)
                return emission_to_xcom(outcome, size)
            owns_txid = rt.coordinator.store.txid_of_run(run_id) is not None
        if isinstance(outcome, NotReady) or (isinstance(outcome, Wait) and not owns_txid):
            self.log.info("topology=%s run=%s: skipped, no txid consumed: %s", t.topology_id, run_id, outcome.reason)
            raise AirflowSkipException(outcome.reason)
        assert isinstance(outcome, Busy | Wait)
        self.log.info("topology=%s run=%s: waiting (%s); trying again in %ss", t.topology_id, run_id,
                      outcome.reason, t.commit_poke_interval)
        raise _later(t.commit_poke_interval)


def process_txid(task: BaseOperator, context: Any, run_job: Callable[[TopologyRuntime, Emission], None]
                 ) -> dict[str, Any]:
    """The process task of either mode: claim this try's attempt, ``run_job`` (it stages and seals), mark it
    processed. Each try processes an attempt of its own: a retry finds the attempt claimed by the failed try
    and has the txid re-emitted (attempt + 1, the same batch for a transactional spout) before running the job.
    """
    ti, run_id, t = context["ti"], context["run_id"], task.topology  # type: ignore[attr-defined]
    emitted = ti.xcom_pull(task_ids="coordinate")
    tx = tx_from_xcom(emitted, "coordinate")
    _arm_faults()
    if emitted["already_committed"]:
        task.log.info("topology=%s txid=%s attempt=%s: committed already; nothing to process",
                      t.topology_id, tx.txid, tx.attempt)
        return emitted
    with TopologyRuntime(t) as rt:
        if t.key_values:  # a stateful step reads its state as of txid - 1: that txid must be committed
            committed = rt.coordinator.store.read_topology()[0].committed_txid
            if committed < tx.txid - 1:
                task.log.info("topology=%s txid=%s attempt=%s: its key-value states are read as of txid %s, which "
                              "is not committed yet (committed: %s); checking again in %ss", t.topology_id, tx.txid,
                              tx.attempt, tx.txid - 1, committed, t.commit_poke_interval)
                raise _later(t.commit_poke_interval)
        try:
            emission = claim_attempt(rt.coordinator, rt.staging, run_id,
                                     Emission(tx, emitted["metadata"], emitted["replay"]),
                                     owner=f"{run_id} try {ti.try_number}")
        except ReemitError as exc:
            raise AirflowFailException(str(exc)) from None
        tx = emission.tx
        task.log.info("topology=%s txid=%s attempt=%s: processing %s tuples with %s (%s mode)", t.topology_id,
                      tx.txid, tx.attempt, emitted["batch_size"], t.job_path, t.spark_mode)
        run_job(rt, emission)
        if not rt.coordinator.mark_processed(tx):
            raise AirflowFailException(
                f"topology {t.topology_id!r} txid {tx.txid} attempt {tx.attempt}: processed, but the txid "
                f"moved on meanwhile (re-emitted or failed); this result is dropped: see the coordinate log")
        crash_if_requested("staged", t.topology_id, tx)
    task.log.info("topology=%s txid=%s attempt=%s: processed and staged", t.topology_id, tx.txid, tx.attempt)
    return {**emitted, "txid": tx.txid, "attempt": tx.attempt, "metadata": emission.metadata}


class ProcessOperator(SparkSubmitOperator):
    """Cold mode: ``spark-submit`` of the topology's job for this run's TransactionAttempt (see process_txid)."""

    ui_color = "#fdf2e9"

    def __init__(self, *, topology: TransactionalTopology, **kwargs: Any) -> None:
        conf = {"spark.ui.enabled": "false", **topology.spark_conf}
        super().__init__(application=topology.job_path, conn_id=topology.spark_conn_id, conf=conf,
                         name=f"txdag-{topology.topology_id}", **kwargs)
        self.topology = topology

    def execute(self, context: Any) -> dict[str, Any]:
        def submit(rt: TopologyRuntime, emission: Emission) -> None:
            self.application_args = ["--job", rt.job_spec(emission).to_json()]
            self.env_vars = {**(self.env_vars or {}), **rt.job_env(), **self._local_env(), **_faults()}
            super(ProcessOperator, self).execute(context)

        return process_txid(self, context, submit)

    def _local_env(self) -> dict[str, str]:
        """In local mode the job's driver and workers use the Python that runs Airflow (it has txdag)."""
        master = str(self._get_hook()._connection.get("master", ""))
        return {"PYSPARK_PYTHON": sys.executable} if master.startswith("local") else {}


class WarmProcessOperator(BaseOperator):
    """Warm mode: the job runs in this task against the Spark Connect server of ``spark_connect_conn_id``,
    which stays up across txids (no JVM start, no cold first job per txid)."""

    ui_color = "#fdebd0"

    def __init__(self, *, topology: TransactionalTopology, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.topology = topology

    def execute(self, context: Any) -> dict[str, Any]:
        def run_warm(rt: TopologyRuntime, emission: Emission) -> None:
            from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

            from txdag.spark.connect import run_connected

            spec = rt.job_spec(emission)
            clients = {c: rt.redis(c) for c in {spec.redis_conn_id, *spec.source.conn_ids()}}
            url = SparkConnectHook(self.topology.spark_connect_conn_id).get_connection_url()
            result = run_connected(spec, self.topology.job_path, clients, url, rt.kv_configs)
            self.log.info("%s", result.summary())

        return process_txid(self, context, run_warm)


def _faults() -> dict[str, str]:
    """The fault plan of the Airflow Variable, for the Spark job's environment (the job checks the catch)."""
    value = Variable.get(FAULTS_VARIABLE, default="")
    return {FAULTS_VAR: value} if value else {}


def _arm_faults() -> None:
    """Core code (coordinator, commit) reads TXDAG_FAULTS from the environment of this task's own process."""
    if os.environ.get(ALLOWED_VAR) == "1":
        os.environ.update(_faults())


class CommitOperator(BaseOperator):
    """Commits this run's txid once txid - 1 is committed: the staged partials into the states, atomically."""

    ui_color = "#e6f4ea"

    def __init__(self, *, topology: TransactionalTopology, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.topology = topology

    def execute(self, context: Any) -> dict[str, Any]:
        t = self.topology
        processed = context["ti"].xcom_pull(task_ids="process")
        tx = tx_from_xcom(processed, "process")
        _arm_faults()
        with TopologyRuntime(t) as rt:
            try:
                outcome = commit_transaction(rt.coordinator, rt.staging, rt.client, tx, rt.states,
                                             marker_key=t.marker_key, load_job=rt.load_job,
                                             key_values=rt.kv_targets)
            except (CascadeError, StaleAttemptError) as exc:
                raise AirflowFailException(str(exc)) from None
        if outcome.status == "waiting":
            self.log.info("topology=%s txid=%s attempt=%s: %s; checking again in %ss", t.topology_id, tx.txid,
                          tx.attempt, outcome.reason, t.commit_poke_interval)
            raise _later(t.commit_poke_interval)
        self.log.info("topology=%s txid=%s attempt=%s: %s (%s keys written, %s already held this txid) %s",
                      t.topology_id, tx.txid, tx.attempt, outcome.status, outcome.applied, outcome.skipped,
                      outcome.reason)
        return {"txid": tx.txid, "attempt": tx.attempt, "status": outcome.status, "applied": outcome.applied}


def fail_txid(context: Any) -> None:
    """on_failure_callback of process and commit: the txid failed for good, so it and later txids fail
    (Storm's cascade); clearing its run with its future runs replays them."""
    task, run_id = context["ti"].task, context["run_id"]
    topology: TransactionalTopology = task.topology
    error = str(context.get("exception") or "task failed")
    with TopologyRuntime(topology) as rt:
        store = rt.coordinator.store
        txid = store.txid_of_run(run_id)
        got = store.read_txid(txid) if txid is not None else None
        if got is None:
            return
        tx = got[0].tx  # the current attempt: a retry may have re-emitted the txid
        failed = rt.coordinator.fail(tx, f"{task.task_id} failed: {error}")
    task.log.warning("topology=%s txid=%s attempt=%s: marked failed with later txids %s; clear run %s with its "
                     "future runs (or: txdag replay %s --from %s) to replay them", topology.topology_id, tx.txid,
                     tx.attempt, failed, run_id, topology.topology_id, tx.txid)

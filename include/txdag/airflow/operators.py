"""The three tasks of a txid's DAG run: coordinate, process (spark-submit, or warm on Spark Connect), commit.

Each task runs one step of ``txdag.protocol.steps`` and only turns its outcome into Airflow's terms: a skip
(the run consumes no txid), a reschedule or a deferral (waiting never holds a worker or the topology's pool slot; only
a process task, its txid staged, waits a few seconds more for txid - 1's commit, holding its worker), or a
failure whose message names the topology, the txid, the attempt and what to do. Every log line names the
topology, the txid and the attempt.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperator, Variable
from airflow.sdk.exceptions import (
    AirflowException,
    AirflowFailException,
    AirflowRescheduleException,
    AirflowSkipException,
    TaskDeferred,
)

from txdag.airflow import metrics
from txdag.airflow.assets import announce
from txdag.airflow.awaited import look_at, run_state
from txdag.airflow.connections import require_connections
from txdag.airflow.lineage import ProcessLineage, TxidLineage, datasets, lineage_enabled
from txdag.airflow.links import TxidLink, push_link
from txdag.airflow.replays import replay_run
from txdag.airflow.runtime import TopologyRuntime, emission_to_xcom, tx_from_xcom
from txdag.airflow.triggers import POLL_SECONDS, TxidSettled, settled
from txdag.errors import SourceUnavailable
from txdag.faults import ALLOWED_VAR, FAULTS_VAR
from txdag.protocol import (
    AlreadyCommitted,
    Busy,
    CommitStepOutcome,
    Committed,
    CoordinateOutcome,
    Emission,
    Halted,
    NotReady,
    OwnerChanged,
    Processed,
    ProcessOutcome,
    Refused,
    SourceDown,
    Superseded,
    Wait,
    steps,
)
from txdag.topology.owner import Owner
from txdag.topology.topology import TransactionalTopology
from txdag.txid.failure import JobFailed, error_name, job_failure, job_line, with_missing_module
from txdag.txid.replays import AGAIN
from txdag.txid.waits import predecessor_note

if TYPE_CHECKING:
    from redis import Redis

    from txdag.spark.runner import JobResult
    from txdag.state.kv import ProviderConfig
    from txdag.topology.definition import JobSpec
    from txdag.zk import TransactionStore

PREDECESSOR_WAIT = 15.0  # seconds a process task, its txid staged, holds its worker at most waiting for txid - 1
FAULTS_VARIABLE = "txdag_faults"  # test hook, see txdag.faults; honoured only where TXDAG_FAULTS_ALLOWED=1


def _later(seconds: float) -> AirflowRescheduleException:
    return AirflowRescheduleException(datetime.now(UTC) + timedelta(seconds=seconds))


class CoordinateOperator(BaseOperator):
    """Allocates this run's txid (or re-emits it, attempt + 1) and pushes the batch metadata to XCom."""

    ui_color = "#e8f0fe"
    operator_extra_links = (TxidLink(),)

    def __init__(self, *, topology: TransactionalTopology, dag_file: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.topology = topology
        self.dag_file = dag_file  # where the definition comes from, recorded with the topology's owner

    def execute(self, context: Any) -> dict[str, Any]:
        run_id, t = context["run_id"], self.topology
        _arm_faults()
        require_connections(t)  # first: a missing connection is named, with its topology and how to add it
        with TopologyRuntime(t) as rt:
            outcome = steps.coordinate(rt, run_id, Owner.of(t, self.dag_file))
            if isinstance(outcome, Busy | Wait) and outcome.waiting_on is not None:
                outcome = self._unless_stuck(rt, context, outcome)
            if isinstance(outcome, Emission):
                push_link(context, t.topology_id, outcome.tx.txid)
                size = rt.coordinator.spout.batch_size(outcome.metadata) if outcome.metadata else 0
                self.log.info(
                    "topology=%s txid=%s attempt=%s: %s, batch of %s tuples, metadata %s%s", t.topology_id,
                    outcome.tx.txid, outcome.tx.attempt,
                    "replay of a committed txid (its commit is a no-op)" if outcome.already_committed
                    else "replay" if outcome.replay else "new txid", "an uncounted number of" if size is None else size,
                    outcome.metadata,
                    f"; partitions {list(outcome.unavailable_partitions)} unavailable, their entries go into a later "
                    "batch" if outcome.unavailable_partitions else "")
                return emission_to_xcom(outcome, size)
        raise coordinate_refusal(self, t, run_id, outcome)

    def resume(self, context: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Back from waiting for a place among max_active_transactions (TxidSettled fired): coordinate again."""
        return self.execute(context)

    def _unless_stuck(self, rt: TopologyRuntime, context: Any, waits: Busy | Wait) -> CoordinateOutcome:
        """``waits``, unless the run of the txid it waits on says otherwise (txdag.airflow.awaited). Waiting for a
        place: that run queued behind max_active_runs (this run gives its slot up: skipped, no txid consumed), or
        failed without ZooKeeper knowing (recorded now; coordinating again refuses the run, naming the failed txid).
        Refused behind a failed txid: that txid's run queued or running again (being replayed): skipped, not red."""
        t, run_id, behind = self.topology, context["run_id"], waits.waiting_on
        if isinstance(waits, Wait) and waits.replay:  # a replay waiting for its own predecessor's replay
            return waits
        assert behind is not None
        seen = look_at(rt, context, self.dag_id, behind)
        if seen is None:
            return waits
        if isinstance(waits, Wait) and seen[1] in AGAIN:
            raise AirflowSkipException(
                f"topology {t.topology_id!r}: txid {behind} is being replayed (its run {seen[0]!r} is {seen[1]}); "
                f"run {run_id!r} consumed no txid; a later run emits the next batch")
        if isinstance(waits, Busy) and seen[1] == "queued":
            raise AirflowSkipException(
                f"topology {t.topology_id!r}: run {run_id!r} gives its run slot to run {seen[0]!r} of txid "
                f"{behind}, queued behind max_active_runs (a replay): it consumed no txid; a later run emits the "
                "next batch")
        if isinstance(waits, Busy) and seen[1] == "failed":
            return steps.coordinate(rt, run_id, Owner.of(t, self.dag_file))
        return waits


def coordinate_refusal(task: BaseOperator, t: TransactionalTopology, run_id: str,
                       outcome: CoordinateOutcome) -> BaseException:
    """What a run without an emission raises: a skip when the spout has nothing to read (no txid consumed), a
    deferral while max_active_transactions txids are uncommitted (TxidSettled resumes it once the oldest is
    committed or failed), a reschedule when it waits otherwise (the lock, its own failed predecessor), a failure (that
    Airflow retries) when the source is down, a failure without retries when the definition is not the topology's
    owner (it names what changed and the command that accepts it) or when an earlier txid is failed: that run is
    red in the UI, never a green skip, and its message names the failed txid, its error and the ways out. It owns
    no txid, so fail_txid (process and commit only) has nothing to fail for it."""
    assert not isinstance(outcome, Emission)
    if isinstance(outcome, Halted):
        task.log.error("topology=%s run=%s: halted: %s", t.topology_id, run_id, outcome.reason)
        metrics.send("halts", t.topology_id)
        return AirflowFailException(outcome.reason)
    if isinstance(outcome, SourceDown):
        return SourceUnavailable(outcome.reason)
    if isinstance(outcome, OwnerChanged):  # retrying cannot help: an operator accepts the change or undoes it
        return AirflowFailException(outcome.reason)
    if isinstance(outcome, Wait) and not outcome.replay:  # refused a new txid: txid waiting_on is failed
        task.log.error("topology=%s run=%s: %s", t.topology_id, run_id, outcome.reason)
        return AirflowFailException(outcome.reason)
    if isinstance(outcome, NotReady):
        task.log.info("topology=%s run=%s: skipped, no txid consumed: %s", t.topology_id, run_id, outcome.reason)
        return AirflowSkipException(outcome.reason)
    assert isinstance(outcome, Busy | Wait)
    if isinstance(outcome, Busy) and outcome.waiting_on is not None:
        task.log.info("topology=%s run=%s: waiting (%s); deferred: back once txid %s is committed or failed, at the "
                      "latest in %gs", t.topology_id, run_id, outcome.reason, outcome.waiting_on,
                      t.commit_poke_interval)
        return TaskDeferred(trigger=TxidSettled(t.topology_id, t.zookeeper_conn_id, outcome.waiting_on,
                                                t.commit_poke_interval), method_name="resume")
    task.log.info("topology=%s run=%s: waiting (%s); trying again in %ss", t.topology_id, run_id,
                  outcome.reason, t.commit_poke_interval)
    return _later(t.commit_poke_interval)


def process_txid(task: BaseOperator, context: Any, run_job: Callable[[TopologyRuntime, Emission], None]
                 ) -> dict[str, Any]:
    """The process task of either mode: the process step with ``run_job`` as its job (it stages and seals). Each
    try processes an attempt of its own: a retry finds the attempt claimed by the failed try and has the txid
    re-emitted (attempt + 1, the same batch for a transactional spout) before running the job.
    """
    ti, run_id, t = context["ti"], context["run_id"], task.topology  # type: ignore[attr-defined]
    task._stop_waiting = threading.Event()  # each try's own, set by on_kill: a kill during the job skips the wait
    emitted = ti.xcom_pull(task_ids="coordinate")
    tx = tx_from_xcom(emitted, "coordinate")
    push_link(context, t.topology_id, tx.txid)
    _arm_faults()
    emission = Emission(tx, emitted["metadata"], emitted["replay"], already_committed=emitted["already_committed"])

    def job(current: Emission) -> None:
        task.log.info("topology=%s txid=%s attempt=%s: processing %s tuples with %s (%s mode)", t.topology_id,
                      current.tx.txid, current.tx.attempt, emitted["batch_size"], t.job_path, t.spark_mode)
        task.txid_lineage = recorded_lineage(task, t, rt, emitted["batch_size"])
        run_job(rt, current)

    with TopologyRuntime(t) as rt:
        outcome = steps.process(rt, run_id, emission, job, owner=f"{run_id} try {ti.try_number}",
                                definition=Owner.of(t, getattr(task, "dag_file", None)))
        if isinstance(outcome, Processed) and outcome.tx.txid > 1:
            before_the_commit(task, rt, outcome.tx.txid)
    return process_result(task, t, tx, emitted, outcome)


def before_the_commit(task: BaseOperator, rt: TopologyRuntime, txid: int) -> None:
    """The end of a process task whose txid is staged: it waits for txid - 1 (await_settled), unless on_kill was
    called, during the wait or before it. Only a speed-up: a ZooKeeper that fails it here leaves the wait to the
    commit task, and the staged txid stands."""
    t, previous = rt.topology, txid - 1
    stop: threading.Event = task._stop_waiting  # type: ignore[attr-defined]  # process_txid arms it, on_kill sets it
    if stop.is_set():
        task.log.info("topology=%s txid=%s: killed; not waiting for txid %s", t.topology_id, txid, previous)
        return
    try:
        store = rt.clients.store(t.topology_id, t.zookeeper_conn_id)
        waited, done = await_settled(store, previous, min(t.commit_poke_interval, PREDECESSOR_WAIT), stop)
        if stop.is_set() and not done:
            how = "not yet: killed while waiting"
        elif waited < POLL_SECONDS:  # settled at the first read, or no time to wait: nothing to report
            return
        elif done:
            how = "it did"
        else:
            found = store.read_txid(previous)
            note = predecessor_note(t.topology_id, found[0] if found else None, datetime.now(UTC))
            how = f"not yet: the commit task will wait for it{note}"
    except Exception as exc:  # noqa: BLE001 - the commit task reads txid - 1 itself and names the service
        task.log.warning("topology=%s txid=%s: not waiting for txid %s here (%s: %s); the commit task will",
                         t.topology_id, txid, previous, type(exc).__name__, exc)
        return
    task.log.info("topology=%s txid=%s: waited %.2fs for txid %s to commit or fail (%s)", t.topology_id, txid,
                  waited, previous, how)


def stop_waiting(task: BaseOperator) -> None:
    """on_kill's part for the process operators: a process task killed (cleared, marked failed, timed out) while
    it waits for txid - 1 ends now instead of at Airflow's SIGKILL."""
    stop = getattr(task, "_stop_waiting", None)
    if stop is not None:
        stop.set()


def await_settled(store: TransactionStore, txid: int, limit: float, stop: threading.Event | None = None
                  ) -> tuple[float, bool]:
    """Waits up to ``limit`` seconds (or until ``stop`` is set) for ``txid`` to be committed or failed: the seconds
    waited, and whether it is.

    A process task waits so for txid - 1 before it ends: its commit then finds txid - 1 settled. A commit that does
    not find it so defers, which lasts at least 7 s, and with 2 txids in flight every later commit would defer too
    (docs/performance.md, commits that wait for their predecessor). This wait holds a worker, never the topology's
    pool slot that txid - 1's commit needs."""
    stop = stop or threading.Event()
    started = time.monotonic()
    while not (done := settled(store, txid)) and time.monotonic() - started < limit and not stop.is_set():
        time.sleep(POLL_SECONDS)  # not stop.wait: on_kill sets it from a signal handler, which must not wait for
        #                           the lock the event's wait holds in this same thread
    return time.monotonic() - started, done


def process_result(task: BaseOperator, t: TransactionalTopology, tx: Any, emitted: dict[str, Any],
                   outcome: ProcessOutcome) -> dict[str, Any]:
    """The process task's XCom, or what it raises: a deferral while it waits for its key-value predecessor
    (TxidSettled resumes it once txid - 1 is committed), a reschedule while the definition differs from the
    topology's owner, a failure without retries when its attempt was superseded (a retry could only drop its
    result again)."""
    if isinstance(outcome, AlreadyCommitted):
        task.log.info("topology=%s txid=%s attempt=%s: committed already; nothing to process",
                      t.topology_id, tx.txid, tx.attempt)
        return emitted
    if isinstance(outcome, Wait):
        _wait_log(task, t, tx, outcome, f"deferred: back once txid {outcome.waiting_on} is committed, at the latest "
                  f"in {t.commit_poke_interval:g}s")
        task.defer(trigger=TxidSettled(t.topology_id, t.zookeeper_conn_id, outcome.waiting_on,
                                       t.commit_poke_interval, committed_only=True), method_name="resume")
    if isinstance(outcome, OwnerChanged):
        _wait_log(task, t, tx, outcome)
        raise _later(t.commit_poke_interval)
    if not isinstance(outcome, Processed):
        raise AirflowFailException(outcome.reason)
    done = outcome.tx
    task.log.info("topology=%s txid=%s attempt=%s: processed and staged", t.topology_id, done.txid, done.attempt)
    return {**emitted, "txid": done.txid, "attempt": done.attempt, "metadata": outcome.emission.metadata}


# What cold mode adds to a topology's spark_conf (which may set its own):
# - the driver JVM lives for one txid (10-30 s): compiling with the C1 compiler only starts it faster and costs less
#   CPU (tweets_analytics, 20,000 tweets, local[*]: 10.8 s against 13.1 s per spark-submit, median of 6, CPU 1.6x
#   less); executors on a cluster keep Java's default;
# - a stateful step's output is cached after its repartition by key, and Spark does not let adaptive execution
#   coalesce a cached plan's 200 shuffle partitions by default: 200 Python tasks for a batch of a few keys, ~10 s
#   per txid; allowed, they coalesce (a 40-row repartition + mapInArrow + cache: 6.5 s -> 0.3 s).
COLD_CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
}


def recorded_lineage(task: BaseOperator, t: TransactionalTopology, rt: TopologyRuntime, batch_size: int | None
                     ) -> TxidLineage | None:
    """The txid's lineage (txdag.airflow.lineage), from connections the job resolves anyway; lineage never fails a
    txid: what cannot be named is logged and left out. None when no OpenLineage is configured."""
    if not lineage_enabled():
        return None
    try:
        inputs, outputs = datasets(t, lambda c: rt.clients.redis_settings(c).url, rt.clients.kafka_config)
    except Exception as exc:
        task.log.warning("topology=%s: no OpenLineage datasets: %s: %s", t.topology_id, type(exc).__name__, exc)
        return None
    return TxidLineage(inputs, outputs, batch_size)


class ProcessOperator(SparkSubmitOperator, ProcessLineage):
    """Cold mode: ``spark-submit`` of the topology's job for this run's TransactionAttempt (see process_txid)."""

    ui_color = "#fdf2e9"
    operator_extra_links = (*SparkSubmitOperator.operator_extra_links, TxidLink())

    def __init__(self, *, topology: TransactionalTopology, dag_file: str | None = None, **kwargs: Any) -> None:
        conf = {**COLD_CONF, **topology.spark_conf}
        super().__init__(application=topology.job_path, conn_id=topology.spark_conn_id, conf=conf,
                         name=f"txdag-{topology.topology_id}", **kwargs)
        self.topology, self.dag_file = topology, dag_file

    # Airflow pushes whatever execute returns to XCom (BaseOperator.execute returns Any); SparkSubmitOperator's
    # says None because it returns nothing, and this one returns the batch the commit task reads.
    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]
        def submit(rt: TopologyRuntime, emission: Emission) -> None:
            self.application_args = ["--job", rt.job_spec(emission).to_json()]
            self.env_vars = {**(self.env_vars or {}), **rt.job_env(), **self._local_env(), **_faults()}
            self.conf = {**self._driver_conf(), **(self.conf or {})}
            try:
                super(ProcessOperator, self).execute(context)
            except AirflowException as exc:
                raise submit_failure(self.topology.topology_id, emission.tx, exc) from exc

        return process_txid(self, context, submit)

    def on_kill(self) -> None:
        stop_waiting(self)
        super().on_kill()

    def resume(self, context: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Back from waiting on its key-value predecessor (TxidSettled fired): run the process step again."""
        return self.execute(context)

    def _local_env(self) -> dict[str, str]:
        """In local mode the job's driver and workers use the Python that runs Airflow (it has txdag)."""
        master = str(self._get_hook()._connection.get("master", ""))
        return {"PYSPARK_PYTHON": sys.executable} if master.startswith("local") else {}

    def _driver_conf(self) -> dict[str, str]:
        """On a cluster in client mode the driver runs here: on the Python that runs Airflow (it has txdag), not on
        the executors' (``spark.pyspark.python``, which may have none: ``txdag pyfiles`` ships it to them)."""
        connection = self._get_hook()._connection
        master, mode = str(connection.get("master", "")), connection.get("deploy_mode") or "client"
        return {} if master.startswith("local") or mode != "client" else {"spark.pyspark.driver.python": sys.executable}


class WarmProcessOperator(BaseOperator, ProcessLineage):
    """Warm mode: the job runs in this task against the Spark Connect server of ``spark_connect_conn_id``,
    which stays up across txids (no JVM start, no cold first job per txid)."""

    ui_color = "#fdebd0"
    operator_extra_links = (TxidLink(),)

    def __init__(self, *, topology: TransactionalTopology, dag_file: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.topology, self.dag_file = topology, dag_file
        self._running: tuple[str, Any] | None = None  # the session URL and attempt of the job under way

    def execute(self, context: Any) -> dict[str, Any]:
        def run_warm(rt: TopologyRuntime, emission: Emission) -> None:
            started, preloaded = time.perf_counter(), "txdag.spark.connect" in sys.modules
            from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

            import txdag.spark.connect  # noqa: F401  (timed: the Connect client's import)

            imported = time.perf_counter() - started
            if preloaded:
                self.log.info("the Spark Connect client was imported before this task, by the process it was forked "
                              "from (txdag.airflow.preload, config/airflow_local_settings.py)")

            spec = rt.job_spec(emission)
            clients = {c: rt.clients.redis(c) for c in {spec.redis_conn_id, *spec.source.conn_ids()}}
            url = SparkConnectHook(self.topology.spark_connect_conn_id).get_connection_url()
            try:
                result = self.run_job(spec, clients, url, rt.kv_configs, rt.clients.kafka_configs(spec.source))
            except Exception as exc:
                raise warm_failure(self.topology.topology_id, emission.tx, exc) from exc
            self.log.info("%s", result.timed("import", imported).summary())
            if self.txid_lineage is not None:  # what the job staged, and the Spark job it ran as
                self.txid_lineage.staged = dict(result.partials)
                self.txid_lineage.query = (txdag.spark.connect.job_tag(spec.topology, spec.tx),
                                           txdag.spark.connect.server_address(url))

        return process_txid(self, context, run_warm)

    def run_job(self, spec: JobSpec, clients: Mapping[str, Redis], url: str,
                kv_configs: Mapping[str, ProviderConfig] | None = None,
                kafka_configs: Mapping[str, Mapping[str, Any]] | None = None) -> JobResult:
        """run_connected, with its session kept for on_kill until the job returns or raises an Exception; an
        execution_timeout (a BaseException) keeps it, since Airflow calls on_kill after the timeout unwound."""
        from txdag.spark.connect import run_connected

        def started(session: str) -> None:
            self._running = (session, spec.tx)

        try:
            result = run_connected(spec, self.topology.job_path, clients, url, kv_configs, self.topology.spark_conf,
                                   kafka_configs=kafka_configs, on_session=started)
        except Exception:
            self._running = None
            raise
        self._running = None
        return result

    def on_kill(self) -> None:
        """Killed (SIGTERM, execution_timeout) while its job runs: the job's running Spark operations are
        interrupted, so that the shared server does not run them to their end for nobody (their writes would be
        fenced anyway). A kill between two operations finds none running: the next one, started before Airflow's
        SIGKILL (5 s later), runs until it ends or the server drops it (its detached timeout). Killed while it waits
        for txid - 1, after its job: it stops waiting."""
        stop_waiting(self)
        if self._running is None:
            return
        session, tx = self._running
        where = f"topology={self.topology.topology_id} txid={tx.txid} attempt={tx.attempt}"
        try:
            from txdag.spark.connect import interrupt_job, job_tag

            stopped = interrupt_job(session, job_tag(self.topology.topology_id, tx))
        except Exception as exc:  # a kill must not fail on the way out; the server ends the job when it finishes
            self.log.warning("%s: killed; could not interrupt its Spark job (%s: %s): it runs on to its end on the "
                             "Spark Connect server, its writes fenced", where, type(exc).__name__, exc)
            return
        self.log.warning("%s: killed; interrupted its Spark job's %d running operation(s) %s", where, len(stopped),
                         stopped)

    def resume(self, context: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Back from waiting on its key-value predecessor (TxidSettled fired): run the process step again."""
        return self.execute(context)


def submit_failure(topology: str, tx: Any, exc: BaseException) -> JobFailed:
    """txdag's error for a failed spark-submit: the job's own ``txdag job failed:`` line, read from the output that
    the provider's exception carries (its last lines); the exception itself, with the command and the driver's
    output, stays chained behind it in the task log."""
    output = str(exc)
    said = job_line(output)
    return JobFailed(job_failure(topology, tx, said, output), error_name(said), output)


def warm_failure(topology: str, tx: Any, exc: BaseException) -> JobFailed:
    """The same shape as cold mode's: txdag's message first, the job's exception chained behind it."""
    return JobFailed(job_failure(topology, tx, f"{type(exc).__name__}: {with_missing_module(str(exc))}"),
                     type(exc).__name__, str(exc))


def _faults() -> dict[str, str]:
    """The fault plan of the Airflow Variable, for the Spark job's environment (the job checks the catch)."""
    value = Variable.get(FAULTS_VARIABLE, default="")
    return {FAULTS_VAR: value} if value else {}


def _arm_faults() -> None:
    """Core code (coordinator, commit) reads TXDAG_FAULTS from the environment of this task's own process."""
    if os.environ.get(ALLOWED_VAR) == "1":
        os.environ.update(_faults())


class CommitOperator(BaseOperator):
    """Commits this run's txid once txid - 1 is committed: the staged partials into the states, atomically; then
    updates the states' assets (txdag.airflow.assets), unless the txid was committed already."""

    ui_color = "#e6f4ea"
    operator_extra_links = (TxidLink(),)

    def __init__(self, *, topology: TransactionalTopology, dag_file: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.topology, self.dag_file = topology, dag_file

    def execute(self, context: Any) -> dict[str, Any]:
        t = self.topology
        processed = context["ti"].xcom_pull(task_ids="process")
        tx = tx_from_xcom(processed, "process")
        push_link(context, t.topology_id, tx.txid)
        _arm_faults()
        with TopologyRuntime(t) as rt:
            outcome = steps.commit(rt, tx, Owner.of(t, self.dag_file))
            if isinstance(outcome, Wait):  # its predecessor's run failed unrecorded: record it, then the cascade
                seen = look_at(rt, context, self.dag_id, outcome.waiting_on)
                if seen is not None and seen[1] == "failed":
                    outcome = steps.commit(rt, tx, Owner.of(t, self.dag_file))
            if isinstance(outcome, Refused) and outcome.failed_txid not in (None, tx.txid):
                outcome = behind_a_replay(rt, context, self.dag_id, outcome)
            if isinstance(outcome, Committed):  # first: a try that dies later is retried as AlreadyCommitted
                metrics.committed(t.topology_id, tx.txid, outcome.applied, outcome.staged_bytes)
            announce(context, t, outcome)  # before anything below can fail the try: its retry would find it committed
            if isinstance(outcome, Committed | AlreadyCommitted):
                for later in rt.coordinator.automatic_replays(tx.txid):
                    if run_state(context, self.dag_id, later.run_id) in AGAIN:  # an operator's replay runs it
                        continue
                    replay_run(self.dag_id, later.run_id, f"txdag: txid {later.txid} re-emitted automatically after "
                               f"txid {later.failed_by}, which was re-emitted with another batch")
                    metrics.send("replays_automatic", t.topology_id)
        return commit_result(self, t, tx, outcome)

    def resume(self, context: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Back from waiting on txid - 1 (TxidSettled fired: it settled, or the time limit passed): look again."""
        return self.execute(context)


def behind_a_replay(rt: TopologyRuntime, context: Any, dag_id: str, refused: Refused) -> Refused | Wait:
    """A commit refused behind failed txid N waits instead while N's run is queued or running again: its commit
    task (or its whole run) was cleared, with this one among its future runs, and may commit N."""
    assert refused.failed_txid is not None
    seen = look_at(rt, context, dag_id, refused.failed_txid)
    if seen is None or seen[1] not in AGAIN:
        return refused
    return Wait(f"{refused.reason}. Its run {seen[0]!r} is {seen[1]} again: this commit waits for it",
                refused.failed_txid, replay=True, until_committed=True)


def commit_result(task: BaseOperator, t: TransactionalTopology, tx: Any, outcome: CommitStepOutcome
                  ) -> dict[str, Any]:
    """The commit task's XCom, or what it raises: a deferral while txid - 1 is not committed (TxidSettled resumes it
    once txid - 1 is committed or failed; the pool slot is released), a reschedule while the definition differs
    from the topology's owner, a failure without retries when the commit is refused (cascade, never processed) or
    superseded."""
    if isinstance(outcome, Wait):
        _wait_log(task, t, tx, outcome, f"deferred: back once txid {outcome.waiting_on} is committed or failed, "
                  f"at the latest in {t.commit_poke_interval:g}s")
        task.defer(trigger=TxidSettled(t.topology_id, t.zookeeper_conn_id, outcome.waiting_on,
                                       t.commit_poke_interval, committed_only=outcome.until_committed),
                   method_name="resume")
    if isinstance(outcome, OwnerChanged):
        _wait_log(task, t, tx, outcome)
        raise _later(t.commit_poke_interval)
    if isinstance(outcome, Halted):
        metrics.send("halts", t.topology_id)
    if not isinstance(outcome, Committed | AlreadyCommitted):
        raise AirflowFailException(outcome.reason)
    status = "committed" if isinstance(outcome, Committed) else "already committed"
    applied, skipped, staged_bytes = (outcome.applied, outcome.skipped, outcome.staged_bytes) \
        if isinstance(outcome, Committed) else (0, 0, 0)
    reason = f"{outcome.reason}; no asset event: a replay of a committed txid updates no asset" \
        if isinstance(outcome, AlreadyCommitted) else ""
    task.log.info("topology=%s txid=%s attempt=%s: %s (%s keys written, %s already held this txid, %s bytes "
                  "staged) %s", t.topology_id, tx.txid, tx.attempt, status, applied, skipped, staged_bytes, reason)
    return {"txid": tx.txid, "attempt": tx.attempt, "status": status, "applied": applied}


def _wait_log(task: BaseOperator, t: TransactionalTopology, tx: Any, outcome: Wait | OwnerChanged,
              then: str = "") -> None:
    """A waiting step's log line; a definition changed since the txid was coordinated is a warning: the step waits,
    writing nothing, until the change is accepted or undone (the next coordinate tasks fail, naming it)."""
    log = task.log.warning if isinstance(outcome, OwnerChanged) else task.log.info
    log("topology=%s txid=%s attempt=%s: %s; %s", t.topology_id, tx.txid, tx.attempt, outcome.reason,
        then or f"checking again in {t.commit_poke_interval:g}s")


def fail_txid(context: Any) -> None:
    """on_failure_callback of process and commit: the txid failed for good, so it and later txids fail
    (Storm's cascade); clearing its run with its future runs replays them. A try that was superseded (it ended
    after its retry took over: paused, cut off) fails nothing: it says so."""
    ti, run_id = context["ti"], context["run_id"]
    task = ti.task
    topology: TransactionalTopology = task.topology
    error = str(context.get("exception") or "task failed")
    if isinstance(task, CommitOperator):
        processed = ti.xcom_pull(task_ids="process")
        whose = {"attempt": processed.get("attempt")} if isinstance(processed, dict) else {}
    else:
        whose = {"owner": f"{run_id} try {ti.try_number}"}
    with TopologyRuntime(topology) as rt:
        outcome = steps.fail(rt, run_id, f"{task.task_id} failed: {error}", **whose)
    if outcome is None:
        return
    tx = outcome.tx
    if isinstance(outcome, Superseded):
        task.log.warning("topology=%s txid=%s attempt=%s: not failed: this try was superseded (%s); the current "
                         "attempt goes on", topology.topology_id, tx.txid, tx.attempt, outcome.reason)
        return
    if not outcome.txids:
        task.log.warning("topology=%s txid=%s attempt=%s: not failed: it is committed or no longer current",
                         topology.topology_id, tx.txid, tx.attempt)
        return
    metrics.send("txids_failed", topology.topology_id, len(outcome.txids))
    task.log.warning("topology=%s txid=%s attempt=%s: marked failed with later txids %s; clear run %s with its "
                     "future runs (or: txdag replay %s --from %s) to replay them", topology.topology_id, tx.txid,
                     tx.attempt, list(outcome.txids), run_id, topology.topology_id, tx.txid)

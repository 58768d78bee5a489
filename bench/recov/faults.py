"""The faults, one at a time, each as a crash of one part of the stack: what it hits, how, and what restarts it.

Each ``inject(hit)`` returns the fault's time (epoch seconds: the signal, or the service going down) and a note.
A component that crashes is restarted the way an operator (or a service manager) would: the Airflow components by
``scripts/airflow.sh restart <component>`` after ``restart_after`` seconds, the servers by their scripts at once.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from tput.services import Stack, listening

from recov import procs
from recov.lab import Hit
from recov.stale import resume_and_watch


@dataclass(frozen=True)
class Fault:
    name: str
    phases: tuple[str, ...]
    mode: str  # the Spark mode it runs in: "submit" (cold, the README's set-up) or "connect" (warm)
    what: str
    inject: Callable[[Hit], tuple[float, str]]
    on_task: bool = False  # hits the task's own processes: during commit means while its process runs; otherwise
    #                        (a service, a component) the fault starts as the process task ends, the commit next


def kill_driver(hit: Hit) -> tuple[float, str]:
    drivers = procs.spark_drivers(hit.task_pid)
    t0 = time.time()
    return t0, f"SIGKILL to Spark driver(s) {procs.signal_all(drivers, signal.SIGKILL)}"


def kill_task(hit: Hit) -> tuple[float, str]:
    t0 = time.time()
    return t0, f"SIGKILL to task process {procs.signal_all([hit.task_pid], signal.SIGKILL)}"


def kill_worker(hit: Hit) -> tuple[float, str]:
    table = procs.table()
    worker = table[hit.task_pid].ppid if hit.task_pid in table else None
    tree = [p for p in (worker, hit.task_pid) if p] + procs.descendants(hit.task_pid, table)
    t0 = time.time()
    reached = procs.signal_all(tree, signal.SIGKILL)
    return t0, f"SIGKILL to the executor worker (supervisor) and its task tree {reached}"


def crash(component: str) -> Callable[[Hit], tuple[float, str]]:
    def inject(hit: Hit) -> tuple[float, str]:
        t0 = time.time()
        hit.lab.script("airflow.sh", "crash", component, airflow=True)
        time.sleep(hit.restart_after)
        hit.lab.script("airflow.sh", "restart", component, airflow=True)
        return t0, f"airflow.sh crash {component}; {hit.restart_after:g} s later airflow.sh restart {component}"
    return inject


def restart_zk(hit: Hit) -> tuple[float, str]:
    t0 = time.time()
    hit.lab.script("services.sh", "stop", "zk")
    down = time.time() - t0
    hit.lab.script("services.sh", "start", "zk")
    return t0, f"services.sh stop zk ({down:.1f} s), start zk (up after {time.time() - t0:.1f} s)"


def restart_redis(hit: Hit) -> tuple[float, str]:
    t0 = time.time()
    hit.lab.script("services.sh", "restart-redis")
    return t0, f"services.sh restart-redis (up after {time.time() - t0:.1f} s)"


def restart_postgres(hit: Hit) -> tuple[float, str]:
    t0 = time.time()
    hit.lab.script("postgres.sh", "stop")
    hit.lab.script("postgres.sh", "start")
    return t0, f"postgres.sh stop, start (up after {time.time() - t0:.1f} s)"


def kill_connect(hit: Hit) -> tuple[float, str]:
    return kill_connect_server(hit.lab.stack)


def kill_connect_server(stack: Stack) -> tuple[float, str]:
    """SIGKILL the Spark Connect server on the stack's port and start it again, as a service manager would."""
    port = stack.ports.spark_connect
    servers = procs.connect_server(port)
    t0 = time.time()
    procs.signal_all(servers, signal.SIGKILL)
    # a killed JVM shows as a zombie while its other threads still exit, and its port answers until the last one
    # has: started meanwhile, spark-connect.sh would take it for a running server and reuse it
    while any(procs.alive(p) for p in servers) or listening(port, stack.hosts.spark_connect):
        time.sleep(0.1)
    stack.script("spark-connect.sh", "start")
    return t0, f"SIGKILL to the Spark Connect server {servers}; spark-connect.sh start (listening after " \
               f"{time.time() - t0:.0f} s)"


def pause(early: bool) -> Callable[[Hit], tuple[float, str]]:
    """SIGSTOP the task's whole tree (supervisor, task process, Spark driver): a frozen worker. Once Airflow gave up
    on it and the retry committed the txid (``early``: re-emitted it, so the stale job ends while the retry runs),
    SIGCONT the task and its Spark job first (so the stale attempt gets to write what it would), then the
    supervisor; the trial checks that nothing changed."""

    def inject(hit: Hit) -> tuple[float, str]:
        table = procs.table()
        worker = table[hit.task_pid].ppid
        tree = [hit.task_pid, *procs.descendants(hit.task_pid, table)]
        t0 = time.time()
        procs.signal_all([worker, *tree], signal.SIGSTOP)
        return t0, resume_and_watch(hit, worker, tree, t0, early=early)
    return inject


FAULTS: dict[str, Fault] = {f.name: f for f in (
    Fault("driver", ("process",), "submit", "SIGKILL the task's Spark driver (spark-submit JVM)", kill_driver,
          on_task=True),
    Fault("task", ("process", "commit"), "submit", "SIGKILL the task process (its supervisor lives)", kill_task,
          on_task=True),
    Fault("worker", ("process", "commit"), "submit", "SIGKILL the executor worker running the task's supervisor, "
          "with the task and its Spark driver", kill_worker, on_task=True),
    Fault("scheduler", ("process", "commit"), "submit", "SIGKILL the scheduler's session (its executor workers "
          "and tasks die with it); airflow.sh restart after 10 s", crash("scheduler")),
    Fault("triggerer", ("process", "commit"), "submit", "SIGKILL the triggerer (it holds the deferred commit "
          "waits); airflow.sh restart after 10 s", crash("triggerer")),
    Fault("dag-processor", ("process",), "submit", "SIGKILL the DAG processor; airflow.sh restart after 10 s",
          crash("dag-processor")),
    Fault("api-server", ("process", "commit"), "submit", "SIGKILL the API server (the tasks' execution API); "
          "airflow.sh restart after 10 s", crash("api-server")),
    Fault("zookeeper", ("process", "commit"), "submit", "restart ZooKeeper (services.sh stop zk, start zk)",
          restart_zk),
    Fault("postgres", ("process", "commit"), "submit", "restart PostgreSQL, Airflow's metadata database",
          restart_postgres),
    Fault("paused", ("process",), "submit", "SIGSTOP the task's tree until its retry committed, then SIGCONT",
          pause(early=False), on_task=True),
    Fault("paused-early", ("process",), "submit", "SIGSTOP the task's tree until its retry re-emitted the txid, "
          "then SIGCONT (the stale job ends while the retry runs)", pause(early=True), on_task=True),
    Fault("connect-server", ("process",), "connect", "SIGKILL the Spark Connect server; spark-connect.sh start",
          kill_connect),
    Fault("redis", ("process", "commit"), "submit", "restart the state Redis (services.sh restart-redis)",
          restart_redis),
)}

"""The nemesis: carries out a schedule's faults against this harness's own processes, each fault in a thread of its
own so that they overlap as drawn.

A pause SIGSTOPs its process and SIGCONTs it ``hold`` seconds later; a crash SIGKILLs the scheduler's or the
triggerer's session (airflow.sh crash) and starts it again ``hold`` seconds later; a kill SIGKILLs a task process, a
task's executor worker with the task's tree, or a Spark driver of this harness's Airflow (picked with the schedule's
random generator; waited for up to ``KILL_WAIT`` s when none runs, else the fault is skipped and says so), or the
Spark Connect server, started again at once as a service manager
would (a second kill-connect waits until the first one's server listens again: two starts at once would race).
Targets are checked to be the harness's own before any signal: Redis, ZooKeeper and the Connect server only when this
run started them (their pid files under .run/ of this checkout, the pid's command line naming the port), the
scheduler and triggerer by the pid file in this AIRFLOW_HOME and the process's environment.
``heal_all`` resumes whatever is still stopped: the runner calls it whatever happens.
A cut (``cut-a-b``, ``cut-a->b``; only with a ``network``, jepsen/network.py) drops the packets between the two
nodes' namespaces (dead neighbour entries) and heals ``hold`` seconds later; ``heal_all`` heals every one left.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

from recov import procs
from recov.faults import kill_connect_server
from tput.services import REPO, BenchError, Stack

from jepsen.network import Network, NetworkError
from jepsen.schedule import Fault, is_cut, parse_cut

KILL_WAIT = 60.0  # a kill waits this long for a task or driver to run (a paused scheduler starts none)


class NotOurs(RuntimeError):
    """A target that is not this harness's process: never signalled."""


class Down(ValueError):
    """An Airflow component not running now (a kill-scheduler or kill-triggerer not started again yet): a pause of
    it is skipped and says so; a kill of a task waits for one."""


def server_pids(stack: Stack, service: str) -> list[int]:
    """The Redis or ZooKeeper server this run started (scripts/services.sh's pid file), checked."""
    port = stack.ports.redis if service == "redis" else stack.ports.zk
    if service not in stack.started:
        raise NotOurs(f"{service} on port {port} was already running, not started by this run: not paused")
    folder, needle = (f"redis-{port}", f":{port}") if service == "redis" else (f"zk-{port}", f"zk-{port}/zoo.cfg")
    pidfile = REPO / ".run" / folder / ("redis.pid" if service == "redis" else "zookeeper.pid")
    pid = int(pidfile.read_text().split()[0])
    cmdline = procs.table().get(pid)
    if cmdline is None or needle not in cmdline.cmdline:
        raise NotOurs(f"pid {pid} of {pidfile} is not the {service} server on port {port}: not paused")
    return [pid]


def component_pids(stack: Stack, component: str) -> list[int]:
    """The Airflow component's process(es) (``airflow <component>``) in this run's AIRFLOW_HOME, not its children
    that run tasks; Down while a crash of it is not yet started again."""
    home = str(stack.airflow_home)
    pidfile = Path(home) / f"{component}.pid"
    try:
        leader = int(pidfile.read_text().split()[0])
    except FileNotFoundError:  # airflow.sh crash removes it, airflow.sh restart writes it again
        raise Down(f"no {component} runs now (crashed, not started again yet)") from None
    table = procs.table()
    ours = {p.pid for p in procs.of_home(home, table)}
    tree = [leader, *procs.descendants(leader, table)]
    found = [p for p in tree if p in ours and f"airflow {component}" in table[p].cmdline]
    if not found and leader in ours:
        raise Down(f"the {component} is starting again (pid {leader})")
    if not found:
        raise NotOurs(f"no 'airflow {component}' process of AIRFLOW_HOME={home} under pid {leader}")
    return found


def task_pids(stack: Stack) -> list[int]:
    """The task processes under this run's scheduler (its LocalExecutor workers' children); none while the
    scheduler is down (a kill waits for it). Found through the scheduler, not the environment: setproctitle writes
    the title over /proc/<pid>/environ."""
    try:
        schedulers = component_pids(stack, "scheduler")
    except Down:
        return []
    table = procs.table()
    return sorted(p for s in schedulers for p in procs.descendants(s, table)
                  if table[p].cmdline.startswith("airflow worker -- ") and "LocalExecutor" not in table[p].cmdline)


def driver_pids(stack: Stack) -> list[int]:
    table = procs.table()
    return sorted(d for t in task_pids(stack) for d in procs.spark_drivers(t, table))


def connect_pids(stack: Stack) -> list[int]:
    """The Spark Connect server this run started (scripts/spark-connect.sh on the stack's port)."""
    port = stack.ports.spark_connect
    if "spark-connect" not in stack.started:
        raise NotOurs(f"no Spark Connect server on port {port} started by this run (spark mode submit, or one was "
                      "already running): not paused")
    return procs.connect_server(port)


PAUSE_TARGETS = {"pause-redis": lambda s: server_pids(s, "redis"), "pause-zookeeper": lambda s: server_pids(s, "zk"),
                 "pause-scheduler": lambda s: component_pids(s, "scheduler"),
                 "pause-triggerer": lambda s: component_pids(s, "triggerer"), "pause-connect": connect_pids}
KILL_TARGETS = {"kill-task": task_pids, "kill-worker": task_pids, "kill-driver": driver_pids}
CRASH_TARGETS = {"kill-scheduler": "scheduler", "kill-triggerer": "triggerer"}


class Nemesis:
    def __init__(self, stack: Stack, faults: list[Fault], seed: int, network: Network | None = None) -> None:
        self.stack, self.faults, self.network = stack, faults, network
        self.rng = random.Random(seed)
        self.injected: list[dict[str, Any]] = []
        self.stopped: set[int] = set()
        self.closed = False  # heal_all ran: no pause and no kill-connect begins after it
        self._lock = threading.Lock()
        self._restarting = threading.Lock()  # one kill-connect at a time, until its server listens again
        self._threads: list[threading.Thread] = []

    def run(self, start: float) -> None:
        """Sleeps to each fault's time after ``start`` (epoch s) and sets it off; returns once all are set off."""
        for fault in self.faults:
            time.sleep(max(0.0, start + fault.at - time.time()))
            t = threading.Thread(target=self._inject, args=(fault,), daemon=True)
            t.start()
            self._threads.append(t)

    def join(self) -> None:
        for t in self._threads:
            t.join()

    def _inject(self, fault: Fault) -> None:
        entry: dict[str, Any] = {"kind": fault.kind, "planned": fault.to_json(), "at": time.time(), "targets": []}
        try:
            if fault.kind in PAUSE_TARGETS:
                self._pause(fault, entry)
            elif fault.kind in CRASH_TARGETS:
                self._crash(fault, entry)
            elif is_cut(fault.kind):
                self._cut(fault, entry)
            else:
                self._kill(fault, entry)
        except NotOurs as exc:  # a server this run did not start: the schedule ran weaker than drawn
            entry.update(skipped=True, not_ours=True, note=str(exc))
        except (OSError, ValueError, NetworkError, BenchError) as exc:
            entry.update(skipped=True, note=str(exc))
        entry.setdefault("healed", entry["at"])
        with self._lock:
            self.injected.append(entry)
        print(f"jepsen:   {fault.kind} {entry.get('note', '')}", flush=True)

    def _pause(self, fault: Fault, entry: dict[str, Any]) -> None:
        pids = PAUSE_TARGETS[fault.kind](self.stack)
        with self._lock:  # under the lock: heal_all either sees these pids stopped or this pause not begun
            if self.closed:
                raise ValueError("the run is ending: not paused")
            self.stopped.update(pids)
            entry["at"] = time.time()
            entry["targets"] = procs.signal_all(pids, signal.SIGSTOP)
        time.sleep(fault.hold)
        procs.signal_all(pids, signal.SIGCONT)
        with self._lock:
            self.stopped.difference_update(pids)
        entry["healed"] = time.time()
        entry["note"] = f"SIGSTOP {pids}, SIGCONT after {entry['healed'] - entry['at']:.1f} s"

    def _kill(self, fault: Fault, entry: dict[str, Any]) -> None:
        if fault.kind == "kill-connect":
            with self._restarting:
                self._refuse_if_closed()  # it may have waited for the last kill-connect past the run's end
                connect_pids(self.stack)  # ours, else NotOurs
                try:
                    entry["at"], entry["note"] = kill_connect_server(self.stack)
                except BenchError as exc:  # killed, not restarted: the liveness check will say the rest
                    entry["note"] = f"SIGKILL, then the restart failed: {exc}"
                entry["healed"] = time.time()  # listening again
            return
        deadline = time.monotonic() + KILL_WAIT
        while not (pids := KILL_TARGETS[fault.kind](self.stack)) and time.monotonic() < deadline:
            time.sleep(0.5)
        if not pids:
            entry.update(skipped=True, note=f"nothing to kill within {KILL_WAIT:g} s")
            return
        pid = self.rng.choice(pids)
        table = procs.table()
        if pid not in table:
            entry.update(skipped=True, note=f"{pid} ended before the kill")
            return
        what = table[pid].cmdline[:60]
        # kill-worker: the LocalExecutor worker that supervises the task, with the task's whole tree (a dead machine)
        tree = [table[pid].ppid, pid, *procs.descendants(pid, table)] if fault.kind == "kill-worker" else [pid]
        entry["at"] = time.time()
        entry["targets"] = procs.signal_all(tree, signal.SIGKILL)
        entry["note"] = f"SIGKILL {entry['targets']} ({'its worker and tree: ' if len(tree) > 1 else ''}{what})"

    def _crash(self, fault: Fault, entry: dict[str, Any]) -> None:
        """airflow.sh crash (SIGKILL to the component's session: the scheduler's takes its executor workers and
        their tasks along), and ``hold`` s later airflow.sh restart, as a service manager would; not once the run's
        clean-up began (it stops Airflow, and would leave a component started after it)."""
        component = CRASH_TARGETS[fault.kind]
        component_pids(self.stack, component)  # ours, else NotOurs
        self._refuse_if_closed()
        entry["at"] = time.time()
        self.stack.script("airflow.sh", "crash", component, env=self.stack.airflow_env, timeout=120)
        time.sleep(fault.hold)
        try:
            self._refuse_if_closed()
            self.stack.script("airflow.sh", "restart", component, env=self.stack.airflow_env, timeout=300)
            entry["note"] = (f"airflow.sh crash {component}, restart after {fault.hold:g} s (up "
                             f"{time.time() - entry['at']:.0f} s after the crash)")
        except (ValueError, BenchError) as exc:  # the liveness check says what a component left down did
            entry["note"] = f"airflow.sh crash {component}; not started again: {exc}"
        entry["healed"] = time.time()

    def _refuse_if_closed(self) -> None:
        with self._lock:
            if self.closed:
                raise ValueError("the run is ending")

    def _cut(self, fault: Fault, entry: dict[str, Any]) -> None:
        if self.network is None:
            raise NotOurs("no network namespaces (--no-network): nothing to cut")
        a, b, one_way = parse_cut(fault.kind)
        entry["at"] = time.time()
        self.network.cut(a, b, one_way)
        entry["targets"] = [a, b]
        try:
            time.sleep(fault.hold)
        finally:
            self.network.heal(a, b, one_way)
        entry["healed"] = time.time()
        entry["note"] = f"{a} {'->' if one_way else '<->'} {b} cut, healed after {entry['healed'] - entry['at']:.1f} s"

    def heal_all(self) -> list[int]:
        """SIGCONT to every process still stopped by a pause (a run interrupted mid-pause); heals every cut still
        there."""
        with self._lock:
            pids, self.stopped, self.closed = sorted(self.stopped), set(), True
        if self.network is not None:
            try:
                if healed := self.network.heal_all():
                    print(f"jepsen: healed {len(healed)} cut(s) still there", flush=True)
            except NetworkError as exc:
                print(f"jepsen: could not heal the cuts: {exc}", flush=True)
        return procs.signal_all(pids, signal.SIGCONT)

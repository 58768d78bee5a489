"""Peak resident memory (RSS) of the Spark and Airflow processes, sampled from /proc (psutil) in a thread.

Roots are named processes (an Airflow component, the Spark Connect server, the streaming peer); each sample
walks a root and its descendants and files every process under one group: Spark JVMs (the Connect server's,
spark-submit's of cold tasks, the peer's), Spark's Python workers, Airflow's task processes (the scheduler's
descendants: LocalExecutor workers, task supervisors and tasks; on the cluster, the Celery workers'), and each
Airflow component with its own children. The nodes of one cluster component (roots ``<component> #<n>``) are one
group. Per group it keeps the peak of the group's sum and of its largest single process.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from pathlib import Path

import psutil

from tput.cpu import component

MB = 1024 * 1024
TASK_HOLDERS = ("airflow scheduler", "celery worker")  # whose descendants run the tasks (Local-, CeleryExecutor)


def group_of(root: str, proc: psutil.Process, is_root: bool) -> str:
    """The group of one process found under ``root``."""
    try:
        if proc.status() == psutil.STATUS_ZOMBIE:
            return ""
        name, cmdline = proc.name(), " ".join(proc.cmdline())
    except psutil.Error:
        return ""
    if name == "java" or "/java" in cmdline.split(" ")[0]:
        if root == "spark-connect":
            return "Spark Connect server JVM"
        if root == "peer":
            return "Spark peer JVM"
        return "spark-submit JVMs (cold tasks)" if component(root) in TASK_HOLDERS else component(root)
    if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline:
        return "Spark peer Python workers" if root == "peer" else "Spark Python workers"
    if root == "peer":
        return "Spark peer driver (Python)"
    if root == "spark-connect":
        return "Spark Connect server JVM"  # its launcher shell, when the JVM is not the root
    if component(root) in TASK_HOLDERS and not is_root:
        return "Airflow task processes (executor workers, tasks)"
    return component(root)


class RssSampler:
    """``start()``, then ``stop()`` -> {group: {"peak_mb", "peak_process_mb", "processes"}}."""

    def __init__(self, roots: dict[str, int], interval: float = 1.0) -> None:
        self.roots = roots
        self.interval = interval
        self.peak_sum: dict[str, float] = defaultdict(float)
        self.peak_one: dict[str, float] = defaultdict(float)
        self.seen: dict[str, set[int]] = defaultdict(set)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def stop(self) -> dict[str, dict[str, float]]:
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=30)
        return {g: {"peak_mb": round(self.peak_sum[g] / MB, 1), "peak_process_mb": round(self.peak_one[g] / MB, 1),
                    "processes": len(self.seen[g])} for g in sorted(self.peak_sum)}

    def sample(self) -> None:
        sums: dict[str, float] = defaultdict(float)
        counted: set[int] = set()
        for root, pid in self.roots.items():
            try:
                top = psutil.Process(pid)
                procs = [(top, True)] + [(p, False) for p in top.children(recursive=True)]
            except psutil.Error:
                continue
            for proc, is_root in procs:
                if proc.pid in counted:
                    continue
                group = group_of(root, proc, is_root)
                try:
                    rss = proc.memory_info().rss
                except psutil.Error:
                    continue
                if group and rss:  # a zombie has none
                    counted.add(proc.pid)
                    sums[group] += rss
                    self.peak_one[group] = max(self.peak_one[group], rss)
                    self.seen[group].add(proc.pid)
        for group, total in sums.items():
            self.peak_sum[group] = max(self.peak_sum[group], total)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)


def pid_in(path: Path) -> int | None:
    """The live process whose pid a pid file starts with (the scripts' pid files), if any."""
    try:
        pid = int(path.read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    return pid if psutil.pid_exists(pid) else None


def listener_pid(port: int) -> int | None:
    """The pid of the process listening on 127.0.0.1:``port`` (the Spark Connect server), if any."""
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
            return conn.pid
    return None


def machine_load(seconds: float = 1.0, top: int = 6) -> dict:
    """Load averages and the busiest processes over ``seconds`` (what else used the cores during the run)."""
    procs = list(psutil.process_iter(["pid", "name", "cmdline"]))
    for p in procs:
        try:
            p.cpu_percent(None)
        except psutil.Error:
            pass
    threading.Event().wait(seconds)
    busy = []
    for p in procs:
        try:
            cpu = p.cpu_percent(None)
        except psutil.Error:
            continue
        if cpu >= 5:
            args = (p.info["cmdline"] or [])[1:2]  # the program's name and its first argument's base name only:
            cmd = " ".join([p.info["name"] or "?", *(a.rsplit("/", 1)[-1][:40] for a in args)])  # never a secret
            busy.append({"pid": p.pid, "cpu_percent": round(cpu), "cmd": cmd})
    busy.sort(key=lambda b: -b["cpu_percent"])
    return {"loadavg": [round(x, 2) for x in psutil.getloadavg()], "busy": busy[:top]}

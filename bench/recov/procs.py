"""The processes a fault hits, found in /proc: an Airflow task's process (its title names the task instance's id),
the LocalExecutor worker that supervises it (its parent), and what the task started (the Spark driver).

Airflow 3's LocalExecutor: scheduler -> executor worker ("airflow worker -- LocalExecutor: <task>", it runs the
task's supervisor) -> task process ("airflow worker -- <ti id>") -> spark-submit's JVM (the driver, cold mode).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

SPARK_SUBMIT = "org.apache.spark.deploy.SparkSubmit"
CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    state: str
    cmdline: str


def table() -> dict[int, Proc]:
    """Every live process (zombies left out)."""
    procs = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":
            procs[int(entry.name)] = Proc(int(entry.name), int(fields[1]), fields[0], cmdline)
    return procs


def descendants(pid: int, procs: dict[int, Proc] | None = None) -> list[int]:
    """``pid``'s children, grandchildren, ... (not ``pid``), parents before children."""
    procs = procs if procs is not None else table()
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop(0)
        out.append(child)
        todo += children.get(child, [])
    return out


def task_process(ti_id: str, procs: dict[int, Proc] | None = None) -> Proc | None:
    """The process running task instance ``ti_id`` (the supervisor's child; its title ends with the id)."""
    procs = procs if procs is not None else table()
    title = f"airflow worker -- {ti_id}"
    found = [p for p in procs.values() if p.cmdline.startswith(title)]
    return found[0] if found else None


def spark_drivers(task_pid: int, procs: dict[int, Proc] | None = None) -> list[int]:
    """The spark-submit JVMs a task process started (client mode: each is the application's driver)."""
    procs = procs if procs is not None else table()
    return [pid for pid in descendants(task_pid, procs) if SPARK_SUBMIT in procs[pid].cmdline
            and CONNECT_SERVER not in procs[pid].cmdline]


def connect_server(port: int) -> list[int]:
    """The Spark Connect server JVM(s) listening on ``port`` (scripts/spark-connect.sh's)."""
    needle = f"spark.connect.grpc.binding.port={port}"
    return [p.pid for p in table().values() if CONNECT_SERVER in p.cmdline and needle in p.cmdline]


def signal_all(pids: list[int], sig: signal.Signals) -> list[int]:
    """Sends ``sig`` to each pid still alive; returns those it reached."""
    reached = []
    for pid in pids:
        try:
            os.kill(pid, sig)
            reached.append(pid)
        except ProcessLookupError:
            pass
    return reached


def of_home(airflow_home: str, procs: dict[int, Proc] | None = None) -> list[Proc]:
    """The processes started with ``AIRFLOW_HOME=airflow_home`` (this benchmark's Airflow, not another one's)."""
    procs = procs if procs is not None else table()
    needle = f"AIRFLOW_HOME={airflow_home}\0".encode()
    out = []
    for p in procs.values():
        try:
            if needle in Path(f"/proc/{p.pid}/environ").read_bytes():
                out.append(p)
        except OSError:
            continue
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"

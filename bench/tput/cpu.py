"""CPU time during a drain: how busy the machine's cores were, and which component used them.

A throughput ratio (P4's, P1's against the baseline) has a ceiling the profile must show: when the cores are busy
at one txid in flight, more txids in flight cannot go faster. Each component is a process tree (an Airflow
component with its task processes, the Spark Connect server with its Python workers, Redis, ZooKeeper,
PostgreSQL), or the trees of a cluster component's nodes (roots named ``<component> #<n>``); its CPU time is the
tree's own plus what its exited children left in their parents' ``children_*`` times, so a task process that lived
for a second is counted once it is reaped.
"""

from __future__ import annotations

import time

import psutil


def tree_seconds(pid: int) -> float:
    """User + system seconds of ``pid`` and its live descendants, with their reaped children's."""
    try:
        top = psutil.Process(pid)
        procs = [top, *top.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
        except psutil.Error:  # exited between the listing and now: its parent counts it once reaped
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def component(root: str) -> str:
    """The component a root belongs to: ``zookeeper #2`` is a node of ``zookeeper``."""
    return root.partition(" #")[0]


def busy_seconds() -> tuple[float, float]:
    """(busy, all) core-seconds of the machine since boot, from /proc/stat."""
    t = psutil.cpu_times()
    idle = t.idle + getattr(t, "iowait", 0.0)
    total = sum(t)
    return total - idle, total


class CpuMeter:
    """``start()``, then ``stop()`` -> the machine's busy share and each component's core-seconds over the window."""

    def __init__(self, roots: dict[str, int]) -> None:
        self.roots = roots
        self.start_trees: dict[str, float] = {}
        self.start_busy = self.start_all = self.start_wall = 0.0

    def start(self) -> CpuMeter:
        self.start_trees = {name: tree_seconds(pid) for name, pid in self.roots.items()}
        self.start_busy, self.start_all = busy_seconds()
        self.start_wall = time.monotonic()
        return self

    def stop(self) -> dict:
        busy, total = busy_seconds()
        wall = time.monotonic() - self.start_wall
        used: dict[str, float] = {}
        for name, pid in self.roots.items():
            seconds = max(0.0, tree_seconds(pid) - self.start_trees[name])
            used[component(name)] = round(used.get(component(name), 0.0) + seconds, 2)
        busy_core_s = busy - self.start_busy
        return {"seconds": round(wall, 2), "cores": psutil.cpu_count(),
                "busy_share": round(busy_core_s / max(total - self.start_all, 1e-9), 3),
                "busy_core_seconds": round(busy_core_s, 2),
                "core_seconds": dict(sorted(used.items(), key=lambda kv: -kv[1])),
                "other_core_seconds": round(max(0.0, busy_core_s - sum(used.values())), 2)}


def per_txid(cpu: dict, txids: int) -> dict[str, float]:
    """Core-seconds per txid of each component, and of the machine as a whole (``all``)."""
    out = {name: round(s / txids, 3) for name, s in cpu["core_seconds"].items()}
    out["other"] = round(cpu["other_core_seconds"] / txids, 3)
    out["all"] = round(cpu["busy_core_seconds"] / txids, 3)
    return out


def above_idle(cpu: dict, idle: dict, txids: int) -> dict[str, float]:
    """Core-seconds per txid of each component beyond what it uses idle (``idle``: a CpuMeter window in which no
    txid ran, scaled to ``cpu``'s length), and of the machine as a whole (``all``): what the txids themselves cost
    when they are sparse, as a 1-tweet txid is."""
    scale = cpu["seconds"] / max(idle["seconds"], 1e-9)
    out = {name: round(max(0.0, s - idle["core_seconds"].get(name, 0.0) * scale) / txids, 3)
           for name, s in cpu["core_seconds"].items()}
    out["other"] = round(max(0.0, cpu["other_core_seconds"] - idle["other_core_seconds"] * scale) / txids, 3)
    out["all"] = round(max(0.0, cpu["busy_core_seconds"] - idle["busy_core_seconds"] * scale) / txids, 3)
    return out

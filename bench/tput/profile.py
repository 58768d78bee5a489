"""--profile: where a txid's time goes inside Airflow's task processes, from py-spy over a short extra drain.

py-spy samples the scheduler and every process under it (LocalExecutor workers, task supervisors, the tasks),
idle included, so a task that waits on Spark Connect, Redis or ZooKeeper shows as wall time where it waits.
Each stack is given to its task instance by the id in the worker's process title (``airflow worker --
LocalExecutor: <ti id>``), mapped to coordinate/process/commit through the REST API, and only the task process's
main thread counts (not the supervisor's, not background threads). The raw stacks go to profile.txt (collapsed
stacks: flamegraph.pl and speedscope read them). The drain is separate from P1's, so the profiler's own cost (it
shares the cores) is not in the figures.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

RATE = 20  # samples per second
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
LINE_NO = re.compile(r":\d+\)$")
EXECUTE = "_execute_task (airflow/sdk/execution_time/task_runner.py"
TXDAG = ("txdag/", "spark_jobs/")


def py_spy() -> str | None:
    exe = Path(sys.executable).parent / "py-spy"
    return str(exe) if exe.exists() else shutil.which("py-spy")


def profile_drain(bench: Any, tweets: int, out: Path) -> dict[str, Any]:
    """Drains the profile role's backlog under py-spy; returns the summary (also in profile-summary.txt)."""
    exe = py_spy()
    if exe is None:
        return {"error": "py-spy not installed (pip install -e '.[bench]')"}
    scheduler = bench.roots()["airflow scheduler"]
    raw = out / "profile.txt"
    cmd = [exe, "record", "--pid", str(scheduler), "--subprocesses", "--idle", "--rate", str(RATE), "--format",
           "raw", "--output", str(raw)]
    with (out / "logs" / "py-spy.log").open("w") as log:
        spy = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            result = bench.drain("profile", tweets)
        finally:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=120)
    api, dag = bench.airflow(), bench.roles["profile"].topology_id
    tasks = {ti["id"]: ti["task_id"] for run in api.runs(dag) for ti in api.task_instances(dag, run["dag_run_id"])}
    summary = summarize(raw.read_text().splitlines(), tasks) if raw.exists() else {}
    (out / "profile-summary.txt").write_text(format_summary(summary, result["txids"]))
    return {"drain": {k: v for k, v in result.items() if k != "per_txid"}, "summary": summary, "raw": str(raw)}


def summarize(lines: list[str], tasks: dict[str, str], top: int = 10) -> dict[str, Any]:
    """Per task: seconds of its processes' main thread, the part outside ``execute`` (start-up, DAG parsing, XCom,
    finishing), txdag's functions with the most inclusive time, and the calls out of txdag that time is spent in
    (``txdag function -> the library function it called``)."""
    seconds: Counter = Counter()
    outside: Counter = Counter()
    own: dict[str, Counter] = {}
    calls: dict[str, Counter] = {}
    for line in lines:
        stack, _, count = line.strip().rpartition(" ")
        frames = stack.split(";") if stack else []
        ids = [m for f in frames if f.startswith("process ") for m in UUID.findall(f)]
        code = [LINE_NO.sub(")", f) for f in frames if not f.startswith("process ")]
        task = tasks.get(ids[-1]) if ids else None
        if task is None or not code or not code[0].startswith("<module>") or "_subprocess_main" not in stack:
            continue  # not a task process's main thread
        n = int(count) / RATE
        seconds[task] += n
        if not any(f.startswith(EXECUTE) for f in code):
            outside[task] += n
            continue
        ours = [i for i, f in enumerate(code) if any(t in f for t in TXDAG)]
        own.setdefault(task, Counter()).update({code[i]: n for i in set(ours)})
        if ours:
            last = ours[-1]
            callee = code[last + 1] if last + 1 < len(code) else "(running txdag code itself)"
            calls.setdefault(task, Counter())[f"{code[last]} -> {callee}"] += n
    return {task: {"seconds": round(seconds[task], 1), "outside_execute": round(outside[task], 1),
                   "txdag": [(f, round(t, 1)) for f, t in own.get(task, Counter()).most_common(top)],
                   "calls": [(f, round(t, 1)) for f, t in calls.get(task, Counter()).most_common(top)]}
            for task in sorted(seconds)}


def format_summary(summary: dict[str, Any], txids: int) -> str:
    lines = [f"wall seconds of the task processes' main threads over {txids} txids (py-spy, {RATE}/s, idle included)"]
    for task, info in summary.items():
        total = info["seconds"] or 1
        lines.append(f"{task}: {info['seconds']:.1f} s ({info['seconds'] / txids:.2f} s per txid); outside execute "
                     f"(start-up, DAG parse, XCom, finish): {info['outside_execute'] / total:.0%}")
        lines.append("  txdag functions (inclusive):")
        lines += [f"    {t / total:6.1%}  {f}" for f, t in info["txdag"]]
        lines.append("  calls out of txdag:")
        lines += [f"    {t / total:6.1%}  {f}" for f, t in info["calls"]]
    return "\n".join(lines) + "\n"

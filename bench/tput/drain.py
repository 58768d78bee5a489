"""Driving a bench topology through Airflow's REST API: drain a backlog (P1, P4) and time 1-tweet txids (P2).

Only public behaviour is used: DAG runs triggered through the REST API, task instances' start and end dates from
it, and the topology's marker key in Redis (``LAST_COMMITED_TRANSACTION``, after the copy's key prefix: the last
committed txid).
"""

from __future__ import annotations

import math
import re
import statistics
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import redis

from tput import data
from tput.cpu import CpuMeter
from tput.dags import Variant
from tput.services import BenchError
from txdag.airflow.api import AirflowAPI, unique_run_id
from txdag.airflow.timings import TASKS, all_timings, run_timings


@dataclass
class Drain:
    """One drained backlog: tweets, txids, the seconds from the first trigger to the last commit, per-txid timings."""

    variant: Variant
    tweets: int
    txids: int
    seconds: float
    timings: list[dict] = field(repr=False, default_factory=list)
    started: datetime | None = None  # the first trigger
    cpu: dict = field(repr=False, default_factory=dict)  # CpuMeter's, from the first trigger to the last commit

    def commits(self) -> list[float]:
        """Seconds from the first trigger to each commit's end, in order: P1's progress over time."""
        assert self.started is not None
        return sorted((r["spans"]["commit"][1] - self.started).total_seconds() for r in self.timings)

    @property
    def rate(self) -> float:
        return self.tweets / self.seconds

    def profile(self) -> dict[str, float]:
        """Medians over the txids of each task's duration and of the gaps (scheduler wait, commit waits)."""
        keys = [*TASKS, "gap c>p", "gap p>c", "total"]
        return {k: statistics.median(r[k] for r in self.timings) for k in keys} if self.timings else {}

    def job_profile(self) -> dict[str, float]:
        """Medians over the txids of the process task's steps (job_steps), ``airflow`` being the rest of the task."""
        return median_steps([r["job"] for r in self.timings if r.get("job")])


TIMINGS = re.compile(r"txdag job done: .*; timings: (.*)")
STEP = re.compile(r"(\w+) ([0-9.]+) s")
WAITED = re.compile(r"waited ([0-9.]+)s for txid \d+ to commit or fail")  # txdag.airflow.operators.before_the_commit


def job_steps(api: AirflowAPI, dag_id: str, row: dict) -> dict[str, float]:
    """The seconds of each step of the process task's job, from its ``txdag job done`` line (in the log of the try
    that succeeded, ``row`` being run_timings'), ``predecessor``: its wait for txid - 1 to commit after the job, and
    ``airflow``: the rest of the task (its start, imports, ZooKeeper, XCom; cold mode: spark-submit and the JVM)."""
    log = api.task_log(dag_id, row["run"], "process", row["process_try"])
    found = TIMINGS.findall(log)
    if not found:
        return {}
    steps = {name: float(seconds) for name, seconds in STEP.findall(found[-1])}
    waited = WAITED.findall(log)
    steps["predecessor"] = float(waited[-1]) if waited else 0.0  # the job done, waiting for txid - 1 to commit
    return {**steps, "airflow": max(0.0, row["process"] - sum(steps.values()))}


def median_steps(rows: list[dict[str, float]]) -> dict[str, float]:
    """Per step, the median over the rows that have it, in the order the steps first appear."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    return {n: statistics.median(row[n] for row in rows if n in row) for n in names}


def _marker(client: redis.Redis, key: str) -> int:
    raw = client.get(key)
    return int(raw) if raw is not None else 0


def _failed_runs(api: AirflowAPI, dag_id: str) -> list[str]:
    return [r["dag_run_id"] for r in api.get(f"/dags/{dag_id}/dagRuns", state="failed", limit=5)["dag_runs"]]


def trigger(api: AirflowAPI, dag_id: str, count: int) -> list[str]:
    """``count`` runs, with logical dates that grow with the order of triggering (the demo's way)."""
    base = datetime.now(UTC) - timedelta(minutes=5)
    return [api.trigger(dag_id, logical_date=base + timedelta(milliseconds=i), run_id=unique_run_id("bench"))
            for i in range(count)]


def drain(api: AirflowAPI, client: redis.Redis, variant: Variant, tweets: int, timeout: float,
          meter: CpuMeter) -> Drain:
    """Triggers one run per batch of the loaded backlog (max_active_transactions run at once, the rest queue), or
    for a copy whose source starts its runs (``by_source``) unpauses its DAG only, and waits until the marker says
    the last txid is committed; fails loudly on a failed run or the timeout. ``meter`` measures the CPU from the
    first trigger until the marker says so. A ``by_source`` copy's backlog was loaded hidden (data.hide): the clock
    starts as it appears, in one write."""
    dag = variant.topology_id
    txids = math.ceil(tweets / variant.batch)
    api.wait_dag_parsed(dag, timeout=180)
    api.unpause(dag)
    meter.start()
    first_trigger = datetime.now(UTC)
    if variant.by_source:  # its source starts the runs: nothing is triggered
        data.show(client, variant.prefix)
    runs = [] if variant.by_source else trigger(api, dag, txids)
    deadline = time.monotonic() + timeout
    checked = time.monotonic()
    while _marker(client, variant.marker_key) < txids:
        if time.monotonic() - checked > 5:
            checked = time.monotonic()
            failed = _failed_runs(api, dag)
            if failed:
                raise BenchError(f"{dag}: run(s) {failed} failed; see their task logs under "
                                 f"{api.base_url}/dags/{dag}")
        if time.monotonic() > deadline:
            raise BenchError(f"{dag}: committed txid {_marker(client, variant.marker_key)} of {txids} after "
                             f"{timeout:.0f} s; stopped waiting (raise --timeout, or see the runs in "
                             f"{api.base_url}/dags/{dag})")
        time.sleep(0.25)
    cpu = meter.stop()
    if variant.by_source:
        runs = [r["dag_run_id"] for r in api.runs(dag)]
    for run in runs:  # the last commit is in; the runs end with it
        api.wait_run(dag, run, timeout=120)
    timings = all_timings(api, dag)
    if len(timings) != txids:
        raise BenchError(f"{dag}: {len(timings)} runs with three successful tasks, expected {txids}")
    for row in timings:
        row["job"] = job_steps(api, dag, row)
    last_commit = max(r["spans"]["commit"][1] for r in timings)
    return Drain(variant, tweets, txids, (last_commit - first_trigger).total_seconds(), timings, first_trigger, cpu)


@dataclass
class Latency:
    """One 1-tweet txid: trigger -> committed, split into scheduler wait and the three tasks (seconds)."""

    total: float
    wait: float
    coordinate: float
    process: float
    commit: float
    job: dict[str, float] = field(default_factory=dict)  # the process task's steps (job_steps)


def one_tweet_latency(api: AirflowAPI, client: redis.Redis, variant: Variant, append) -> Latency:  # type: ignore[no-untyped-def]
    """Appends one tweet (``append(client)``), triggers one run, and splits its trigger -> commit time."""
    dag = variant.topology_id
    append(client)
    start = datetime.now(UTC)
    run = trigger(api, dag, 1)[0]
    state = api.wait_run(dag, run, timeout=600, poll=0.2)
    row = run_timings(api, dag, {"dag_run_id": run})
    if state != "success" or row is None:
        raise BenchError(f"{dag}: run {run} ended {state}; see its task logs under {api.base_url}/dags/{dag}")
    spans = row["spans"]
    return Latency(
        total=(spans["commit"][1] - start).total_seconds(),
        wait=(spans["coordinate"][0] - start).total_seconds() + row["gap c>p"] + row["gap p>c"],
        coordinate=row["coordinate"], process=row["process"], commit=row["commit"],
        job=job_steps(api, dag, row),
    )


def summarize(samples: list[Latency]) -> dict[str, dict[str, float]]:
    """Median, min and max of each part over the samples."""
    parts = ("total", "wait", "coordinate", "process", "commit")
    return {p: {"median": statistics.median(getattr(s, p) for s in samples),
                "min": min(getattr(s, p) for s in samples),
                "max": max(getattr(s, p) for s in samples)} for p in parts}

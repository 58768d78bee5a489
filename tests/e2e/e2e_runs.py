"""Driving an e2e topology through the REST API and checking its transactions in ZooKeeper (test_topologies,
test_warm_spark); the faults a test injects (a Spark driver killed, a writer busy while txids run) and the CLI's
replay."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from conftest import REPO, AirflowInstance
from support.runs import drain

RUN_TIMEOUT = 600


def _dt(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def wait_runs(airflow: AirflowInstance, dag_id: str, run_ids: list[str]) -> None:
    states = {run: airflow.api.wait_run(dag_id, run, timeout=RUN_TIMEOUT) for run in run_ids}
    assert set(states.values()) == {"success"}, states


def settle(airflow: AirflowInstance, dag_id: str) -> list[dict]:
    """Wait until every run of ``dag_id`` has finished; returns them all."""
    while True:
        runs = airflow.api.runs(dag_id)
        busy = [r["dag_run_id"] for r in runs if r["state"] not in ("success", "failed")]
        if runs and not busy:
            return runs
        if busy:
            airflow.api.wait_run(dag_id, busy[0], timeout=RUN_TIMEOUT)
        else:
            time.sleep(1)  # no run yet: the scheduler is about to create the first scheduled one


def trigger_until_drained(airflow: AirflowInstance, dag_id: str, at_once: int) -> list[str]:
    """Trigger ``at_once`` runs at a time until one is skipped (support.runs.drain, for one DAG)."""
    return drain(airflow.api, [dag_id], at_once, RUN_TIMEOUT)[dag_id]


def process_intervals(airflow: AirflowInstance, dag_id: str, runs: list[str]) -> list[tuple[str, datetime, datetime]]:
    """When each run's process task ran: every try of it (a try that crashed mid-job was processing too), by run."""
    return [(run, _dt(ti["start_date"]), _dt(ti["end_date"])) for run in runs
            for ti in airflow.api.task_tries(dag_id, run, "process") if ti["start_date"] and ti["end_date"]]


def overlapped(intervals: list[tuple[str, datetime, datetime]]) -> bool:
    """Two runs (two txids) processed at the same time."""
    return any(a[0] != b[0] and a[1] < b[2] and b[1] < a[2] for i, a in enumerate(intervals) for b in intervals[i + 1:])


def run_of_txid(records: dict, txid: int) -> str:
    return records[txid].run_id


def spark_drivers(name: str, txid: int) -> list[int]:
    """Pids of the spark-submit JVMs (client mode: the driver) of application ``name`` processing ``txid``
    (not a driver left over from an earlier test's killed worker)."""
    spec = f'"txid":{txid},'.encode()
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if (b"org.apache.spark.deploy.SparkSubmit" in args and name.encode() in args
                and any(spec in a for a in args)):
            pids.append(int(cmdline.parent.name))
    return pids


def wait_spark_driver(dag_id: str, txid: int) -> list[int]:
    """The Spark driver(s) of ``txid`` of topology ``dag_id`` once its job runs (spark-submit mode)."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while not (drivers := spark_drivers(f"txdag-{dag_id}", txid)):
        assert time.monotonic() < deadline, f"txid {txid}'s Spark job never started"
        time.sleep(0.3)
    return drivers


def kill_spark_driver(dag_id: str, txid: int) -> None:
    """SIGKILL to the Spark driver of ``txid`` as soon as its job runs: the process task fails, and its retry runs
    the next attempt."""
    for pid in wait_spark_driver(dag_id, txid):
        os.kill(pid, signal.SIGKILL)


def txdag_replay(airflow: AirflowInstance, dag_id: str, from_txid: int) -> str:
    """``txdag replay DAG --from N`` against this Airflow, as a user runs it; returns its output."""
    env = {**airflow.env, "TXDAG_AIRFLOW_URL": airflow.base_url, "TXDAG_AIRFLOW_PASSWORD": airflow.password}
    done = subprocess.run([str(REPO / ".venv" / "bin" / "txdag"), "replay", dag_id, "--from", str(from_txid)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


class Writer(threading.Thread):
    """Calls ``write(i)`` (i = 0, 1, 2 ...) every ``every`` seconds until stopped: a source filled while txids
    run. ``stop()`` waits for the last write and raises what a write raised."""

    def __init__(self, write: Callable[[int], None], every: float) -> None:
        super().__init__(daemon=True)
        self.write, self.every, self.count = write, every, 0
        self.error: BaseException | None = None
        self._stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self._stopped.wait(self.every):
                self.write(self.count)
                self.count += 1
        except BaseException as exc:  # noqa: BLE001 - handed to the test by stop()
            self.error = exc

    def stop(self) -> int:
        self._stopped.set()
        self.join(timeout=120)
        if self.error is not None:
            raise self.error
        return self.count

"""Two DAG files for one topology id, as a real Airflow loads them (issue 37): ``txdag status`` names the file
Airflow's API says it loaded (the DAG's ``fileloc``), the recorded owner and which to keep, and exits 5; the way
out it prints, run as printed, brings it back to 0.
"""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
from conftest import REPO, AirflowInstance

from txdag.airflow.api import unique_run_id

pytestmark = pytest.mark.own_topologies  # no wait for the hour's scheduled runs (conftest)

TOPOLOGY = "owned_twice"


def dag_file(batch: int) -> str:
    return f"""# An Airflow DAG: one topology id, {batch} tweets per txid
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology(
    {TOPOLOGY!r},
    source=TweetsSource(prefix="owned_twice:", max_transaction_size={batch}),
    job={str(REPO / "spark_jobs" / "global_count.py")!r},
    states=[State("global_count", key_fields=0, namespace="owned_twice_count")],
)
dag = render(topology, dag_file=__file__)
"""


def loaded_from(airflow: AirflowInstance, name: str, timeout: float = 180) -> str:
    """Wait until Airflow's DAG processor serialised the topology's DAG from ``name``; its fileloc."""
    deadline = time.monotonic() + timeout
    while True:
        fileloc = (airflow.api.dag(TOPOLOGY) or {}).get("fileloc") or ""
        if fileloc.endswith(name) or time.monotonic() > deadline:
            return fileloc
        time.sleep(2)


def txdag(airflow: AirflowInstance, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**airflow.env, "TXDAG_AIRFLOW_URL": airflow.base_url, "TXDAG_AIRFLOW_PASSWORD": airflow.password}
    return subprocess.run([str(REPO / ".venv" / "bin" / "txdag"), *args, "--dags", str(airflow.dags_folder / "extra")],
                          env=env, capture_output=True, text=True, timeout=120)


def status(airflow: AirflowInstance) -> tuple[int, dict]:
    done = txdag(airflow, "status", TOPOLOGY, "--json")
    return done.returncode, json.loads(done.stdout or "{}")


def test_status_names_the_file_airflow_loaded_and_its_way_out_works(airflow: AirflowInstance) -> None:
    airflow.add_dag_file(f"{TOPOLOGY}.py", dag_file(100))
    airflow.api.wait_dag_parsed(TOPOLOGY, timeout=120)
    airflow.api.unpause(TOPOLOGY)
    run = airflow.api.trigger(TOPOLOGY, run_id=unique_run_id(TOPOLOGY))  # no tweets yet: skipped, owner recorded
    assert airflow.api.wait_run(TOPOLOGY, run, timeout=300) == "success"

    copy = airflow.add_dag_file("a_takeover.py", dag_file(50))  # first in path order: Airflow loads the copy
    fileloc = loaded_from(airflow, "a_takeover.py")
    assert fileloc.endswith("a_takeover.py"), f"Airflow still loads {fileloc}"
    code, answer = status(airflow)
    two = answer.get("two_files") or {}
    assert code == 5, answer
    assert two["loaded"].endswith("a_takeover.py") and two["seen"] == "Airflow's API: the DAG's fileloc", two
    assert any(o.endswith(f"{TOPOLOGY}.py") for o in [two.get("owner") or "", *two["others"]]), two
    deletes = [m.group(1) for w in two["ways_out"] for m in [re.search(r"delete (\S+\.py)", w)] if m]
    assert any(d.endswith("a_takeover.py") for d in deletes), two["ways_out"]
    doctor = txdag(airflow, "doctor", "--check", "connections", "--json")
    checks = [c for c in json.loads(doctor.stdout)["checks"] if c["check"] == f"dag files of {TOPOLOGY}"]
    assert doctor.returncode == 1 and len(checks) == 1, doctor.stdout  # one check for both files, as status says
    assert checks[0]["detail"] == two["message"] and checks[0]["fix"] == "; or ".join(two["ways_out"]), checks

    copy.unlink()  # that way out, as printed: delete the copy
    assert loaded_from(airflow, f"{TOPOLOGY}.py").endswith(f"{TOPOLOGY}.py")
    code, answer = status(airflow)
    assert code == 0 and not answer.get("two_files"), answer

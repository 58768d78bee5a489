"""A spout of the user's own through the real Airflow path: examples/landing_files.py (the guide's example, files
landing in a folder), saved as a module beside the DAG files as a user would, read by the word count job in both
Spark modes: spark-submit (the job's driver imports the module from the file the job spec names) and Spark
Connect (the task's own import). Two txids in flight, then a committed run cleared from the UI (a transactional
replay: the same files, no count changes). Then the faults, with a writer landing files all the while: a Spark
driver killed, and `txdag replay --from`. Counts equal a recount of the files; commits ordered with no gap.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import redis
from conftest import REPO, AirflowInstance
from e2e_runs import (
    Writer,
    kill_spark_driver,
    run_of_txid,
    trigger_until_drained,
    txdag_replay,
    wait_runs,
)
from support.runs import check_commits, counts

from txdag.airflow.api import unique_run_id

pytestmark = pytest.mark.own_topologies  # no wait for the hour's scheduled runs (conftest)

MODES = {"landing_submit": "submit", "landing_connect": "connect"}
FILES = {"2026-11-27T10.txt": "the cat sat\non the mat\n", "2026-11-27T11.txt": "the dog\r\n\r\nthe end",
         "2026-11-27T12.txt": "cat dog cat\n", "2026-11-27T13.txt": "one more line\n", "2026-11-27T14.txt": "mat\n"}


def dag_file(topology: str, mode: str, folder: Path, max_files: int = 2) -> str:
    return f"""# An Airflow DAG: a topology over the user's own spout, a module beside the DAG files.
from landing_files import LandingFiles

from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State

topology = TransactionalTopology(
    {topology!r},
    source=LandingFiles(folder={str(folder)!r}, max_files={max_files}),
    job={str(REPO / "spark_jobs" / "word_count.py")!r},
    states=[State("words", namespace={topology + ":words"!r})],
    spark_mode={mode!r},
    max_active_transactions=2,
)
dag = render(topology, dag_file=__file__)
"""


@pytest.mark.parametrize("topology", list(MODES))
def test_a_users_spout_beside_the_dags_is_exactly_once_through_airflow(airflow: AirflowInstance, store_of,
                                                                       tmp_path: Path, topology: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (airflow.dags_folder / "landing_files.py").write_text((REPO / "examples" / "landing_files.py").read_text())
    monkeypatch.syspath_prepend(str(airflow.dags_folder))  # as Airflow's components have it (add_dag_file reads it)
    for name, text in FILES.items():
        (tmp_path / name).write_text(text, newline="")
    airflow.add_dag_file(f"{topology}.py", dag_file(topology, MODES[topology], tmp_path))
    airflow.api.wait_dag_parsed(topology, timeout=120)
    airflow.api.unpause(topology)

    trigger_until_drained(airflow, topology, at_once=2)  # 5 files, 2 per txid: txids 1-3, then a skipped run
    records = check_commits(store_of(topology), 3)
    assert [records[t].metadata["files"] for t in (1, 2, 3)] == [list(FILES)[0:2], list(FILES)[2:4], list(FILES)[4:]]
    truth = dict(Counter(w for text in FILES.values() for line in text.splitlines() for w in line.split(" ") if w))
    state = redis.Redis.from_url(airflow.redis_url)
    assert counts(state, f"{topology}:words") == truth

    run1 = run_of_txid(records, 1)
    airflow.api.clear_run(topology, run1)  # the UI's clear of a committed run: txid 1 replays its own files
    assert airflow.api.wait_run(topology, run1, timeout=600) == "success"
    assert store_of(topology).read_txid(1)[0].metadata["files"] == list(FILES)[0:2]
    assert counts(state, f"{topology}:words") == truth
    log = airflow.api.task_log(topology, run1, "process", airflow.api.task_instance(topology, run1, "process")[
        "try_number"])
    assert "txid=1" in log


def word_counts(folder: Path) -> dict[str, int]:
    """The ground truth: the words of every landed file, counted."""
    return dict(Counter(w for f in folder.glob("*.txt") for line in f.read_text().splitlines()
                        for w in line.split(" ") if w))


def test_a_users_spout_stays_exact_through_faults_while_files_land(airflow: AirflowInstance, store_of,
                                                                   tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """spark-submit mode, two txids in flight, a writer landing a file every 2 s (written as a dot-file, then
    renamed in): txid 1's Spark driver killed (its retry reads the same files), then `txdag replay --from 1` once
    every file is read."""
    topology = "landing_faults"
    (airflow.dags_folder / "landing_files.py").write_text((REPO / "examples" / "landing_files.py").read_text())
    monkeypatch.syspath_prepend(str(airflow.dags_folder))
    for name, text in FILES.items():
        (tmp_path / name).write_text(text, newline="")

    def land(i: int) -> None:
        hidden = tmp_path / f".landing-{i}"
        hidden.write_text(f"file {i} w{i % 4}\nw{i % 3} again\n")
        hidden.rename(tmp_path / f"2026-11-28T{i:05d}.txt")

    airflow.add_dag_file(f"{topology}.py", dag_file(topology, "submit", tmp_path, max_files=6))
    airflow.api.wait_dag_parsed(topology, timeout=120)
    airflow.api.unpause(topology)
    writer = Writer(land, every=2.0)
    writer.start()
    runs = [airflow.api.trigger(topology, run_id=unique_run_id(topology)) for _ in range(2)]  # txids 1 and 2
    kill_spark_driver(topology, 1)
    wait_runs(airflow, topology, runs)
    landed = writer.stop()
    trigger_until_drained(airflow, topology, at_once=2)
    store = store_of(topology)
    last = store.read_topology()[0].committed_txid
    records = check_commits(store, last)
    assert records[1].attempt >= 2 and records[1].metadata["files"][:5] == list(FILES)
    state = redis.Redis.from_url(airflow.redis_url)
    truth = word_counts(tmp_path)
    assert counts(state, f"{topology}:words") == truth
    print(f"\nwriter: {landed} files landed while txids ran; txids 1..{last} committed, "
          f"attempts {[records[t].attempt for t in sorted(records)]}")

    out = txdag_replay(airflow, topology, 1)
    assert f"txid {last}: clearing run" in out, out
    wait_runs(airflow, topology, [run_of_txid(records, t) for t in records])
    replayed = check_commits(store, last)
    assert all(replayed[t].attempt > records[t].attempt for t in records), "a cleared run did not run again"
    assert {t: r.metadata for t, r in replayed.items()} == {t: r.metadata for t, r in records.items()}
    assert counts(state, f"{topology}:words") == truth

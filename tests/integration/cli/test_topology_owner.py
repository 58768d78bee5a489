"""Changing a topology on purpose, the way an operator does it, against real Redis and ZooKeeper: Airflow's
coordinate task (the operator a DagBag builds from the DAG file, executed in process) adopts the topology, is
refused once the DAG file's state namespace changes (no txid allocated), and goes on after ``txdag topology
accept``; ``txdag topology owner`` shows what changed; a copy in the DAG folder blocks the accept."""

from __future__ import annotations

import json
import socket

import pytest
from support.cli_project import dag_folder, drop_keys, set_connections, state_client

from txdag.cli.main import main
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import append_tweets

pytestmark = pytest.mark.usefixtures("airflow_home")
DB = 11
DAG_FILE = """
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology(
    "{topo}",
    source=TweetsSource(prefix="{topo}:", max_transaction_size=40),
    job="spark_jobs/job.py",
    states=[State("users", namespace="{topo}:users")],
    max_active_transactions=5,
)
dag = render(topology, dag_file=__file__)
"""


@pytest.fixture
def project(monkeypatch, redis_url, zk_hosts, zk_root, prefix, tmp_path):
    """Connections to the test servers, a DAG folder with the topology, and 200 tweets to read."""
    set_connections(monkeypatch, redis_url, zk_hosts, zk_root, DB)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", "spark://local")
    monkeypatch.setenv("TXDAG_AIRFLOW_URL", f"http://127.0.0.1:{unused_port()}")  # no Airflow: path order says
    monkeypatch.setenv("TXDAG_AIRFLOW_PASSWORD", "x")
    dags = dag_folder(monkeypatch, tmp_path, prefix, DAG_FILE)
    client = state_client(redis_url, DB)
    append_tweets(client, sample_tweets(200, seed=5), prefix=f"{prefix}:")
    yield dags
    drop_keys(client, prefix)


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def coordinate(dags, prefix, run_id):
    """Run the coordinate task of the DAG file as Airflow parses it now."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(dags / f"{prefix}.py"))
    assert bag.import_errors == {}
    task = next(t for t in bag.dags[prefix].tasks if t.task_id == "coordinate")
    return task.execute({"run_id": run_id})


def txdag(capsys, *args):
    capsys.readouterr()  # what the DagBag logged before
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_changed_definition_is_refused_until_accepted(project, prefix, capsys) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    assert txdag(capsys, "topology", "owner", prefix)[1].splitlines()[1].startswith(
        "owner       - (it has not run yet: its next coordinate adopts the definition it runs)")
    assert coordinate(project, prefix, "manual__1")["txid"] == 1
    code, out, _ = txdag(capsys, "topology", "owner", prefix, "--json")
    report = json.loads(out)
    assert code == 0 and report["same"] and report["owner"]["how"] == "adopted"
    assert report["owner"]["dag_file"] == report["dag_folder"]["dag_file"] == f"dags/{prefix}.py"

    dag_file = project / f"{prefix}.py"
    dag_file.write_text(dag_file.read_text().replace(f'namespace="{prefix}:users"', f'namespace="{prefix}:u2"'))
    with pytest.raises(AirflowFailException) as refused:
        coordinate(project, prefix, "manual__2")
    change = f"state 'users' namespace: '{prefix}:users' -> '{prefix}:u2'"
    assert change in str(refused.value) and f"txdag topology accept {prefix}" in str(refused.value)
    code, out, _ = txdag(capsys, "topology", "owner", prefix)
    assert code == 0 and f"differs: {change}" in out and f"txdag topology accept {prefix} records it" in out

    code, out, _ = txdag(capsys, "topology", "accept", prefix, "--dry-run")
    assert code == 0 and out.startswith(f"would accept dags/{prefix}.py") and change in out
    with pytest.raises(AirflowFailException):
        coordinate(project, prefix, "manual__2")  # a dry run records nothing
    code, out, _ = txdag(capsys, "topology", "accept", prefix)
    assert code == 0 and out.startswith(f"accepted dags/{prefix}.py (fingerprint ") and change in out
    got = coordinate(project, prefix, "manual__2")
    assert got["txid"] == 2, "the refused run consumed no txid: its retry gets the next one"
    code, out, _ = txdag(capsys, "topology", "accept", prefix)
    assert code == 0 and "nothing to accept" in out


def test_accept_refuses_while_a_copy_defines_the_topology_too(project, prefix, capsys) -> None:
    assert coordinate(project, prefix, "manual__1")["txid"] == 1
    copy = project / "zz_copy.py"
    copy.write_text((project / f"{prefix}.py").read_text())
    code, _, err = txdag(capsys, "topology", "accept", prefix)
    assert code == 1
    assert (f"txdag topology accept: topology {prefix!r} is defined by 2 DAG files ({project / f'{prefix}.py'}, "
            f"{copy}): a topology has one DAG file; delete the copy") in err


def test_a_copy_first_in_path_order_is_named_as_the_file_airflow_runs_and_status_exits_5(project, prefix,
                                                                                        capsys) -> None:
    """Issue 37: a copy of the DAG file saved as a_takeover.py with another batch size. Airflow loads the copy
    (first in path order; the owner's file fails to import) and runs its definition. status, topology owner and
    the import error name the file Airflow loads and the recorded owner, and which to delete to keep which."""
    from airflow.dag_processing.dagbag import DagBag

    assert coordinate(project, prefix, "manual__1")["txid"] == 1  # the owner: dags/<prefix>.py
    takeover = project / "a_takeover.py"
    takeover.write_text((project / f"{prefix}.py").read_text().replace("max_transaction_size=40",
                                                                        "max_transaction_size=50"))
    whole = DagBag(str(project))  # what Airflow's DAG processor ends up with
    assert whole.dags[prefix].fileloc == str(takeover)
    assert list(whole.import_errors) == [str(project / f"{prefix}.py")]
    assert (f"Airflow loads {takeover} (the first in path order) and {project / f'{prefix}.py'} fails to import"
            in whole.import_errors[str(project / f"{prefix}.py")])

    code, out, _ = txdag(capsys, "status", prefix)
    assert code == 5, out
    assert out.splitlines()[:3] == [
        f"TWO DAG FILES: topology {prefix!r} is defined by 2 DAG files: Airflow loads dags/a_takeover.py (the first "
        f"in path order; the others fail to import), so its runs use dags/a_takeover.py's definition (not the "
        f"recorded owner: that is dags/{prefix}.py). Keep one:",
        f"  to run the recorded owner's definition again: delete dags/a_takeover.py (Airflow then loads "
        f"dags/{prefix}.py; the txids the copy ran stay as committed)",
        f"  to keep the definition Airflow runs now: delete dags/{prefix}.py, then `txdag topology accept {prefix}`"]
    code, out, _ = txdag(capsys, "status")
    assert code == 5 and out.startswith(f"TWO DAG FILES: topology {prefix!r}"), out
    code, out, _ = txdag(capsys, "topology", "owner", prefix)
    assert code == 0 and "loaded by Airflow  dags/a_takeover.py (the first in path order: its definition runs)" in out
    assert f"also defined by    dags/{prefix}.py (fails to import)" in out and "delete dags/a_takeover.py" in out

    takeover.unlink()  # the first way out, as printed
    code, out, _ = txdag(capsys, "status", prefix)
    assert code == 0 and "TWO DAG FILES" not in out, out


def test_a_copy_later_in_path_order_is_the_one_to_delete(project, prefix, capsys) -> None:
    assert coordinate(project, prefix, "manual__1")["txid"] == 1
    (project / "zz_copy.py").write_text((project / f"{prefix}.py").read_text())
    code, out, _ = txdag(capsys, "status", prefix, "--json")
    assert code == 5 and json.loads(out)["two_files"] == {
        "loaded": f"dags/{prefix}.py", "others": ["dags/zz_copy.py"], "owner": f"dags/{prefix}.py", "runs_owner": True,
        "seen": "the first in path order",
        "message": f"topology {prefix!r} is defined by 2 DAG files: Airflow loads dags/{prefix}.py (the first in path "
                   f"order; the others fail to import), so its runs use dags/{prefix}.py's definition (the recorded "
                   "owner)",
        "ways_out": [f"delete dags/zz_copy.py: Airflow runs dags/{prefix}.py, the recorded owner, and the copy fails "
                     "to import"]}

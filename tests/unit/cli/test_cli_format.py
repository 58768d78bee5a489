"""The CLI without services: tables, JSON output, argument parsing, and the pure pieces of each command."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json

import pytest

from txdag.cli.common import Progress, emit, fields, table
from txdag.cli.inspect import batch_of, failures, status_text
from txdag.cli.main import build_parser, main
from txdag.cli.state import numeric, state_text, unwrap
from txdag.state import CommittedValue
from txdag.topology.topology import load_definitions
from txdag.zk.records import TxidRecord, TxStatus


def test_table_aligns_columns_with_upper_case_headers_and_no_trailing_blanks() -> None:
    rows = [{"txid": 7, "phase": "processed", "run": "manual__1"}, {"txid": 12, "phase": None, "run": "r"}]
    assert table(rows, ["txid", "phase", "run"]).splitlines() == [
        "TXID  PHASE      RUN",
        "7     processed  manual__1",
        "12    -          r",
    ]
    assert table([], ["a", "bb"], ["first", "second"]) == "FIRST  SECOND"
    assert table([{"m": {"b": 1}, "l": [1, 2]}], ["m", "l"]).splitlines()[1] == '{"b":1}  [1,2]'


def test_fields_align_the_values_of_one_record() -> None:
    assert fields([("txid", 3), ("batch size", 40), ("error", None)]).splitlines() == [
        "txid        3", "batch size  40", "error       -"]


def test_emit_prints_sorted_json_with_json_and_the_human_text_without() -> None:
    data = {"b": 1, "a": [1, 2]}
    out = io.StringIO()
    emit(argparse.Namespace(json=True), data, lambda d: "human", out)
    assert json.loads(out.getvalue()) == data and out.getvalue().index('"a"') < out.getvalue().index('"b"')
    out = io.StringIO()
    emit(argparse.Namespace(json=False), data, lambda d: f"{len(d)} things", out)
    assert out.getvalue() == "2 things\n"


def test_progress_counts_steps_and_amounts() -> None:
    out = io.StringIO()
    progress = Progress(1500, out)
    progress.step("first chunk", 1000)
    progress.step("second chunk", 500)
    assert out.getvalue().splitlines() == ["[1000/1500] first chunk", "[1500/1500] second chunk"]


@pytest.mark.parametrize("argv, expected", [
    (["status"], {"topology": None, "json": False}),
    (["status", "t", "--json"], {"topology": "t", "json": True}),
    (["show", "t", "4"], {"topology": "t", "txid": 4}),
    (["replay", "t", "--from", "3", "--dry-run"], {"from_txid": 3, "dry_run": True}),
    (["state", "get", "t", "users", "@a", "@b"], {"state": "users", "keys": ["@a", "@b"]}),
    (["state", "get", "t", "global_count"], {"keys": []}),
    (["state", "top", "t", "users", "-n", "3", "--json"], {"n": 3, "json": True}),
    (["seed", "words", "--count", "10"], {"topology": "words", "count": 10}),
    (["seed", "global_count"], {"topology": "global_count", "count": 500}),
    (["pools", "sync", "a", "b"], {"topologies": ["a", "b"], "dry_run": False}),
    (["doctor", "--check", "redis", "--check", "spark"], {"check": ["redis", "spark"], "timeout": 5.0}),
    (["status", "--redis-conn-id", "r2", "--dags", "/x"], {"redis_conn_id": "r2", "dags": "/x"}),
])
def test_arguments_parse(argv, expected) -> None:
    args = vars(build_parser().parse_args(argv))
    assert {k: args[k] for k in expected} == expected
    assert callable(args["func"])


@pytest.mark.parametrize("argv", [
    [], ["show", "t"], ["show", "t", "four"], ["replay", "t"], ["state"], ["state", "get"], ["seed", "kafka"],
    ["pools"], ["doctor", "--check", "kafka"], ["status", "--bogus"],
])
def test_usage_errors_exit_2(argv, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "usage: txdag" in capsys.readouterr().err


def test_a_known_error_is_one_line_on_stderr_and_exit_1(tmp_path, capsys) -> None:
    assert main(["state", "get", "nosuch", "users", "k", "--dags", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"txdag state get: topology 'nosuch' is not defined in the DAG folder {tmp_path} (it defines "
                   "none): check the name, or give the DAG folder with --dags or TXDAG_DAGS_FOLDER\n")


def test_batch_of_reads_both_spout_layouts() -> None:
    assert batch_of({"v": 1, "from": 41, "quantity": 40}) == ("ids 41..80", 40)
    parts = {"s:1": {"after": "5-0", "last": "9-0", "count": 4}, "s:0": {"after": "0-0", "last": None, "count": 0}}
    assert batch_of({"v": 1, "partitions": parts}) == ("s:1 (5-0, 9-0]", 4)
    assert batch_of({"v": 9}) == ("{'v': 9}", None)


def record(txid: int, status: TxStatus, failed_by: int | None = None) -> TxidRecord:
    return TxidRecord(txid, 1, status, f"run{txid}", {}, "now", failed_by=failed_by,
                      error="boom" if status is TxStatus.FAILED else None)


def test_failures_group_each_cascade_behind_the_txid_that_started_it() -> None:
    again = dataclasses.replace(record(9, TxStatus.FAILED, 8), auto_replay=True)  # txid 8 re-emitted with another batch
    records = [record(3, TxStatus.COMMITTED), record(4, TxStatus.FAILED, 4), record(5, TxStatus.FAILED, 4),
               record(6, TxStatus.FAILED, 4), record(7, TxStatus.FAILED, 2), record(8, TxStatus.EMITTED), again]
    replay = [{"when": "fix the cause, then replay it and every later txid", "command": "txdag replay t --from 4"}]
    found = failures(records, "t")
    assert found[:2] == [
        {"txid": 4, "attempt": 1, "run_id": "run4", "error": "boom", "automatic_replay": False, "headline": "boom",
         "ways_out": replay, "cascade": [5, 6]},
        {"txid": 7, "attempt": 1, "run_id": "run7", "error": "boom", "automatic_replay": False, "headline": "boom",
         "ways_out": [{**replay[0], "command": "txdag replay t --from 7"}], "cascade": []},  # its cause was replayed
    ]
    assert [(f["txid"], f["automatic_replay"]) for f in found[2:]] == [(9, True)]  # txdag re-emits it itself


FAILED_4 = {"txid": 4, "attempt": 2, "run_id": "run4", "error": "process failed: boom\nINFO noise",
            "headline": "process failed: boom", "cascade": [5],
            "ways_out": [{"when": "fix the cause, then replay", "command": "txdag replay a --from 4"}]}


def test_status_text_of_all_topologies_leads_with_the_failed_txids_then_the_table() -> None:
    report = [{"topology": "a", "committed_txid": 3, "last_txid": 5, "in_flight": [{}], "rejections": 2,
               "failed": [FAILED_4], "halted": "store behind"}]
    lines = status_text(report).splitlines()
    assert lines[:5] == ["a HALTED: store behind", "", "a: txid 4 FAILED (attempt 2, run run4): process failed: boom",
                         "  failed behind it: txid 5", "  way out: fix the cause, then replay: txdag replay a --from 4"]
    assert lines[-1].split() == ["a", "3", "5", "1", "2", "2", "HALTED"]
    assert "INFO noise" not in status_text(report)
    assert status_text([]) == "no topologies in the DAG folder or in ZooKeeper"


def test_status_text_of_one_topology_halt_then_failure_then_figures_then_in_flight() -> None:
    ways = [{"when": "restore, then replay", "command": "txdag replay a --from 4"},
            {"when": "or accept", "command": "txdag accept-missing a 4 --confirm"}]
    hole = {**FAILED_4, "cascade": [], "ways_out": ways}
    report = {"topology": "a", "committed_txid": 3, "last_txid": 6, "rejections": None, "halted": "store behind",
              "in_flight": [{"txid": 6, "attempt": 1, "phase": "processing", "run_id": "run6"}], "failed": [hole]}
    text = status_text(report)
    order = ["HALTED: store behind", "txid 4 FAILED (attempt 2, run run4): process failed: boom", "  ways out:",
             "    restore, then replay: txdag replay a --from 4", "    or accept: txdag accept-missing a 4 --confirm",
             "topology a: committed up to txid 3, last txid 6, 1 in flight, ? rejected entries", "in flight:"]
    assert [text.index(line) for line in order] == sorted(text.index(line) for line in order)
    assert "INFO noise" not in text


def test_show_text_of_a_failed_txid_leads_with_its_headline_and_keeps_the_whole_error_last() -> None:
    from txdag.cli.inspect import show_text

    d = {"topology": "a", "txid": 5, "attempt": 1, "phase": "failed", "run_id": "run5", "batch": "ids 1..9",
         "batch_size": 9, "updated_at": "now", "failed_by": 4, "error": "txid 4 failed (attempt 2): boom\nINFO noise",
         "headline": "txid 4 failed (attempt 2): boom", "commit_begun": False,
         "ways_out": [{"when": "fix the cause, then replay", "command": "txdag replay a --from 4"}],
         "history": [{"attempt": 1, "status": "failed", "at": "now", "error": "txid 4 failed (attempt 2): boom\nINFO"}]}
    lines = show_text(d).splitlines()
    assert lines[:2] == ["txid 5 FAILED behind txid 4 (attempt 1, run run5): txid 4 failed (attempt 2): boom",
                         "  way out: fix the cause, then replay: txdag replay a --from 4"]
    assert lines.index("full error:") > lines.index("history:") and lines[-1] == "INFO noise"
    assert sum("INFO" in line for line in lines) == 1, "the history shows headlines, the full error once"


def test_unwrap_shows_value_txid_and_an_opaque_values_prev() -> None:
    assert unwrap("#a", "opaque", CommittedValue(9, 5, 7)) == {"key": "#a", "value": 9, "txid": 5, "prev": 7,
                                                               "kind": "opaque"}
    assert unwrap("@b", "transactional", CommittedValue(4, 2)) == {"key": "@b", "value": 4, "txid": 2,
                                                                   "kind": "transactional"}
    assert unwrap("@b", "transactional", CommittedValue(4))["txid"] is None, "read from before a half-applied txid"
    assert unwrap("c", "opaque", None)["found"] is False
    assert unwrap("c", "non_transactional", CommittedValue(3)) == {"key": "c", "value": 3, "txid": None,
                                                                  "kind": "non_transactional", "found": True}
    assert [numeric(v) for v in (3, 2.5, "x", True, None)] == [3.0, 2.5, None, None, None]


def test_a_read_as_of_a_txid_says_so_and_what_was_half_applied() -> None:
    data = {"topology": "t", "state": "s", "kind": "transactional", "namespace": "s", "committed_txid": 4,
            "newer": 2, "isolated": True, "values": [{"key": "a", "value": 1, "txid": None}]}
    head = state_text(data).splitlines()[0]
    assert head == ("state s of topology t (transactional, Redis hash s), as of committed txid 4 (the next txid's "
                    "commit was half applied: 2 of the keys read held it already and are shown as of the txid before)")
    assert state_text({**data, "committed_txid": None, "newer": 0}).splitlines()[0].endswith(", nothing committed yet")
    assert state_text({**data, "committed_txid": None}).splitlines()[0].endswith(
        ", nothing committed yet (txid 1's commit is half applied: 2 of the keys read hold it already, not shown)")
    assert state_text({**data, "committed_from": 2, "newer": 0}).splitlines()[0].endswith(
        ", as of committed txids 2 to 4 (commits ended while it was read: each page of keys is as of one of them)")
    assert "as of" not in state_text({**data, "kind": "non_transactional", "isolated": False}).splitlines()[0]


def test_pool_bodies_validate_against_airflows_own_models() -> None:
    from airflow.api_fastapi.core_api.datamodels.pools import PoolBody, PoolPatchBody

    from txdag.airflow.api import pool_body

    body = pool_body("txdag_t", 1, "d", False)
    assert PoolBody(**body).pool == "txdag_t" and PoolBody(**body).slots == 1
    patch = PoolPatchBody(**body)
    assert (patch.name, patch.slots, patch.include_deferred) == ("txdag_t", 1, False)


def test_load_definitions_reads_the_dag_folder_and_reports_a_broken_file(tmp_path) -> None:
    (tmp_path / "dags").mkdir()
    (tmp_path / "spark_jobs").mkdir()
    (tmp_path / "spark_jobs" / "job.py").write_text("")
    (tmp_path / "dags" / "good.py").write_text(
        "from txdag import TransactionalTopology\nfrom txdag.airflow import render\n"
        "from txdag.topology.definition import State, TweetsSource\n"
        "t = TransactionalTopology('good', source=TweetsSource(), job='spark_jobs/job.py', states=[State('s')])\n"
        "dag = render(t, dag_file=__file__)\n")
    (tmp_path / "dags" / "bad.py").write_text("raise ImportError('no module named x')\n")
    found, errors = load_definitions(tmp_path / "dags")
    assert list(found) == ["good"]
    assert found["good"].project_dir == str(tmp_path)
    assert errors == {str(tmp_path / "dags" / "bad.py"): "ImportError: no module named x"}


def test_the_files_airflow_lists_hold_linked_subfolders_and_load_as_airflow_loads_them(tmp_path) -> None:
    from txdag.airflow.rendering import dag_files

    (tmp_path / "project" / "dags").mkdir(parents=True)
    (tmp_path / "project" / "spark_jobs").mkdir()
    (tmp_path / "project" / "spark_jobs" / "job.py").write_text("")
    (tmp_path / "project" / "dags" / "good.py").write_text(
        "from txdag import TransactionalTopology\nfrom txdag.airflow import render\n"
        "from txdag.topology.definition import State, TweetsSource\n"
        "t = TransactionalTopology('good', source=TweetsSource(), job='spark_jobs/job.py', states=[State('s')])\n"
        "dag = render(t, dag_file=__file__)\n")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "linked").symlink_to(tmp_path / "project" / "dags", target_is_directory=True)
    assert load_definitions(tmp_path / "home") == ({}, {})
    found, errors = load_definitions(tmp_path / "home", dag_files(tmp_path / "home"))
    assert list(found) == ["good"] and errors == {}
    assert found["good"].project_dir == str(tmp_path / "project")


@pytest.mark.parametrize(("health", "status", "deferred"), [
    ({"scheduler": {"status": "healthy"}, "triggerer": {"status": None}}, "warn", True),
    ({"scheduler": {"status": "unhealthy"}, "triggerer": {"status": "healthy"}}, "warn", False),
    ({"scheduler": {"status": "healthy"}, "triggerer": {"status": "healthy"}}, "ok", False),
])
def test_doctor_says_what_a_missing_triggerer_costs(monkeypatch, health, status, deferred) -> None:
    """txdag's waits are deferred on the triggerer: without one they never resume, so doctor names them."""
    from types import SimpleNamespace

    from txdag.airflow import api
    from txdag.cli.doctor import check_airflow

    monkeypatch.setattr(api, "api_from_env", lambda: SimpleNamespace(base_url="http://x", health=lambda: health))
    [check] = check_airflow(argparse.Namespace())
    assert check.status == status
    assert ("txdag's waiting tasks stay deferred" in check.fix) is deferred, check.fix
    assert ("start one with `airflow triggerer`" in check.fix) is deferred


NOISY_DAG = """
import logging, sys
from airflow.sdk import BaseHook  # a plain DAG file: Airflow imported, a connection looked up at parse time

print("2026-11-28 a DAG file that prints")
logging.getLogger("airflow.noisy").warning("2026-11-28 and logs")
ROOT = BaseHook.get_connection("zookeeper_default").extra_dejson.get("root")
"""


def test_json_stays_json_when_a_dag_file_prints_and_logs_at_parse_time(tmp_path) -> None:
    """txdag doctor --json, beside a plain DAG file that prints and makes Airflow log while it is parsed (as the e2e
    DAG folder has), and with a connection Airflow warns about: what else is written goes to stderr, the result
    alone to stdout."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "noisy.py").write_text(NOISY_DAG)
    root = Path(__file__).resolve().parents[3]
    for name in ("dags/word_count.py", "dags_warm/tweets_analytics.py"):  # the second: a Spark Connect topology
        shipped = (root / name).read_text()
        (dags / name.replace("/", "_")).write_text(shipped.replace('"spark_jobs/', f'"{root}/spark_jobs/'))
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "home"), "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
           "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": json.dumps({"conn_type": "zookeeper", "host": "127.0.0.1"}),
           # Airflow warns, on stdout, that a spark_connect connection's scheme has a '_' when it reads one
           "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT": json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1",
                                                             "port": 15092})}
    done = subprocess.run([str(Path(sys.executable).parent / "txdag"), "doctor", "--check", "connections", "--json",
                           "--dags", str(dags)], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    checks = {c["check"]: c["status"] for c in json.loads(done.stdout)["checks"]}
    assert checks["connection zookeeper_default"] == checks["connection spark_connect_default"] == "ok", done.stdout
    assert "a DAG file that prints" in done.stderr


def test_a_reader_gone_drops_the_rest_of_the_result_and_the_command_goes_on(tmp_path) -> None:
    """`txdag seed words --count 4000 | head -1`: the pipe closes after the first line; the writes after it are
    dropped, not a BrokenPipeError that ends the work halfway (exit 70, 'a bug in txdag')."""
    import subprocess
    import sys

    script = ("import sys\nfrom txdag.cli.common import ReaderSafe, result_stream, results_to\n"
              "with results_to(ReaderSafe(sys.stdout)):\n"
              "    for i in range(100000):\n        print(i, file=result_stream(), flush=True)\n"
              "print('all written', file=sys.stderr)\n")
    done = subprocess.run(f"'{sys.executable}' -c \"$SCRIPT\" | head -1", shell=True, capture_output=True,
                          text=True, timeout=60, env={"SCRIPT": script, "PATH": "/usr/bin:/bin"})
    assert done.stdout == "0\n" and done.stderr == "all written\n", done

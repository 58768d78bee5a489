"""The ``txdag`` command against mistakes that need no service: a wrong command line (exit 2, as argparse's own),
a missing environment (exit 5, and nothing left behind), a DAG folder that is not there. Each answer names the
problem and the fix, with no traceback. The cases against real Redis and ZooKeeper (services down, wrong passwords,
unknown names) are in tests/integration/cli/test_mistakes.py; the exit codes are txdag.cli.exits'."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.mistakes import check_answer

from txdag.cli import exits
from txdag.cli.main import main

ROOT = Path(__file__).resolve().parents[3]

USAGE = [  # what the user types, and what argparse's answer must say (exit 2)
    (["show", "t", "four"], ["argument txid: a txid must be an integer >= 1, got 'four'"]),
    (["show", "t", "0"], ["argument txid: a txid must be an integer >= 1, got '0'"]),
    (["show", "t", "-5"], ["a txid must be an integer >= 1, got '-5'"]),
    (["show", "../etc", "1"], ["argument topology: a topology id is letters, digits, '_', '.' and '-'", "'../etc'"]),
    (["status", "a b"], ["a topology id is letters, digits"]),
    (["replay", "t", "--from", "0"], ["argument --from: a txid must be an integer >= 1, got '0'"]),
    # txids in ASCII digits alone (issue 37): Python's int() reads each of these as a number
    (["show", "t", "3_0"], ["argument txid: a txid must be an integer >= 1 written in digits 0-9 alone (no sign, "
                            "space or '_'), got '3_0'"]),
    (["show", "t", " 3 "], ["argument txid: a txid must be an integer >= 1 written in digits 0-9 alone", "' 3 '"]),
    (["show", "t", "\uff13"], ["argument txid: a txid must be an integer >= 1 written in digits 0-9", "'\uff13'"]),
    (["show", "t", "+3"], ["argument txid: a txid must be an integer >= 1 written in digits 0-9", "'+3'"]),
    (["replay", "t", "--from", "3_0"], ["argument --from: a txid must be an integer >= 1 written in digits 0-9"]),
    (["retry", "t", "\uff14"], ["argument txid: a txid must be an integer >= 1 written in digits 0-9"]),
    (["accept-missing", "t", "+8"], ["argument txid: a txid must be an integer >= 1 written in digits 0-9"]),
    (["state", "top", "t", "s", "-n", "1_0"], ["argument -n: must be an integer >= 1 written in digits 0-9"]),
    (["status", "--dags", ""], ["argument --dags: the DAG folder is empty ('')", "leave --dags out"]),
    (["acl", "redis", "--dags", ""], ["argument --dags: the DAG folder is empty"]),
    (["replay", "t"], ["the following arguments are required: --from"]),
    (["retry", "t", "0"], ["argument txid: a txid must be an integer >= 1, got '0'"]),
    (["retry", "t"], ["the following arguments are required: txid"]),
    (["rejections", "t", "--limit", "-1"], ["argument --limit: must be an integer >= 0, got '-1'"]),
    (["state", "top", "t", "s", "-n", "0"], ["argument -n: must be an integer >= 1, got '0'"]),
    (["seed", "kafka"], ["argument topology: invalid choice: 'kafka'"]),
    (["seed", "tweets", "--count", "0"], ["argument --count: must be an integer from 1 to 1000000, got '0'"]),
    (["seed", "words", "--count", "99999999999"], ["must be an integer from 1 to 1000000, got '99999999999'"]),
    (["seed", "words", "--seed", "\uff13"], ["argument --seed: must be an integer >= 0 written in digits 0-9 alone"]),
    (["doctor", "--timeout", "-1"], ["argument --timeout: seconds must be a number > 0 and <= 600, got '-1'"]),
    (["doctor", "--timeout", "nan"], ["seconds must be a number > 0", "'nan'"]),
    (["doctor", "--timeout", "1e9"], ["seconds must be a number > 0 and <= 600, got '1e9'"]),
    (["doctor", "--check", "kafka"], ["argument --check: invalid choice: 'kafka'"]),
    (["state", "dump", "t:s", "--limit", "-1"], ["argument --limit: must be an integer >= 0"]),
    (["state", "migrate", "t:s", "--chunk", "0"], ["argument --chunk: must be an integer >= 1"]),
    (["pools", "sync", "a/b"], ["a topology id is letters, digits"]),
    (["reset", "*", "--confirm"], ["a topology id is letters, digits", "'*'"]),
    (["topology", "accept", "../x"], ["a topology id is letters, digits", "'../x'"]),
    (["accept-missing", "t", "eight"], ["argument txid: a txid must be an integer >= 1, got 'eight'"]),
    (["accept-missing", "t"], ["the following arguments are required: txid"]),
    (["accept-missing", "../t", "8"], ["a topology id is letters, digits", "'../t'"]),
    (["status", "--bogus"], ["unrecognized arguments: --bogus"]),
    (["status", "--zookeeper-conn-id", "my zk"], ["argument --zookeeper-conn-id: a connection id is letters"]),
    (["doctor", "--spark-conn-id", ""], ["argument --spark-conn-id: a connection id is letters", "got ''"]),
]


@pytest.mark.parametrize("argv, fragments", USAGE, ids=[" ".join(a) for a, _ in USAGE])
def test_a_wrong_command_line_exits_2_naming_the_argument(argv, fragments, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    check_answer(exc.value.code, out + err, exits.USAGE, ["usage: txdag", *fragments], what=" ".join(argv))


@pytest.fixture
def no_environment(monkeypatch, tmp_path) -> Path:
    """A shell without Airflow's environment: no AIRFLOW_CONN_*, an empty AIRFLOW_HOME (returned)."""
    for name in list(os.environ):
        if name.startswith(("AIRFLOW_CONN_", "AIRFLOW__DATABASE__", "TXDAG_DAGS_FOLDER", "AIRFLOW__CORE__DAGS",
                            "AIRFLOW__TXDAG__DAGS")):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("AIRFLOW_HOME", str(home))
    monkeypatch.setenv("TXDAG_AIRFLOW_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("TXDAG_AIRFLOW_PASSWORD", raising=False)
    monkeypatch.delenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", raising=False)
    return home


DAGS = str(ROOT / "dags")
NO_ENVIRONMENT = [  # a command run without `eval "$(bash scripts/airflow.sh env)"`: exit 5, naming what to set
    (["status"], exits.CONFIG, ["Airflow connection 'zookeeper_default' is not defined",
                                "set AIRFLOW_CONN_ZOOKEEPER_DEFAULT", "scripts/airflow.sh env"]),
    (["show", "tweets_analytics", "1", "--dags", DAGS], exits.CONFIG, ["set AIRFLOW_CONN_ZOOKEEPER_DEFAULT"]),
    (["replay", "tweets_analytics", "--from", "1", "--dags", DAGS], exits.CONFIG,
     ["set AIRFLOW_CONN_ZOOKEEPER_DEFAULT"]),
    (["rejections", "tweets_analytics", "--dags", DAGS], exits.CONFIG, ["set AIRFLOW_CONN_REDIS_DEFAULT"]),
    (["state", "get", "word_count", "words", "hello", "--dags", DAGS], exits.CONFIG,
     ["set AIRFLOW_CONN_REDIS_DEFAULT"]),
    (["state", "top", "tweets_analytics", "users", "--dags", DAGS], exits.CONFIG, ["set AIRFLOW_CONN_REDIS_DEFAULT"]),
    (["state", "dump", "t:s"], exits.CONFIG, ["Airflow connection 'redis_default' is not defined"]),
    (["seed", "words"], exits.CONFIG, ["set AIRFLOW_CONN_REDIS_DEFAULT"]),
    (["state", "migrate", "t:s"], exits.CONFIG, ["set AIRFLOW_CONN_REDIS_DEFAULT"]),
    (["reset", "tweets_analytics", "--dags", DAGS], exits.CONFIG, ["set AIRFLOW_CONN_ZOOKEEPER_DEFAULT"]),
    (["topology", "owner", "tweets_analytics", "--dags", DAGS], exits.CONFIG, ["set AIRFLOW_CONN_ZOOKEEPER_DEFAULT"]),
    (["accept-missing", "tweets_analytics", "8", "--dags", DAGS], exits.CONFIG,
     ["set AIRFLOW_CONN_ZOOKEEPER_DEFAULT"]),
    (["accept-missing", "word_count", "8", "--dags", DAGS], exits.REFUSED,  # refused before any service is asked
     ["reads a streams source", "entries lost from it cannot be listed", "txdag reset word_count --confirm"]),
    (["pools", "sync", "--dags", DAGS], exits.CONFIG, ["no Airflow password", "set TXDAG_AIRFLOW_PASSWORD"]),
    (["doctor", "--check", "redis", "--check", "zookeeper"], exits.FAILED,
     ["set AIRFLOW_CONN_REDIS_DEFAULT=", "set AIRFLOW_CONN_ZOOKEEPER_DEFAULT=", "2 check(s) failed"]),
]


@pytest.mark.parametrize("argv, code, fragments", NO_ENVIRONMENT, ids=[" ".join(a[:2]) for a, _, _ in NO_ENVIRONMENT])
def test_without_the_environment_a_command_says_what_to_set(no_environment, argv, code, fragments, capsys) -> None:
    got = main(argv)
    out, err = capsys.readouterr()
    check_answer(got, out + err, code, fragments, what=" ".join(argv))


FOLDERS = [  # a DAG folder that is not there: exit 2 from --dags, 5 from a variable
    (["status", "--dags", "/nonexistent/dags"], {}, exits.USAGE,
     ["the DAG folder /nonexistent/dags (--dags) does not exist", "give the folder that holds"]),
    (["status", "t", "--dags", __file__], {}, exits.USAGE, ["(--dags) is not a folder"]),
    (["state", "get", "t", "s", "k"], {"TXDAG_DAGS_FOLDER": "/nonexistent/dags"}, exits.CONFIG,
     ["the DAG folder /nonexistent/dags ($TXDAG_DAGS_FOLDER) does not exist"]),
    (["state", "get", "t", "s", "k"], {"AIRFLOW__TXDAG__DAGS_FOLDER": "/nowhere", "AIRFLOW__CORE__DAGS_FOLDER": "/tmp"},
     exits.CONFIG, ["the DAG folder /nowhere ($AIRFLOW__TXDAG__DAGS_FOLDER) does not exist"]),
    (["acl", "redis", "--dags", "/nonexistent/dags"], {}, exits.USAGE, ["(--dags) does not exist"]),
]


@pytest.mark.parametrize("argv, env, code, fragments", FOLDERS, ids=[" ".join(a) for a, _, _, _ in FOLDERS])
def test_a_dag_folder_that_is_not_there_is_named(no_environment, monkeypatch, argv, env, code, fragments,
                                                 capsys) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    got = main(argv)
    out, err = capsys.readouterr()
    check_answer(got, out + err, code, fragments, what=" ".join(argv))


READS = [["status"], ["status", "--dags", DAGS], ["show", "tweets_analytics", "2", "--dags", DAGS],
         ["rejections", "tweets_analytics", "--dags", DAGS], ["state", "top", "tweets_analytics", "users", "--dags",
                                                              DAGS], ["state", "dump", "t:s"], ["seed", "tweets"],
         ["replay", "tweets_analytics", "--from", "1", "--dags", DAGS], ["pools", "sync", "--dags", DAGS],
         ["acl", "redis", "--dags", DAGS], ["reset", "tweets_analytics", "--dags", DAGS],
         ["topology", "owner", "tweets_analytics", "--dags", DAGS],
         ["doctor", "--timeout", "1", "--dags", DAGS], ["--version"]]
SCRIPT = """
import json, os, sys
from pathlib import Path
from txdag.cli.main import main
home = Path(os.environ["HOME"])
for argv in json.loads(sys.argv[1]):
    try:
        main(argv)
    except SystemExit:
        pass
    left = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    print(json.dumps({"argv": argv, "left": left, "airflow": "airflow" in sys.modules}), flush=True)
"""


def test_a_command_run_without_the_environment_leaves_nothing_behind(tmp_path) -> None:
    """Importing Airflow creates $AIRFLOW_HOME/logs, and looking a connection up in its absent metadata database
    creates airflow.db there: with HOME and AIRFLOW_HOME an empty folder, no command creates anything (a fresh
    process, as a shell runs it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "TXDAG_"))}
    env.update(HOME=str(tmp_path), AIRFLOW_HOME=str(tmp_path), TXDAG_AIRFLOW_URL="http://127.0.0.1:9")
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(READS)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(READS), done.stderr[-2000:]
    for result in results:
        assert result["left"] == [], f"txdag {' '.join(result['argv'])} left {result['left']} in HOME"
        assert result["airflow"] is False, f"txdag {' '.join(result['argv'])} imported Airflow"
    assert "Traceback" not in done.stderr, done.stderr[-2000:]


def test_each_kind_of_error_has_its_exit_code() -> None:
    """txdag.cli.exits is the one table: a service down 3, a refusal 4, a configuration 5, anything else of txdag's 1,
    what is not txdag's 70 (a bug); a CliError carries its own."""
    from txdag.cli.common import CliError
    from txdag.errors import (
        AccessDenied,
        CascadeError,
        ConfigError,
        FormatVersionError,
        ServiceUnavailable,
        SourceUnavailable,
        StoreWentBackwards,
        TxdagError,
    )
    from txdag.state.kv.errors import KVStateError
    from txdag.txid.holes import AcceptRefused
    from txdag.txid.report import ReplayRefused

    expected = [(ServiceUnavailable("x"), 3), (SourceUnavailable("x"), 3), (ReplayRefused("x"), 4),
                (AcceptRefused("x"), 4),
                (KVStateError("x"), 4), (CascadeError("x"), 4), (StoreWentBackwards("x"), 4), (ConfigError("x"), 5),
                (AccessDenied("x"), 5), (FormatVersionError("x"), 5), (TxdagError("x"), 1), (ValueError("x"), 70),
                (CliError("x"), 1), (CliError("x", exits.USAGE), 2)]
    assert [(type(e).__name__, exits.code_of(e)) for e, _ in expected] == [(type(e).__name__, c) for e, c in expected]
    assert len({exits.OK, exits.FAILED, exits.USAGE, exits.UNAVAILABLE, exits.REFUSED, exits.CONFIG, exits.INTERNAL,
                exits.INTERRUPTED}) == 8


def test_an_unexpected_error_is_one_line_saying_it_is_a_bug_and_how_to_see_its_traceback(monkeypatch,
                                                                                        capsys) -> None:
    from txdag.cli import inspect

    def broken(args):
        raise KeyError("boom")

    monkeypatch.setattr(inspect, "cmd_status", broken)
    assert main(["status"]) == exits.INTERNAL
    check_answer(exits.INTERNAL, capsys.readouterr().err, exits.INTERNAL,
                 ["txdag status: unexpected KeyError: 'boom' (a bug in txdag: rerun with TXDAG_TRACEBACK=1"])
    monkeypatch.setenv(exits.TRACEBACK_ENV, "1")
    with pytest.raises(KeyError):
        main(["status"])

"""DAG files with a mistake, as the ``txdag`` command and the transactions page read them: each file's error names
what to change (a misspelt keyword comes with the one meant), and the other files of the folder still load. The
values a definition refuses one by one are the kept corpus of test_bad_definitions.py; these are whole files."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.mistakes import check_answer

from txdag.airflow import definitions_only
from txdag.cli import exits
from txdag.cli.main import main
from txdag.topology.topology import load_definitions

HEAD = ("from txdag import TransactionalTopology\nfrom txdag.airflow import render\n"
        "from txdag.topology.definition import State, StreamsSource, TweetsSource\n")
GOOD = "dag = render(TransactionalTopology({args}), dag_file=__file__)\n"
BASE = "'{name}', source=TweetsSource(), job='spark_jobs/job.py', states=[State('s')]"

DAG_FILES = [  # what the DAG file says, and what its error must say
    ("a misspelt keyword", GOOD.format(args="'t', sorce=TweetsSource(), job='spark_jobs/job.py', states=[State('s')]"),
     ["unexpected keyword argument 'sorce'", "did you mean 'source'?", "TransactionalTopology takes topology_id"]),
    ("a misspelt keyword of a state", GOOD.format(args="'t', source=TweetsSource(), job='spark_jobs/job.py', "
                                                       "states=[State('s', knd='opaque')]"),
     ["unexpected keyword argument 'knd'", "did you mean 'kind'?", "State takes name, kind"]),
    ("a misspelt keyword of a source", GOOD.format(args="'t', source=TweetsSource(max_batch=10), "
                                                        "job='spark_jobs/job.py', states=[State('s')]"),
     ["unexpected keyword argument 'max_batch'", "TweetsSource takes max_transaction_size"]),
    ("an unknown state kind", GOOD.format(args="'t', source=TweetsSource(), job='spark_jobs/job.py', "
                                               "states=[State('s', kind='exactly_once')]"),
     ["state 's': unknown kind 'exactly_once'", "use one of"]),
    ("a spout batch size of 0", GOOD.format(args="'t', source=TweetsSource(max_transaction_size=0), "
                                                 "job='spark_jobs/job.py', states=[State('s')]"),
     ["TweetsSource max_transaction_size must be an int >= 1, got 0"]),
    ("two states with one name", GOOD.format(args="'t', source=TweetsSource(), job='spark_jobs/job.py', "
                                                  "states=[State('s'), State('s', kind='opaque')]"),
     ["topology 't': duplicate state name(s) ['s']", "give each state its own"]),
    ("a job file that does not exist", GOOD.format(args="'t', source=TweetsSource(), job='spark_jobs/nosuch.py', "
                                                        "states=[State('s')]"),
     ["the Spark job", "spark_jobs/nosuch.py does not exist", "put the job in spark_jobs/"]),
    ("a misspelt schedule preset", GOOD.format(args=BASE.format(name="t") + ", schedule='@hurly'"),
     ["schedule '@hurly' is neither one of @once", "@hourly", "nor a cron expression"]),
    ("a schedule that is no cron expression", GOOD.format(args=BASE.format(name="t") + ", schedule='every 5 min'"),
     ["schedule 'every 5 min'", "five fields, e.g. '*/5 * * * *'"]),
    ("a topology id with a space", GOOD.format(args=BASE.format(name="my topology")),
     ["topology_id must be a non-empty string of letters, digits"]),
    ("a single stream given as a string", GOOD.format(args="'t', source=StreamsSource('events'), "
                                                           "job='spark_jobs/job.py', states=[State('s')]"),
     ["StreamsSource needs a non-empty list of stream keys, got 'events'"]),
    ("no variable keeps the topology", "render(TransactionalTopology(" + BASE.format(name="t") +
     "), dag_file=__file__)\n", ["keeps neither it nor its DAG in a module variable", "write dag = render("]),
    ("a relative job without dag_file", "dag = render(TransactionalTopology(" + BASE.format(name="t") + "))\n",
     ["is relative and render() does not know where the DAG file is", "dag_file=__file__"]),
    ("a syntax error", "dag = render(TransactionalTopology(\n", ["SyntaxError"]),
    ("a misspelt import", "from txdag.topology.definition import Stat\n", ["ImportError", "'Stat'"]),
    ("a file that exits", "import sys\nsys.exit(3)\n", ["SystemExit: 3"]),
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "dags").mkdir()
    (tmp_path / "spark_jobs").mkdir()
    (tmp_path / "spark_jobs" / "job.py").write_text("")
    (tmp_path / "dags" / "good.py").write_text(HEAD + GOOD.format(args=BASE.format(name="good")))
    return tmp_path


@pytest.mark.parametrize("what, body, fragments", DAG_FILES, ids=[case[0] for case in DAG_FILES])
def test_a_dag_file_with_a_mistake_says_what_to_change(project, what, body, fragments) -> None:
    path = project / "dags" / "mistake.py"
    path.write_text(HEAD + body)
    with definitions_only():  # as the txdag command reads the folder
        found, errors = load_definitions(project / "dags")
    assert list(found) == ["good"], f"{what}: the other DAG files still load"
    check_answer(0, errors.get(str(path), ""), 0, fragments, what=what)
    found, rendered = load_definitions(project / "dags")  # as Airflow and the page do: the same error
    assert list(found) == ["good"] and rendered == errors


def test_the_command_warns_about_each_broken_file_and_names_them_when_a_topology_is_missing(project, capsys) -> None:
    for i, (_, body, _) in enumerate(DAG_FILES):
        (project / "dags" / f"mistake{i}.py").write_text(HEAD + body)
    code = main(["state", "get", "t", "s", "k", "--dags", str(project / "dags")])
    out, err = capsys.readouterr()
    check_answer(code, out + err, exits.FAILED, [
        "topology 't' is not defined in the DAG folder", "(it defines good;", f"{len(DAG_FILES)} DAG file(s) failed "
        "to load, see the warnings above", "did you mean 'source'?"], what="a folder of broken DAG files")
    warnings = [line for line in err.splitlines() if line.startswith("txdag: warning: skipped DAG file")]
    assert len(warnings) == len(DAG_FILES)

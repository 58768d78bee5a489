"""The bad-definition part of the kept corpus (tests/data/bad_input/topologies.json): every wrong value is refused
when the definition is built, with a message that names the value, its owner and the topology."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from txdag import TransactionalTopology
from txdag.errors import ConfigError, FormatVersionError
from txdag.spouts.base import Source, SpoutKind
from txdag.topology.definition import State, StreamsSource, TweetsSource, source_from_dict

CORPUS = json.loads((Path(__file__).parents[2] / "data" / "bad_input" / "topologies.json").read_text())
ERRORS = {"ConfigError": ConfigError, "FormatVersionError": FormatVersionError}


def topology(job: Path, args: dict) -> TransactionalTopology:
    """Build a TransactionalTopology from JSON args: sources and states as dicts, ``$JOB`` an existing job file."""
    args = {**CORPUS["topology_defaults"], **args}
    if isinstance(args["source"], dict):
        args["source"] = source_from_dict(args["source"])
    args["states"] = [State.from_dict(s) for s in args["states"]]
    args["job"] = str(job) if args["job"] == "$JOB" else args["job"]
    return TransactionalTopology(args.pop("topology_id"), **args, project_dir=str(job.parent))


BUILDERS = {"State": lambda _, a: State(**a), "TweetsSource": lambda _, a: TweetsSource(**a),
            "StreamsSource": lambda _, a: StreamsSource(**a), "source_from_dict": lambda _, a: source_from_dict(a),
            "TransactionalTopology": topology}  # fmt: skip


@pytest.fixture
def job(tmp_path: Path) -> Path:
    path = tmp_path / "job.py"
    path.write_text("")
    return path


def test_the_defaults_build(job: Path) -> None:
    """The corpus' baseline is valid, so each case fails because of its own bad value only."""
    assert topology(job, {}).topology_id == "bad_topology"


@pytest.mark.parametrize("case", CORPUS["cases"], ids=lambda c: f"{c['build']}-{json.dumps(c['args'])}")
def test_a_bad_definition_value_is_refused_saying_what_and_where(job: Path, case: dict) -> None:
    with pytest.raises(ERRORS[case.get("error_type", "ConfigError")]) as info:
        BUILDERS[case["build"]](job, case["args"])
    message = str(info.value)
    assert case["error"] in message
    if case["build"] == "TransactionalTopology":
        assert repr(case["args"].get("topology_id", "bad_topology")) in message, "the message names the topology"


def test_the_longest_wait_between_automatic_replays_is_not_shorter_than_the_first(job: Path) -> None:
    from datetime import timedelta

    with pytest.raises(ConfigError, match=r"topology 'bad_topology': max_retry_delay \(0:00:10\) is shorter than "
                                          r"retry_delay \(0:01:00\)"):
        topology(job, {"retry_delay": timedelta(minutes=1), "max_retry_delay": timedelta(seconds=10)})
    with pytest.raises(ConfigError, match="retry_delay must be a datetime.timedelta >= 0"):
        topology(job, {"retry_delay": timedelta(seconds=-1)})
    assert topology(job, {"retries": 0, "max_retry_delay": timedelta(minutes=1)}).max_retry_delay.seconds == 60


@pytest.mark.parametrize("streams", [{"s0", "s1", "s2"}, frozenset({"s0", "s1"}), {"s0": 1}])
def test_streams_without_an_order_are_refused(streams) -> None:
    """The streams' order is part of the fingerprint; a set's changes with PYTHONHASHSEED, so each task process would
    see another definition."""
    with pytest.raises(ConfigError, match="a set has no order"):
        StreamsSource(streams)


@pytest.mark.parametrize("field", ["states", "sinks", "key_values"])
@pytest.mark.parametrize("given", [State("users"), None, "users"])
def test_one_state_or_none_where_a_list_is_due_is_named(job: Path, field: str, given) -> None:
    with pytest.raises(ConfigError, match=rf"topology 'bad_topology': {field} must be a list of \w+\(\.\.\.\), got"):
        TransactionalTopology("bad_topology", source=TweetsSource(), job=str(job), project_dir=str(job.parent),
                              **{"states": [State("users")], field: given})


def test_a_topology_id_longer_than_airflow_names_take_is_refused(job: Path) -> None:
    TransactionalTopology("t" * 200, source=TweetsSource(), job=str(job), states=[State("users")])
    with pytest.raises(ConfigError, match=r"topology_id must be at most 200 characters .* got 201: 'tttt"):
        TransactionalTopology("t" * 201, source=TweetsSource(), job=str(job), states=[State("users")])


def test_a_job_that_is_a_folder_is_named_so(tmp_path: Path) -> None:
    (tmp_path / "job.py").mkdir()
    with pytest.raises(ConfigError, match=r"the Spark job .*job.py is a folder, not a file"):
        TransactionalTopology("t", source=TweetsSource(), job=str(tmp_path / "job.py"), states=[State("users")])


@pytest.mark.parametrize("given", ["t1", None, State("users")])
def test_render_of_something_else_than_a_topology_says_what_it_takes(given) -> None:
    from txdag.airflow import render

    with pytest.raises(ConfigError, match=r"render\(\) takes a txdag.TransactionalTopology\(\.\.\.\), got"):
        render(given)


@pytest.mark.parametrize(("source", "states", "marker_key", "said"), [
    (TweetsSource(), [State("s", namespace="txdag:committed:{t1}")], None,
     "the namespace of state 's' is the commit marker 'txdag:committed:{t1}'"),
    (StreamsSource(["words"]), [State("words")], None,
     "state 'words' would write the key 'words', which the source reads on the same connection 'redis_default'"),
    (TweetsSource(), [State("users")], "NEXT_WRITE", "marker_key would write the key 'NEXT_WRITE', which the source"),
    (TweetsSource(prefix="in*:"), [State("users")], "in*:NEXT_READ", "marker_key would write the key 'in*:NEXT_READ'"),
    (TweetsSource(prefix="in:"), [State("users", namespace="in:users")], None, None),  # not a key the source reads
    (TweetsSource(), [State("h1", namespace="1h_counts")], "1st", None),  # the ids' pattern: only exact keys count
    (TweetsSource(redis_conn_id="source"), [State("users")], "NEXT_WRITE", None),  # another Redis than the states'
    (StreamsSource(["a", "b"], stream_conn_ids={"b": "other"}), [State("w", namespace="b")], None, None),
])
def test_a_key_the_commit_writes_is_neither_the_marker_nor_the_sources(job: Path, source, states, marker_key,
                                                                      said) -> None:
    """A state over the source's stream or NEXT_WRITE as the marker would fail the first commit (a key of another
    type) or overwrite the source: refused where the states and the source share a Redis."""
    def build() -> TransactionalTopology:
        return TransactionalTopology("t1", source=source, job=str(job), states=states, marker_key=marker_key)

    if said is None:
        assert build().topology_id == "t1"
    else:
        with pytest.raises(ConfigError, match=re.escape(f"topology 't1': {said}")):
            build()


@dataclass(frozen=True)
class NoInputs(Source):
    """A source of a user's whose inputs() fails (it is asked which keys it reads when the topology is defined)."""

    kind = SpoutKind.TRANSACTIONAL

    def build(self, context: object) -> object:
        raise NotImplementedError

    def inputs(self) -> list:
        raise RuntimeError("not written yet")


def test_a_source_whose_inputs_fail_is_named(job: Path) -> None:
    with pytest.raises(ConfigError, match=r"topology 't1': its source's inputs\(\) failed \(RuntimeError: not written "
                                          r"yet\): it must return SourceInput"):
        TransactionalTopology("t1", source=NoInputs(), job=str(job), states=[State("users")])

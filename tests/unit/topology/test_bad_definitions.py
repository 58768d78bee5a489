"""The bad-definition part of the kept corpus (tests/data/bad_input/topologies.json): every wrong value is refused
when the definition is built, with a message that names the value, its owner and the topology."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txdag import TransactionalTopology
from txdag.errors import ConfigError, FormatVersionError
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

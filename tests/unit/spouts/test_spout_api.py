"""The public spout API's pure parts: what a source must be to travel to the Spark job, the defaults a spout
inherits, and the guide that shows them (docs/spouts.md carries the tested example verbatim)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from txdag import TransactionAttempt
from txdag.errors import ConfigError
from txdag.spouts import Source, SpoutContext, SpoutKind, TransactionalSpout
from txdag.spouts.base import reads_with_spark, source_params
from txdag.spouts.streams import OpaquePartitionedStreamSpout
from txdag.spouts.tweets import TweetsTransactionalSpout
from txdag.topology.definition import JobSpec, State, StreamsSource, TweetsSource, source_from_dict

ROOT = Path(__file__).resolve().parents[3]


class Counting(TransactionalSpout):
    kind = SpoutKind.OPAQUE

    def is_ready(self, prev_metadata):
        return True

    def initialize_transaction(self, txid, prev_metadata):
        return {"n": txid}


@dataclass(frozen=True)
class CountingSource(Source):
    upto: int = 3
    kind = SpoutKind.OPAQUE

    def build(self, context: SpoutContext) -> TransactionalSpout:
        return Counting()


@dataclass(frozen=True)
class NoKind(Source):
    def build(self, context: SpoutContext) -> TransactionalSpout:
        return Counting()


def test_the_guide_shows_the_tested_example_verbatim() -> None:
    example = (ROOT / "examples" / "landing_files.py").read_text()
    assert f"```python\n{example}```" in (ROOT / "docs" / "spouts.md").read_text()


def test_a_spout_inherits_the_optional_parts_of_storms_lifecycle() -> None:
    spout = Counting()
    assert spout.lag(None) is None and spout.batch_size({"n": 1}) is None
    assert spout.cleanup_before(5) is None and spout.close() is None
    assert not reads_with_spark(spout), "no read of its own: the job reads it through emit_batch"
    with pytest.raises(ConfigError, match="Counting has no emit_batch: it is read by Spark only"):
        spout.emit_batch(TransactionAttempt(1, 1), {"n": 1})


class SameTweets(TweetsTransactionalSpout):
    """A subclass of a built-in spout that reads its batch as the built-in does."""


class OwnTweets(TweetsTransactionalSpout):
    """A subclass of a built-in spout that reads its batch its own way."""

    def emit_batch(self, tx, metadata):
        raise NotImplementedError


class OwnTweetsWithRead(OwnTweets):
    def read(self, spark, tx, metadata):
        raise NotImplementedError


@pytest.mark.parametrize(("spout", "on_executors"), [
    (TweetsTransactionalSpout, True), (OpaquePartitionedStreamSpout, True), (SameTweets, True), (OwnTweets, False),
    (OwnTweetsWithRead, True),
])
def test_a_subclass_that_reads_its_batch_its_own_way_is_read_through_its_emit_batch(spout, on_executors) -> None:
    assert reads_with_spark(spout.__new__(spout)) is on_executors


def test_a_users_source_travels_by_class_reference_and_the_built_ins_by_type() -> None:
    ref = CountingSource(upto=7).to_dict()
    assert ref["type"] == "class" and ref["module"] == __name__ and ref["name"] == "CountingSource"
    assert ref["params"] == {"upto": 7} and ref["file"] == __file__
    assert source_from_dict(ref) == CountingSource(upto=7)
    spec = JobSpec("t", TransactionAttempt(2, 1), {"n": 2}, CountingSource(upto=7), (State("s"),))
    assert JobSpec.from_json(spec.to_json()).source == CountingSource(upto=7)
    for builtin in (TweetsSource(prefix="p:"), StreamsSource(streams=["a", "b"])):
        assert isinstance(builtin, Source) and source_from_dict(builtin.to_dict()) == builtin


def test_a_source_the_job_could_not_rebuild_is_refused_with_what_to_change() -> None:
    @dataclass(frozen=True)
    class Inner(CountingSource):
        pass

    class NotData(CountingSource.__mro__[1]):  # Source itself, not a dataclass
        kind = SpoutKind.TRANSACTIONAL

        def build(self, context):
            return Counting()

    with pytest.raises(ConfigError, match="defined inside a function"):
        source_params(Inner())
    with pytest.raises(ConfigError, match=r"not a dataclass: write it as @dataclass\(frozen=True\)"):
        source_params(NotData())
    with pytest.raises(ConfigError, match=r"NoKind has no kind: set kind = SpoutKind.TRANSACTIONAL"):
        source_params(NoKind())
    with pytest.raises(ConfigError, match=r"fields \{'upto': \{1, 2\}\} are not JSON values"):
        source_params(CountingSource(upto={1, 2}))
    with pytest.raises(ConfigError, match="is not a txdag.spouts.Source"):
        source_from_dict({**CountingSource().to_dict(), "name": "Counting"})


def test_a_missing_redis_client_names_the_connection_and_where_to_declare_it() -> None:
    with pytest.raises(ConfigError, match=r"topology 't': no Redis client for connection 'src' .* conn_ids\(\)"):
        SpoutContext("t").redis("src")


def test_a_dag_file_imports_the_source_module_beside_it_as_airflow_lets_it(tmp_path: Path) -> None:
    from txdag.topology.topology import load_definitions

    (tmp_path / "dags").mkdir()
    (tmp_path / "spark_jobs").mkdir()
    (tmp_path / "spark_jobs" / "job.py").write_text("")
    (tmp_path / "dags" / "beside_source.py").write_text(
        "from dataclasses import dataclass\n"
        "from txdag.spouts import Source, SpoutKind\n\n"
        "@dataclass(frozen=True)\nclass BesideSource(Source):\n    n: int = 1\n    kind = SpoutKind.TRANSACTIONAL\n\n"
        "    def build(self, context):\n        raise NotImplementedError\n")
    (tmp_path / "dags" / "t.py").write_text(
        "from beside_source import BesideSource\nfrom txdag import TransactionalTopology\n"
        "from txdag.topology.definition import State\n"
        "topology = TransactionalTopology('beside', source=BesideSource(n=2), job='spark_jobs/job.py', "
        "states=[State('s')])\n")
    found, errors = load_definitions(tmp_path / "dags")
    assert errors == {} and found["beside"].source.to_dict()["params"] == {"n": 2}
    assert found["beside"].source.to_dict()["module"] == "beside_source"

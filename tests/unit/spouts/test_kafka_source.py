"""KafkaSource as a definition: checked when built, a field for its kind, and rebuilt by the Spark job from its
JSON; its metadata checked before a batch is read (the broker's side: tests/integration/spouts/test_kafka_spout.py)."""

from __future__ import annotations

import pytest

from txdag import TransactionalTopology, TransactionAttempt
from txdag.errors import ConfigError, FormatVersionError, SourceUnavailable
from txdag.spouts import SpoutContext, SpoutKind
from txdag.spouts.kafka import KafkaSource, KafkaSpout, check_metadata
from txdag.topology.definition import JobSpec, State


def test_the_kind_is_a_field_opaque_by_default_and_either_kind_travels_to_the_job() -> None:
    assert KafkaSource("t").kind is SpoutKind.OPAQUE
    source = KafkaSource("t", kind="transactional", max_per_partition=7)
    assert source.kind is SpoutKind.TRANSACTIONAL and source.kafka_conn_ids() == ["kafka_default"]
    spec = JobSpec.from_json(JobSpec("wc", TransactionAttempt(1, 1), {}, source, (State("words"),)).to_json())
    assert spec.source == source and spec.source.to_dict()["params"] == {
        "topic": "t", "kafka_conn_id": "kafka_default", "kind": "transactional", "max_per_partition": 7}
    topology = TransactionalTopology("wc", source=source, job="spark_jobs/word_count.py", states=[State("words")],
                                     project_dir=".")
    assert topology.conn_ids()["kafka_default"] == "kafka"


@pytest.mark.parametrize(("fields", "said"), [
    ({"topic": ""}, "needs the name of a topic"),
    ({"topic": "t", "kind": "exactly"}, "kind must be 'opaque' or 'transactional', got 'exactly'"),
    ({"topic": "t", "max_per_partition": 0}, "max_per_partition must be an int >= 1, got 0"),
    ({"topic": "t", "max_per_partition": True}, "max_per_partition must be an int >= 1, got True"),
    ({"topic": "t", "kafka_conn_id": ""}, "kafka_conn_id must be a connection id"),
])
def test_a_bad_field_is_a_config_error_naming_it(fields: dict, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        KafkaSource(**fields)


def test_a_connection_the_context_lacks_is_named() -> None:
    with pytest.raises(ConfigError, match=r"topology 'wc': no Kafka configuration for connection 'kafka_default' "
                                          r"\(have \[\]\)"):
        KafkaSource("t").build(SpoutContext("wc"))


@pytest.mark.parametrize(("metadata", "said"), [
    ({"v": 2, "topic": "t", "partitions": {}}, "format version 2"),
    ({"v": 1, "topic": "other", "partitions": {}}, "is of topic 'other', not 't'"),
    ({"v": 1, "topic": "t", "partitions": {"0": {"from": 5, "to": 3}}}, "for partition '0'"),
    ({"v": 1, "topic": "t", "partitions": {"x": {"from": 0, "to": 3}}}, "for partition 'x'"),
])
def test_metadata_that_is_not_an_offset_range_is_refused(metadata: dict, said: str) -> None:
    with pytest.raises(FormatVersionError, match=said):
        check_metadata(metadata, "t")


class Planned(KafkaSpout):
    """The planning rules alone: the broker's answers given (partitions, and each one's watermarks or None: down)."""

    def __init__(self, marks: dict[str, tuple[int, int] | None], kind: str = "opaque") -> None:
        super().__init__({"bootstrap.servers": "b:9092"}, "t", kind=SpoutKind(kind), max_per_partition=10,
                         topology="wc")
        self.marks = marks

    def _partitions(self, prev):
        return list(self.marks)

    def _watermarks(self, name):
        if self.marks[name] is None:
            raise SourceUnavailable(f"partition {name} down")
        return self.marks[name]


def test_an_opaque_plan_carries_a_down_partition_over_and_leaves_one_never_read_out() -> None:
    prev = {"v": 1, "topic": "t", "partitions": {"0": {"from": 0, "to": 10}}}
    plan = Planned({"0": None, "1": None, "2": (0, 5)}).initialize_transaction(2, prev)["partitions"]
    assert plan == {"0": {"from": 10, "to": 10, "unavailable": True}, "2": {"from": 0, "to": 5}}
    later = Planned({"0": (0, 12), "1": (3, 40), "2": (0, 5)}).initialize_transaction(3, {**prev, "partitions": plan})
    assert later["partitions"]["1"] == {"from": 3, "to": 13}, "a partition never read joins from its first offset"
    with pytest.raises(SourceUnavailable, match="no partition of Kafka topic 't' can be read"):
        Planned({"0": None, "1": None}).initialize_transaction(2, prev)
    with pytest.raises(SourceUnavailable, match="partition 1 down"):
        Planned({"0": (0, 12), "1": None}, kind="transactional").initialize_transaction(2, prev)

"""KafkaSource as a definition: checked when built, a field for its kind, and rebuilt by the Spark job from its
JSON; its metadata checked before a batch is read (the broker's side: tests/integration/spouts/test_kafka_spout.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from txdag import TransactionalTopology, TransactionAttempt
from txdag.errors import ConfigError, FormatVersionError, SourceUnavailable
from txdag.spouts import SpoutContext, SpoutKind
from txdag.spouts.kafka import KafkaSource, KafkaSpout, check_metadata, java_client_config
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
    ({"topic": "my topic"}, "Kafka refuses that topic name"),  # the broker's answer came at the first coordinate
    ({"topic": "tweets\n"}, "Kafka refuses that topic name"),
    ({"topic": ".."}, "not '.' or '..'"),
    ({"topic": "t" * 250}, "at most 249"),
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


WHERE = "the Kafka connection's extra"


def test_the_spark_read_gets_the_java_clients_names_for_a_librdkafka_connection() -> None:
    """The connection's extra is librdkafka's configuration (the Kafka provider's); Spark's Kafka source is Java."""
    sasl = {"bootstrap.servers": "k:9093", "security.protocol": "sasl_ssl", "sasl.mechanisms": "plain",
            "sasl.username": "alice", "sasl.password": 'p"w\\x', "group.id": "mine", "client.id": "etl",
            "ssl.endpoint.identification.algorithm": "none"}
    assert java_client_config(sasl, WHERE) == {
        "bootstrap.servers": "k:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "client.id": "etl",
        "ssl.endpoint.identification.algorithm": "",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
                            'password="p\\"w\\\\x";'}
    scram = java_client_config({**sasl, "sasl.mechanisms": "SCRAM-SHA-512"}, WHERE)["sasl.jaas.config"]
    assert scram.startswith("org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\"")
    own = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" password="x";'
    assert java_client_config({**sasl, "sasl.jaas.config": own}, WHERE)["sasl.jaas.config"] == own
    with pytest.raises(ConfigError, match="cannot log in with sasl.mechanism GSSAPI from sasl.username/sasl.password: "
                                          "give the extra a sasl.jaas.config"):
        java_client_config({**sasl, "sasl.mechanisms": "GSSAPI"}, WHERE)


def test_the_spark_read_gets_pem_stores_for_librdkafkas_tls_files(tmp_path: Path) -> None:
    ca, cert, key = (tmp_path / n for n in ("ca.pem", "cert.pem", "key.pem"))
    ca.write_text("-----BEGIN CERTIFICATE-----\nCA\n")
    cert.write_text("-----BEGIN CERTIFICATE-----\nME\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nKEY\n")
    tls = {"bootstrap.servers": "k:9093", "security.protocol": "SSL", "ssl.ca.location": str(ca),
           "ssl.certificate.location": str(cert), "ssl.key.location": str(key), "ssl.key.password": "kp"}
    assert java_client_config(tls, WHERE) == {
        "bootstrap.servers": "k:9093", "security.protocol": "SSL", "ssl.key.password": "kp",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca), "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": cert.read_text(), "ssl.keystore.key": key.read_text()}
    with pytest.raises(ConfigError, match="ssl.certificate.location without ssl.key.location: give both"):
        java_client_config({**tls, "ssl.key.location": ""}, WHERE)
    with pytest.raises(ConfigError, match=f"the Kafka connection's extra: cannot read {tmp_path}/gone.pem "):
        java_client_config({**tls, "ssl.key.location": str(tmp_path / "gone.pem")}, WHERE)
    with pytest.raises(ConfigError, match="cannot turn the broker's certificate verification off"):
        java_client_config({**tls, "enable.ssl.certificate.verification": "false"}, WHERE)

"""The OpenLineage datasets of a process task: its source's topic or Redis keys in, its states out (names in
txdag.airflow.lineage), as the OpenLineage provider serializes them."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from openlineage.client.serde import Serde

from txdag import TransactionalTopology
from txdag.airflow.lineage import (
    Dataset,
    TxidLineage,
    datasets,
    lineage_enabled,
    operator_lineage,
    redis_namespace,
)
from txdag.errors import ConfigError
from txdag.spouts.base import Source, SourceInput, SpoutKind
from txdag.spouts.kafka import KafkaSource
from txdag.topology.definition import KeyValue, State, StreamsSource, TweetsSource

URLS = {"redis_default": "redis://admin:s3cret@127.0.0.1:6391/0", "far": "rediss://far.example:6380/2"}
KAFKA = {"kafka_default": {"bootstrap.servers": "127.0.0.1:9391,127.0.0.1:9392", "sasl.password": "x"}}


def topology(source, **kwargs) -> TransactionalTopology:
    return TransactionalTopology("t", source=source, job="spark_jobs/job.py", states=[State("words")], **kwargs)


def lineage_of(t: TransactionalTopology) -> tuple[list[Dataset], list[Dataset]]:
    return datasets(t, URLS.__getitem__, KAFKA.__getitem__)


def test_a_redis_url_names_its_server_and_db_and_never_its_password() -> None:
    assert redis_namespace(URLS["redis_default"]) == ("redis://127.0.0.1:6391", "0")
    assert redis_namespace("redis://r") == ("redis://r:6379", "0")


def test_each_source_reads_its_topic_or_its_keys_on_their_own_server() -> None:
    assert lineage_of(topology(TweetsSource(prefix="tw:")))[0] == [
        Dataset("redis://127.0.0.1:6391", f"0/{p}") for p in TweetsSource(prefix="tw:").acl_patterns()]
    streams = StreamsSource(streams=["s:0", "s:1"], stream_conn_ids={"s:1": "far"})
    assert lineage_of(topology(streams))[0] == [Dataset("redis://127.0.0.1:6391", "0/s:0"),
                                                Dataset("redis://far.example:6380", "2/s:1")]
    assert lineage_of(topology(KafkaSource("clicks")))[0] == [Dataset("kafka://127.0.0.1:9391", "clicks")]
    KAFKA["tls"] = {"bootstrap.servers": "SASL_SSL://broker-1:9093, broker-2:9093"}
    assert lineage_of(topology(KafkaSource("clicks", kafka_conn_id="tls")))[0] == [
        Dataset("kafka://broker-1:9093", "clicks")]  # a listener's protocol is not part of the server's name


@dataclass(frozen=True)
class UserSource(Source):
    """A source as a user writes one from docs/spouts.md: it names its connections and its keys, no inputs()."""

    kind = SpoutKind.OPAQUE

    def build(self, context):
        raise NotImplementedError

    def conn_ids(self) -> list[str]:
        return ["redis_default", "far"]

    def kafka_conn_ids(self) -> list[str]:
        return ["kafka_default"]

    def acl_patterns(self) -> list[str]:
        return ["orders:*"]


def test_a_source_input_is_a_redis_key_or_a_kafka_topic() -> None:
    with pytest.raises(ConfigError, match="conn_type is 'redis' or 'kafka'"):
        SourceInput("Kafka", "kafka_default", "clicks")


def test_a_malformed_openlineage_setting_records_no_lineage_and_fails_nothing(openlineage_settings, monkeypatch,
                                                                               caplog) -> None:
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", '"console"')  # JSON, not an object: the provider raises
    openlineage_settings()
    with caplog.at_level(logging.WARNING):
        assert not lineage_enabled()
    assert "cannot be read" in caplog.text


def test_a_source_that_names_no_inputs_reads_its_keys_on_each_server_and_any_topic() -> None:
    assert lineage_of(topology(UserSource()))[0] == [
        Dataset("redis://127.0.0.1:6391", "0/orders:*"), Dataset("redis://far.example:6380", "2/orders:*"),
        Dataset("kafka://127.0.0.1:9391", "*")]


def test_the_outputs_are_the_states_assets_key_value_states_too() -> None:
    t = topology(TweetsSource(), key_values=[KeyValue("seen")])
    assert lineage_of(t)[1] == [Dataset("txdag://t", "words"), Dataset("txdag://t", "seen")]


def test_the_operator_lineage_carries_the_batch_the_partials_and_the_spark_job() -> None:
    assert operator_lineage(None) is None  # the try ran no job: its txid was committed already
    inputs, outputs = lineage_of(topology(KafkaSource("clicks")))
    lineage = TxidLineage(inputs, outputs, batch_size=40, staged={"words": 7},
                          query=("txdag-t-3-1", "sc://127.0.0.1:15002"))
    found = operator_lineage(lineage)
    event = json.loads(Serde.to_json(found.inputs[0]))
    assert (event["namespace"], event["name"]) == ("kafka://127.0.0.1:9391", "clicks")
    assert event["inputFacets"]["inputStatistics"]["rowCount"] == 40
    out = json.loads(Serde.to_json(found.outputs[0]))
    assert (out["namespace"], out["name"], out["outputFacets"]["outputStatistics"]["rowCount"]) == (
        "txdag://t", "words", 7)
    query = json.loads(Serde.to_json(found.run_facets["externalQuery"]))
    assert (query["externalQueryId"], query["source"]) == ("txdag-t-3-1", "sc://127.0.0.1:15002")
    assert not any(secret in Serde.to_json(d) for d in found.inputs for secret in ("s3cret", "sasl"))


def test_both_process_operators_answer_the_provider_with_the_txid_they_ran(tmp_path) -> None:
    from txdag.airflow import render

    (tmp_path / "spark_jobs").mkdir()
    (tmp_path / "spark_jobs" / "job.py").write_text("")
    for mode in ("submit", "connect"):
        t = topology(TweetsSource(), spark_mode=mode, project_dir=str(tmp_path))
        process = next(task for task in render(t).tasks if task.task_id == "process")
        assert process.get_openlineage_facets_on_complete(None) is None  # no job ran (yet)
        process.txid_lineage = TxidLineage(*lineage_of(t), batch_size=3)
        found = process.get_openlineage_facets_on_complete(None)
        assert [d.name for d in found.outputs] == ["words"], mode


@pytest.fixture
def openlineage_settings(monkeypatch):
    """The provider's settings read afresh (it caches them per process), from the environment alone."""
    from airflow.providers.openlineage import conf as ol_conf

    def fresh() -> None:
        for value in vars(ol_conf).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()

    for name in [k for k in os.environ if k.startswith(("OPENLINEAGE", "AIRFLOW__OPENLINEAGE__"))]:
        monkeypatch.delenv(name)
    fresh()
    yield fresh
    monkeypatch.undo()
    fresh()


def test_lineage_is_recorded_only_where_openlineage_has_a_transport(openlineage_settings, monkeypatch, caplog) -> None:
    from txdag.airflow.operators import recorded_lineage

    task = SimpleNamespace(log=logging.getLogger("txdag.test.lineage"))
    assert not lineage_enabled()  # the provider installed, no transport: nothing would be sent
    with caplog.at_level(logging.WARNING):
        assert recorded_lineage(task, topology(TweetsSource()), None, 3) is None
    assert caplog.records == []  # skipped before any connection is resolved, not failed
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", '{"type": "console"}')
    openlineage_settings()
    assert lineage_enabled()
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__DISABLED", "true")
    openlineage_settings()
    assert not lineage_enabled()

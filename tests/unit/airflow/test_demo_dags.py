"""The demo's two DAG folders: dags/ (spark_mode "submit", scripts/demo.sh --spark-submit) and dags_warm/ (its
default, spark_mode "connect") define the same tweets_analytics topology but for its Spark mode."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from txdag.topology.topology import load_definitions

ROOT = Path(__file__).resolve().parents[3]


def test_the_warm_demo_folder_is_the_shipped_topology_in_connect_mode() -> None:
    cold, errors = load_definitions(ROOT / "dags")
    warm, warm_errors = load_definitions(ROOT / "dags_warm")
    assert errors == {} and warm_errors == {} and list(warm) == ["tweets_analytics"]
    a, b = cold["tweets_analytics"], warm["tweets_analytics"]
    assert (a.spark_mode, b.spark_mode) == ("submit", "connect")
    differ = [f.name for f in dataclasses.fields(a) if getattr(a, f.name) != getattr(b, f.name)]
    assert differ == ["spark_mode"], f"dags_warm/tweets_analytics.py drifted from dags/: {differ}"


def test_the_demo_script_picks_the_folder_of_its_mode() -> None:
    script = (ROOT / "scripts" / "demo.sh").read_text()
    assert 'dags_folder="$ROOT/dags_warm"' in script and 'dags_folder="$ROOT/dags"' in script
    assert "TXDAG_SPARK_MODE" not in script


def test_the_cluster_folder_is_the_shipped_topologies_on_the_cluster_connections(monkeypatch) -> None:
    monkeypatch.setenv("TXDAG_CLUSTER_SPARK_CONF", '{"spark.submit.pyFiles": "/x/txdag-pyfiles.zip"}')
    shipped, errors = load_definitions(ROOT / "dags")
    on_cluster, cluster_errors = load_definitions(ROOT / "dags_cluster")
    assert errors == {} and cluster_errors == {} and sorted(on_cluster) == ["tweets_analytics", "word_count"]
    for name, b in on_cluster.items():
        a = shipped[name]
        differ = [f.name for f in dataclasses.fields(a) if getattr(a, f.name) != getattr(b, f.name)]
        assert differ == ["redis_conn_id", "spark_conn_id", "spark_conf"], f"dags_cluster/{name}.py drifted: {differ}"
        assert (b.redis_conn_id, b.spark_conn_id, b.source.redis_conn_id) == ("redis_cluster", "spark_cluster",
                                                                              "redis_default")
        assert b.spark_conf == {"spark.submit.pyFiles": "/x/txdag-pyfiles.zip"}


def test_the_kafka_demo_folder_is_the_analytics_over_the_topic_in_connect_mode() -> None:
    from txdag.spouts import SpoutKind
    from txdag.spouts.kafka import KafkaSource

    shipped = load_definitions(ROOT / "dags")[0]["tweets_analytics"]
    found, errors = load_definitions(ROOT / "dags_kafka")
    assert errors == {} and list(found) == ["tweets_kafka"]
    kafka = found["tweets_kafka"]
    assert kafka.source == KafkaSource("tweets", kind=SpoutKind.TRANSACTIONAL, max_per_partition=50)
    assert (kafka.job, kafka.spark_mode) == (shipped.job, "connect")
    assert [(s.name, s.namespace, s.kind) for s in kafka.states] == [
        (s.name, f"kafka:{s.name}", s.kind) for s in shipped.states]
    assert 'dags_folder="$ROOT/dags_kafka"' in (ROOT / "scripts" / "demo.sh").read_text()

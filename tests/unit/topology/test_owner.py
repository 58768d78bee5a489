"""One owner per topology, the pure parts: the fingerprint (stable; what changes it and what does not), the phrases
that name a change, and finding the DAG files that define a topology id without running them."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from txdag.errors import ConfigError
from txdag.topology.definition import KeyValue, State, StreamsSource, TweetsSource
from txdag.topology.owner import Owner, changes, check_one_file, dag_file_label, defines, files_defining, fingerprint
from txdag.topology.topology import TransactionalTopology

ROOT = Path(__file__).resolve().parents[3]


def word_count(**changed) -> TransactionalTopology:
    """The shipped word_count definition, with ``changed`` fields."""
    args = dict(source=StreamsSource(streams=["sentences:0", "sentences:1"], opaque=True, max_per_partition=40),
                job="spark_jobs/word_count.py", states=[State("words", kind="opaque", namespace="word_count")],
                max_active_transactions=2, schedule="@hourly", project_dir=str(ROOT))
    return TransactionalTopology("word_count", **{**args, **changed})


def test_the_fingerprint_is_stable_across_processes_and_versions() -> None:
    """A fixed value: a change of what the fingerprint covers must bump FINGERPRINT_SCHEME (and this value), or
    every running topology would be refused after an upgrade."""
    assert Owner.of(word_count()).fingerprint == "7fc614879c90ef59"
    assert Owner.of(word_count()).fingerprint == Owner.of(word_count()).fingerprint


def test_key_order_and_a_namespace_spelled_out_do_not_change_it() -> None:
    definition = Owner.of(word_count()).definition
    assert fingerprint(dict(reversed(list(definition.items())))) == fingerprint(definition)
    plain = word_count(states=[State("word_count", kind="opaque")])
    spelled = word_count(states=[State("word_count", kind="opaque", namespace="word_count")])
    assert Owner.of(plain).fingerprint == Owner.of(spelled).fingerprint


@pytest.mark.parametrize("changed", [
    {"source": StreamsSource(streams=["sentences:0", "sentences:1"], opaque=True, max_per_partition=500)},
    {"max_active_transactions": 1}, {"schedule": None}, {"retries": 3}, {"retry_delay": timedelta(minutes=1)},
    {"job": "spark_jobs/tweets_analytics.py"}, {"spark_mode": "connect"}, {"spark_conf": {"a": "b"}},
    {"keep_txids": 5}, {"description": "other"}, {"zookeeper_conn_id": "zk2"}, {"commit_poke_interval": 1.0},
    {"execution_timeout": timedelta(hours=2)},
], ids=lambda c: next(iter(c)))
def test_tuning_does_not_change_the_fingerprint(changed) -> None:
    """Batch size, parallelism, schedule, retries, the job and Spark: they change what runs or when, not which
    txids go where (a txid's batch is planned once and kept in ZooKeeper)."""
    assert Owner.of(word_count(**changed)).fingerprint == Owner.of(word_count()).fingerprint


def test_a_source_class_batch_size_does_not_change_it_either() -> None:
    """A source class keeps its fields under params (Source.to_dict): KafkaSource's max_per_partition, or a user's
    max_transaction_size, is tuning there too; its topic is not."""
    from txdag.spouts.kafka import KafkaSource

    def kafka(**fields) -> str:
        return Owner.of(word_count(source=KafkaSource(**{"topic": "tweets", **fields}))).fingerprint

    assert kafka(max_per_partition=1000) == kafka(max_per_partition=5000)
    assert kafka(topic="other") != kafka()


def test_an_owner_recorded_with_a_source_class_batch_size_is_the_same_definition_with_another() -> None:
    """A record written before the batch size left a source class's params (a txdag of before) still owns the
    topology for the same definition at any batch size, and not for another topic."""
    from txdag.spouts.kafka import KafkaSource
    from txdag.topology.owner import as_now, same_definition

    def owner(**fields) -> Owner:
        return Owner.of(word_count(source=KafkaSource(**{"topic": "tweets", **fields})))

    recorded = Owner.of(word_count(source=KafkaSource("tweets", max_per_partition=1000))).definition
    recorded["source.params"] = {**recorded["source.params"], "max_per_partition": 1000}  # as it was written then
    assert fingerprint(recorded) != owner().fingerprint  # what the record holds: another fingerprint
    assert same_definition(recorded, fingerprint(recorded), owner(max_per_partition=5000))
    assert not same_definition(recorded, fingerprint(recorded), owner(topic="other"))
    assert changes(as_now(recorded), owner(topic="other").definition) == [
        "source params: {'topic': 'tweets', 'kafka_conn_id': 'kafka_default', 'kind': 'opaque'} -> "
        "{'topic': 'other', 'kafka_conn_id': 'kafka_default', 'kind': 'opaque'}"]


@pytest.mark.parametrize(("changed", "phrase"), [
    ({"states": [State("words", kind="opaque", namespace="word_count_copy")]},
     "state 'words' namespace: 'word_count' -> 'word_count_copy'"),
    ({"states": [State("words", kind="transactional", namespace="word_count")]},
     "state 'words' kind: 'opaque' -> 'transactional'"),
    ({"states": [State("words", kind="opaque", namespace="word_count", key_fields=2, separator=":")]},
     "state 'words' key_fields: 1 -> 2; state 'words' separator: None -> ':'"),
    ({"states": [State("words", kind="opaque", namespace="word_count"), State("letters")]}, "state 'letters' added"),
    ({"states": [State("w", kind="opaque", namespace="word_count")]}, "state 'w' added; state 'words' removed"),
    ({"source": StreamsSource(streams=["sentences:0"], opaque=True, max_per_partition=40)},
     "source streams: ['sentences:0', 'sentences:1'] -> ['sentences:0']"),
    ({"source": StreamsSource(streams=["sentences:0", "sentences:1"], opaque=False, max_per_partition=40)},
     "source kind: 'opaque' -> 'transactional'; source opaque: True -> False"),
    ({"source": TweetsSource(max_transaction_size=40)},
     "source field: 'value' -> (none); source kind: 'opaque' -> 'transactional'"),
    ({"source": StreamsSource(streams=["sentences:0", "sentences:1"], redis_conn_id="other", max_per_partition=40)},
     "source redis_conn_id: 'redis_default' -> 'other'"),
    ({"redis_conn_id": "states2"}, "topology redis_conn_id: 'redis_default' -> 'states2'"),
    ({"marker_key": "LAST"}, "topology marker_key: None -> 'LAST'"),
    ({"key_values": [KeyValue("seen")]}, "key-value 'seen' added"),
])
def test_what_a_txid_writes_or_reads_changes_it_and_is_named(changed, phrase) -> None:
    before, after = Owner.of(word_count()), Owner.of(word_count(**changed))
    assert after.fingerprint != before.fingerprint
    assert "; ".join(changes(before.definition, after.definition)).startswith(phrase)


def test_a_key_value_states_namespace_is_its_resolved_one() -> None:
    default = Owner.of(word_count(key_values=[KeyValue("seen")])).definition
    assert default["key_value seen.namespace"] == "word_count:seen"
    spelled = Owner.of(word_count(key_values=[KeyValue("seen", namespace="word_count:seen")])).definition
    assert fingerprint(spelled) == fingerprint(default)


def test_the_dag_file_is_recorded_relative_to_the_project(tmp_path) -> None:
    assert Owner.of(word_count(), ROOT / "dags" / "word_count.py").dag_file == "dags/word_count.py"
    assert dag_file_label(tmp_path / "x.py", str(ROOT)) == str((tmp_path / "x.py").resolve())
    assert dag_file_label(None, str(ROOT)) is None


# --- DAG files that define a topology id ------------------------------------------------------------------


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


@pytest.mark.parametrize(("text", "found"), [
    ('t = TransactionalTopology("word_count", source=s)', True),
    ("t = txdag.TransactionalTopology('word_count', source=s)", True),
    ('t = TransactionalTopology(topology_id="word_count", source=s)', True),
    ('t = dataclasses.replace(base, topology_id="word_count")', True),
    ('t = TransactionalTopology("word_count_2", source=s)', False),
    ('"""A copy of word_count."""\nt = TransactionalTopology("other", source=s, states=[State("word_count")])', False),
    ('name = "word_count"\nt = TransactionalTopology(name, source=s)', False),  # not a literal: see the docstring
    ('t = TransactionalTopology("word_count", source=s', False),  # a syntax error is Airflow's to report
])
def test_a_file_defines_a_topology_id_when_it_passes_it_as_a_literal(tmp_path, text, found) -> None:
    assert defines(write(tmp_path, "f.py", text), "word_count") is found


def test_files_defining_lists_them_once_in_path_order(tmp_path) -> None:
    b = write(tmp_path, "b.py", 'TransactionalTopology("x")')
    a = write(tmp_path / "a", "z.py", 'TransactionalTopology("x")')
    write(tmp_path, "c.py", 'TransactionalTopology("y")')
    write(tmp_path, "d.txt", 'TransactionalTopology("x")')
    assert files_defining([b, a, b, tmp_path / "c.py", tmp_path / "d.txt"], "x") == [a, b]


def test_the_second_file_fails_naming_both_and_the_first_keeps_the_topology(tmp_path) -> None:
    first = write(tmp_path, "word_count.py", 'TransactionalTopology("word_count")')
    copy = write(tmp_path, "zz_copy.py", 'TransactionalTopology("word_count")')
    defining = files_defining([first, copy], "word_count")
    check_one_file("word_count", first, defining)
    with pytest.raises(ConfigError) as caught:
        check_one_file("word_count", copy, defining)
    message = str(caught.value)
    assert message.startswith(f"topology 'word_count' is defined by two DAG files, {first} and {copy}: ")
    assert f"Airflow loads {first} (the first in path order) and {copy} fails to import" in message
    assert "`txdag topology owner word_count` names the recorded owner and which file to delete" in message


def test_the_same_file_through_a_link_is_one_definition(tmp_path) -> None:
    real = write(tmp_path / "real", "word_count.py", 'TransactionalTopology("word_count")')
    (tmp_path / "a_link.py").symlink_to(real)
    check_one_file("word_count", real, files_defining([tmp_path / "a_link.py", real], "word_count"))
    assert os.path.samefile(tmp_path / "a_link.py", real)


def test_a_definition_copied_by_replace_is_a_second_definition(tmp_path) -> None:
    """``replace`` of a definition keeps every field it does not name; the id it names makes it a definition."""
    t = replace(word_count(), topology_id="word_count_2")
    assert t.topology_id == "word_count_2" and defines(
        write(tmp_path, "v2.py", 'v2 = replace(t, topology_id="word_count_2")'), "word_count_2")

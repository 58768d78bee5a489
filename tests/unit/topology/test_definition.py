"""The topology definition as data: validated when built, with messages that say what to change."""

from __future__ import annotations

import dataclasses
import json

import pytest

from txdag import TransactionalTopology, TransactionAttempt
from txdag.errors import ConfigError, FormatVersionError
from txdag.state import MemoryBackingMap, StateFactory, TransactionalMap
from txdag.state.snapshottable_map import GLOBAL_KEY
from txdag.topology.definition import JobSpec, Sink, State, StoreRef, StreamsSource, TweetsSource


def topology(tmp_path, **changes):
    job = tmp_path / "job.py"
    job.write_text("")
    args = {"source": TweetsSource(), "job": str(job), "states": [State("users")], "project_dir": str(tmp_path),
            **changes}
    return TransactionalTopology("tweets", **args)


def test_state_codecs_and_keys() -> None:
    pairs = State("users_hashtags", key_fields=2, separator=":")
    assert pairs.codec().encode(pairs.key(["@ann", "#x"])) == "@ann:#x"
    assert State("words").codec().encode(("hello",)) == "hello"
    assert State("total", key_fields=0).key([]) == GLOBAL_KEY
    with pytest.raises(ConfigError, match="state 'words' has 1 key field"):
        State("words").key(["a", "b"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "exactly_once"}, "unknown kind 'exactly_once'; use one of \\['non_transactional', 'opaque'"),
        ({"key_fields": -1}, "key_fields must be an int >= 0"),
        ({"separator": ""}, "separator must be a non-empty string"),
    ],
)
def test_bad_states_are_refused(kwargs, message) -> None:
    with pytest.raises(ConfigError, match=message):
        State("s", **kwargs)


def test_sources_validate_and_round_trip() -> None:
    streams = StreamsSource(["a", "b"], stream_conn_ids={"b": "redis_b"})
    assert streams.conn_ids() == ["redis_b", "redis_default"] and streams.kind.value == "opaque"
    with pytest.raises(ConfigError, match="names streams \\['c'\\] that are not in streams"):
        StreamsSource(["a"], stream_conn_ids={"c": "x"})
    with pytest.raises(ConfigError, match="max_transaction_size must be an int >= 1"):
        TweetsSource(max_transaction_size=0)
    spec = JobSpec("t", TransactionAttempt(4, 2), {"v": 1}, streams, (State("w", kind="opaque"),), "redis_s")
    assert JobSpec.from_json(spec.to_json()) == spec
    with pytest.raises(FormatVersionError, match="format version 9"):
        JobSpec.from_json(spec.to_json().replace('"v":1}', '"v":9}'))


def test_topology_definition_errors(tmp_path) -> None:
    assert topology(tmp_path).pool == "txdag_tweets"
    with pytest.raises(ConfigError, match=r"duplicate state name\(s\) \['users'\]"):
        topology(tmp_path, states=[State("users"), State("users", namespace="u2")])
    with pytest.raises(ConfigError, match=r"duplicate Redis namespace\(s\) \['u'\]"):
        topology(tmp_path, states=[State("a", namespace="u"), State("b", namespace="u")])
    with pytest.raises(ConfigError, match="marker_key 'users' is also a state's namespace"):
        topology(tmp_path, marker_key="users")
    with pytest.raises(ConfigError, match="max_active_transactions must be an int >= 1"):
        topology(tmp_path, max_active_transactions=0)
    with pytest.raises(ConfigError, match="does not exist: put the job in spark_jobs/"):
        topology(tmp_path, job="spark_jobs/missing.py")
    with pytest.raises(ConfigError, match=r"source must be a txdag.spouts.Source \(TweetsSource, StreamsSource or a "
                                          r"source class of your own"):
        topology(tmp_path, source="redis://x")
    assert topology(tmp_path, job="s3://bucket/job.py").job_path == "s3://bucket/job.py"


def test_spark_mode_picks_the_process_operator_and_its_connection(tmp_path, monkeypatch) -> None:
    cold = topology(tmp_path)
    assert cold.spark_mode == "submit" and cold.conn_ids()["spark_default"] == "spark"
    warm = topology(tmp_path, spark_mode="connect")
    assert warm.conn_ids()["spark_connect_default"] == "spark_connect" and "spark_default" not in warm.conn_ids()
    monkeypatch.setenv("TXDAG_SPARK_MODE", "connect")  # read by no one: the mode is the definition's
    assert topology(tmp_path).spark_mode == "submit"
    with pytest.raises(ConfigError, match=r"spark_mode must be one of \['submit', 'connect'\], got 'warm'"):
        topology(tmp_path, spark_mode="warm")


def test_the_definition_reads_no_environment_and_is_frozen(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("TXDAG_SPARK_MODE", "TXDAG_DAGS_FOLDER", "AIRFLOW__CORE__DAGS_FOLDER", "AIRFLOW__TXDAG__DAGS_FOLDER"):
        monkeypatch.setenv(name, "connect")
    t = topology(tmp_path, project_dir=None, job="spark_jobs/not_yet.py")
    assert (t.spark_mode, t.project_dir, t.job_located) == ("submit", None, False)
    assert not hasattr(t, "dag") and "render" not in {f.name for f in dataclasses.fields(t)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.spark_mode = "connect"  # type: ignore[misc]


def test_located_takes_the_project_from_the_dag_file_and_checks_the_job_there(tmp_path) -> None:
    (tmp_path / "dags").mkdir()
    (tmp_path / "spark_jobs").mkdir()
    (tmp_path / "spark_jobs" / "job.py").write_text("")
    unlocated = topology(tmp_path, project_dir=None, job="spark_jobs/job.py")
    located = unlocated.located(tmp_path / "dags" / "tweets.py")
    assert located.project_dir == str(tmp_path.resolve()) and located.job_path == str(tmp_path / "spark_jobs/job.py")
    assert located.located(tmp_path / "elsewhere" / "x" / "y.py") is located, "its own project_dir wins"
    assert unlocated.project_dir is None, "located() returns a copy"
    beside = topology(tmp_path, project_dir="..", job="spark_jobs/job.py")  # from the DAG file, not the cwd
    assert not beside.job_located and beside.located(tmp_path / "dags" / "tweets.py").project_dir == str(
        tmp_path.resolve())
    assert topology(tmp_path, project_dir=".", job="job.py").located(tmp_path / "spark_jobs" / "x.py").job_path \
        == str(tmp_path.resolve() / "spark_jobs" / "job.py")
    missing = topology(tmp_path, project_dir=None, job="spark_jobs/missing.py")
    with pytest.raises(ConfigError, match="spark_jobs/missing.py does not exist: put the job in spark_jobs/"):
        missing.located(tmp_path / "dags" / "tweets.py")


def test_a_topology_declares_its_sinks_and_the_job_spec_carries_them(tmp_path) -> None:
    t = topology(tmp_path, sinks=[Sink("audit")])
    assert t.sinks == (Sink("audit"),)
    spec = JobSpec("t", TransactionAttempt(1, 1), {"v": 1}, TweetsSource(), (State("w"),), sinks=(Sink("audit"),))
    assert JobSpec.from_json(spec.to_json()) == spec
    older = json.loads(spec.to_json())
    del older["sinks"]  # a spec written before sinks existed reads as one without any
    assert JobSpec.from_json(json.dumps(older)).sinks == ()
    with pytest.raises(ConfigError, match=r"duplicate state or sink name\(s\) \['users'\]"):
        topology(tmp_path, sinks=[Sink("users")])
    with pytest.raises(ConfigError, match="sinks must be a list of txdag.topology.definition.Sink"):
        topology(tmp_path, sinks=["audit"])
    with pytest.raises(ConfigError, match="a sink name"):
        Sink("no spaces")
    assert topology(tmp_path, states=[], sinks=[Sink("audit")]).states == (), "a topology of sinks alone"


def test_a_sink_is_part_of_the_definition_an_owner_holds(tmp_path) -> None:
    from txdag.topology.owner import definition_of, fingerprint

    plain, with_sink = topology(tmp_path), topology(tmp_path, sinks=[Sink("audit")])
    assert "sink audit.declared" in definition_of(with_sink)
    assert not any(k.startswith("sink ") for k in definition_of(plain)), "a topology without sinks: as before"
    assert fingerprint(definition_of(plain)) != fingerprint(definition_of(with_sink))


@dataclasses.dataclass(repr=False)
class TableStore(StateFactory):
    """A store of the user's, as the docs write one (docs/stores.md)."""

    table: str

    def backing_map(self, topology: str, state: str, key_fields: int) -> MemoryBackingMap:
        return MemoryBackingMap()


def test_a_state_names_a_store_of_the_users_and_the_job_spec_knows_it_by_name(tmp_path) -> None:
    state = State("w", key_fields=2, separator=":", store=TableStore("counts"))
    with pytest.raises(ConfigError, match="is kept in TableStore: build it with its topology's id"):
        state.build(None)
    built = state.build(None, "t")
    assert isinstance(built, TransactionalMap) and isinstance(built.backing, MemoryBackingMap)
    assert built.key_codec.encode(("@a", "#b")) == "@a:#b", "the staged fields are the definition's"
    spec = JobSpec("t", TransactionAttempt(1, 1), {}, TweetsSource(), (state,))
    read = JobSpec.from_json(spec.to_json()).states[0]
    assert isinstance(read.store, StoreRef) and read.store_ref == state.store_ref == {
        "module": "job", "name": "TableStore", "params": {"table": "counts"}}
    with pytest.raises(ConfigError, match="topology 't': state 'w' is kept in TableStore, which this process knows by "
                                          "name only"):
        read.build(None, "t")
    assert "store" not in State("w").to_dict(), "a Redis state's job spec: as before"
    assert State("w").in_redis and not state.in_redis


def test_a_reader_of_redis_states_refuses_a_state_in_a_store_and_says_where_it_is() -> None:
    State("w").require_redis("state_query")
    with pytest.raises(ConfigError, match="state 'w' is kept in TableStore, not in Redis: state_query reads Redis "
                                          "states only; read it in that store"):
        State("w", store=TableStore("counts")).require_redis("state_query")
    with pytest.raises(ConfigError, match="state 'w' of topology 't' is kept in TableStore, not in Redis: txdag "
                                          "state top reads"):
        State("w", store=TableStore("counts")).require_redis("txdag state top", "t")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"store": "sqlite:///x.db"}, "store must be a txdag.state.StateFactory"),
    ({"store": TableStore("x"), "namespace": "h"}, "namespace names a Redis hash"),
    ({"store": TableStore(object())}, "are not JSON values"),
])
def test_a_bad_store_is_refused_when_the_dag_file_is_read(kwargs, message) -> None:
    with pytest.raises(ConfigError, match=message):
        State("w", **kwargs)


def test_a_store_is_part_of_the_definition_an_owner_holds(tmp_path) -> None:
    from txdag.topology.owner import changes, definition_of

    redis_only = definition_of(topology(tmp_path))
    assert not any(k.endswith(".store") for k in redis_only), "a topology of Redis states: as before"
    one, other = (definition_of(topology(tmp_path, states=[State("users", store=TableStore(t))])) for t in "ab")
    assert changes(one, other) == ["state 'users' store: {'module': 'job', 'name': 'TableStore', 'params': "
                                   "{'table': 'a'}} -> {'module': 'job', 'name': 'TableStore', 'params': "
                                   "{'table': 'b'}}"]


class RedisAgain(TableStore):
    def backing_map(self, topology: str, state: str, key_fields: int):
        from txdag.state import RedisBackingMap

        return RedisBackingMap(None, self.table)


class Broken(TableStore):
    def backing_map(self, topology: str, state: str, key_fields: int):
        raise OSError("no such database")


def test_a_store_that_gives_no_backing_map_of_its_own_is_named() -> None:
    with pytest.raises(ConfigError, match="topology 't': state 'w': RedisAgain.backing_map returned a RedisBackingMap; "
                                          "a state in Redis needs no store"):
        State("w", store=RedisAgain("x")).build(None, "t")
    with pytest.raises(ConfigError, match=r"Odd.backing_map returned 'x', which has no multi_get/multi_put"):
        State("w", store=Odd("x")).build(None, "t")
    with pytest.raises(OSError, match="no such database") as raised:
        State("w", store=Broken("x")).build(None, "t")
    assert raised.value.__notes__ == ["topology 't': state 'w': raised by Broken.backing_map() (docs/stores.md)"]


class Odd(TableStore):
    def backing_map(self, topology: str, state: str, key_fields: int):
        return "x"


def test_a_postgres_store_is_a_connection_the_topology_uses(tmp_path) -> None:
    from txdag.airflow.stores import PostgresStore

    store = PostgresStore("pg_states")
    used = topology(tmp_path, states=[State("users", store=store), State("tags", store=store)]).conn_ids()
    assert used["pg_states"] == "postgres" and used["redis_default"] == "redis"
    assert "pg_states" not in topology(tmp_path).conn_ids()


@pytest.mark.parametrize(("schema", "why"), [("pg_analytics", "begin with 'pg_'"), ("my-states", "letters, digits"),
                                             ("s" * 64, "at most 63")])
def test_a_postgres_schema_that_postgresql_would_refuse_is_refused_in_the_dag_file(schema, why) -> None:
    from txdag.airflow.stores import PostgresStore

    said = f"connection 'txdag_postgres' \\(schema {schema}\\): schema '{schema}': .*{why}"
    with pytest.raises(ConfigError, match=said):
        PostgresStore(schema=schema)
    assert PostgresStore(schema="PG_analytics").schema == "PG_analytics"  # PostgreSQL's rule is case-sensitive

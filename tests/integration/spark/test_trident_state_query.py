"""state_query against a real Redis, with values committed through the real map states (TransactionalMap and
OpaqueMap over RedisBackingMap): committed values unwrapped, one round trip per partition measured with the
server's INFO counters, zero or more output rows per input row, and errors at the call or naming the server."""

from __future__ import annotations

import pytest
import redis
from pyspark.sql import functions as F
from support.servers import free_port
from trident_support import bag, rows_of

from txdag.errors import ConfigError
from txdag.state import SnapshottableMap, combine_sum
from txdag.topology.definition import State
from txdag.trident import MapGet, QueryFunction, state_query

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
WORDS = ["storm", "spark", "redis", "trident", "zookeeper", "airflow", "missing", None]


def commit(map_state, txid, counts):
    map_state.begin_commit(txid)
    map_state.multi_update([(w,) for w in counts], [combine_sum(n) for n in counts.values()])
    map_state.commit(txid)


@pytest.fixture
def redis_url(second_redis) -> str:
    """A Redis of this module's own: its tests count the server's commands and connections (INFO), which the
    other tests' traffic would add to (the integration tier runs two tests at once)."""
    return second_redis.url


@pytest.fixture
def redis_client(redis_url):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture(params=["transactional", "opaque"])
def counts(request, redis_client, prefix):
    """A state with txids 1 and 2 committed (the opaque one also replays txid 2 with another batch), and the
    committed values a reader must see."""
    state = State("counts", kind=request.param, namespace=f"{prefix}:counts")
    map_state = state.build(redis_client)
    commit(map_state, 1, {"storm": 3, "spark": 1, "redis": 2})
    if request.param == "opaque":  # a first attempt of txid 2, replaced by the replay below (curr = prev + new)
        commit(map_state, 2, {"storm": 1, "zookeeper": 9})
    commit(map_state, 2, {"storm": 2, "zookeeper": 4})
    return state, {"storm": 5, "spark": 1, "redis": 2, "zookeeper": 4}


@pytest.fixture
def words(spark):
    """150 rows of words (some never written, some null), with an id."""
    return spark.createDataFrame([(i, WORDS[i % len(WORDS)]) for i in range(150)], "id bigint, word string")


def stats(client):
    calls = {k: v["calls"] for k, v in client.info("commandstats").items()}
    return calls, client.info("stats")["total_connections_received"]


def test_map_get_reads_committed_values_in_one_round_trip_per_partition(redis_client, redis_url, counts, words):
    state, committed = counts
    expected = bag([(i, w, committed.get(w)) for i, w in ((i, WORDS[i % len(WORDS)]) for i in range(150))])
    for n in (1, 3, 7):
        frame = words.repartition(n).cache()
        assert frame.select(F.spark_partition_id()).distinct().count() == n
        query = state_query(frame, state, MapGet("count bigint"), key_fields=["word"], redis_url=redis_url)
        calls, connections = stats(redis_client)
        got = rows_of(query)
        calls_after, connections_after = stats(redis_client)
        frame.unpersist()
        assert bag(got) == expected, f"{n} partitions"
        delta = {k: v - calls.get(k, 0) for k, v in calls_after.items() if v != calls.get(k, 0)}
        delta.pop("cmdstat_info")  # the test's own
        # per partition: one pipeline of HMGETs (the state's meta hash, then value, txid and prev hashes) on one
        # connection, whose set-up (AUTH, CLIENT SETINFO) is the only other traffic
        assert delta.pop("cmdstat_hmget") == 4 * n, f"{n} partitions: {delta}"
        assert set(delta) <= {"cmdstat_auth", "cmdstat_hello", "cmdstat_client|setinfo"}, delta
        assert connections_after - connections == n


def test_a_query_function_retrieves_in_bulk_and_emits_zero_or_more_rows(redis_url, counts, words):
    class Tiers(QueryFunction):
        schema = "tier string, score bigint"

        def batch_retrieve(self, state_values, rows):
            assert len(state_values) == len(rows) and list(rows[0].__fields__) == ["word"]
            return [None if v is None else v * 10 for v in state_values]

        def execute(self, row, value, collector):
            if value is None:
                return  # an unknown or null word: no row
            collector.emit("all", value)
            if value >= 30:
                collector.emit("top", value)

    state, committed = counts
    got = state_query(words.repartition(3), state, Tiers(), key_fields="word", input_fields=["word"],
                      redis_url=redis_url)
    assert got.columns == ["id", "word", "tier", "score"]
    expected = []
    for i in range(150):
        word = WORDS[i % len(WORDS)]
        if committed.get(word) is not None:
            value = committed[word] * 10
            expected += [(i, word, "all", value)] + ([(i, word, "top", value)] if value >= 30 else [])
    assert bag(rows_of(got)) == bag(expected)


def test_a_global_state_and_a_joined_two_field_key(spark, redis_client, redis_url, prefix):
    total = State("total", key_fields=0, namespace=f"{prefix}:total")
    snapshot = SnapshottableMap(total.build(redis_client))
    snapshot.begin_commit(1)
    snapshot.update(combine_sum(42))
    snapshot.commit(1)
    pairs = State("pairs", kind="opaque", key_fields=2, separator=":", namespace=f"{prefix}:pairs")
    pair_state = pairs.build(redis_client)
    pair_state.begin_commit(1)
    pair_state.multi_update([("@bob", "#storm"), ("@amy", "#x:y")], [combine_sum(2), combine_sum(7)])
    pair_state.commit(1)
    frame = spark.createDataFrame([("@bob", "#storm"), ("@amy", "#x:y"), ("@amy", "#none"), ("@amy:#x", "y")],
                                  "user string, tag string")
    got = state_query(frame, total, MapGet("total bigint"), redis_url=redis_url)
    assert bag(rows_of(got)) == bag([("@bob", "#storm", 42), ("@amy", "#x:y", 42), ("@amy", "#none", 42),
                                     ("@amy:#x", "y", 42)])
    got = state_query(frame, pairs, MapGet("n bigint"), key_fields=["user", "tag"], redis_url=redis_url)
    # ("@amy:#x", "y") would join into "@amy:#x:y", the field of ("@amy", "#x:y"): a key never stored, so no value
    assert bag(rows_of(got)) == bag([("@bob", "#storm", 2), ("@amy", "#x:y", 7), ("@amy", "#none", None),
                                     ("@amy:#x", "y", None)])


def test_an_empty_batch_reads_nothing(spark, redis_client, redis_url, counts):
    state, _ = counts
    empty = spark.createDataFrame([], "id bigint, word string")
    (calls, connections) = stats(redis_client)
    assert rows_of(state_query(empty, state, MapGet(), key_fields=["word"], redis_url=redis_url)) == []
    assert stats(redis_client)[0].get("cmdstat_hmget", 0) == calls.get("cmdstat_hmget", 0)
    assert stats(redis_client)[1] == connections


def test_wrong_calls_fail_before_spark_runs(redis_url, counts, words):
    state, _ = counts
    with pytest.raises(ConfigError, match=r"state 'counts' has key_fields=1, but state_query got key fields \[\]"):
        state_query(words, state, MapGet(), redis_url=redis_url)
    with pytest.raises(ConfigError, match=r"MapGet: key fields \['nope'\] are not columns"):
        state_query(words, state, MapGet(), key_fields=["nope"], redis_url=redis_url)
    with pytest.raises(ConfigError, match=r"emits column\(s\) \['word'\] that clash with the DataFrame's columns"):
        state_query(words, state, MapGet("word bigint"), key_fields=["word"], redis_url=redis_url)
    with pytest.raises(ConfigError, match="is not a QueryFunction"):
        state_query(words, state, lambda rows: rows, key_fields=["word"], redis_url=redis_url)
    with pytest.raises(ConfigError, match="MapGet declares no output schema"):
        state_query(words, state, MapGet(None), key_fields=["word"], redis_url=redis_url)
    with pytest.raises(ConfigError, match="needs redis_url="):
        state_query(words, state, MapGet(), key_fields=["word"], redis_url="")
    with pytest.raises(ConfigError, match="redis_url is not a Redis URL") as caught:
        state_query(words, state, MapGet(), key_fields=["word"], redis_url="http://u:s3cretpw@127.0.0.1:1/0")
    assert "s3cretpw" not in str(caught.value)


def test_a_key_the_state_cannot_hold_and_a_redis_that_is_down_are_named(spark, redis_url):
    pairs = State("pairs", key_fields=2, separator=":")
    frame = spark.createDataFrame([("@bob", 3)], "user string, n bigint")
    with pytest.raises(Exception, match=r"state 'pairs' cannot hold key \('@bob', 3\)"):
        state_query(frame, pairs, MapGet(), key_fields=["user", "n"], redis_url=redis_url).collect()
    port = free_port()
    down = f"redis://someone:s3cretpw@127.0.0.1:{port}/0?socket_connect_timeout=2"
    words = State("words")
    with pytest.raises(Exception, match=rf"Redis at 127.0.0.1:{port}/0 is unreachable .*scripts/services.sh start") \
            as caught:
        state_query(frame, words, MapGet(), key_fields=["user"], redis_url=down).collect()
    assert "s3cretpw" not in str(caught.value)

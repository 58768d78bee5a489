"""txdag.trident over Spark Connect (warm mode): the same operations on a real Connect server, the rows handled by
its Python workers, the user's aggregators shipped by value, schemas parsed by the server."""

from __future__ import annotations

import pytest
from trident_support import (
    SCHEMA,
    Distinct,
    Histogram,
    Mean,
    MergeCounts,
    UserCounts,
    bag,
    by_user,
    make_rows,
    rows_of,
    user_counter,
)

from txdag.contracts import apply
from txdag.errors import ConfigError
from txdag.spark.connect import CONNECT_MODE, connect_session
from txdag.state import combine_sum
from txdag.topology.definition import State
from txdag.trident import Count, MapGet, aggregate, group_by, partition_aggregate, state_query

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
ROWS = make_rows()


@pytest.fixture
def connect(connect_url, monkeypatch):
    """A Connect session, with pyspark in Connect mode for the test only (as run_connected does for a job)."""
    monkeypatch.setenv(CONNECT_MODE, "1")
    session = connect_session(connect_url)
    yield session
    session.stop()


def test_trident_operations_over_spark_connect(connect, redis_client, redis_url, prefix):
    frame = connect.createDataFrame([tuple(r.values()) for r in ROWS], SCHEMA).repartition(3)
    assert type(frame).__module__.startswith("pyspark.sql.connect")
    assert rows_of(aggregate(frame, Mean())) == apply(Mean(), ROWS)
    assert rows_of(aggregate(frame, Count(), native=False)) == rows_of(aggregate(frame, Count())) == [(len(ROWS),)]
    assert bag(rows_of(group_by(frame, "user").aggregate(Distinct()))) == by_user(ROWS, Distinct())
    assert bag(rows_of(group_by(frame, "user").aggregate(Histogram()))) == by_user(ROWS, Histogram())
    per_partition = partition_aggregate(frame, UserCounts(), batch_id="1:0")
    assert rows_of(aggregate(per_partition, MergeCounts())) == [(user_counter(ROWS),)]
    empty = connect.createDataFrame([], SCHEMA)
    assert rows_of(aggregate(empty, Mean())) == [(Mean().zero(),)]

    state = State("users", namespace=f"{prefix}:users")
    users = state.build(redis_client)
    users.begin_commit(1)
    users.multi_update([("u1",), ("u2",)], [combine_sum(10), combine_sum(20)])
    users.commit(1)
    got = state_query(frame.select("user").distinct(), state, MapGet("n bigint"), key_fields=["user"],
                      redis_url=redis_url)
    assert bag(rows_of(got)) == bag([("u0", None), ("u1", 10), ("u2", 20), ("u3", None), (None, None)])

    with pytest.raises(ConfigError, match="Mean has schema 'mean bigintt', which Spark cannot parse"):
        bad = Mean()
        bad.schema = "mean bigintt"
        aggregate(frame, bad)

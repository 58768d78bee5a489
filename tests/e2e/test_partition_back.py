"""Issue 36 item 2, through Airflow: an opaque txid's retry finds a partition brought back and more entries.

Seed 004's word count over two Redis streams (StreamsSource, opaque), one on the test's Redis and one on a Redis
server of this test's own behind a TCP proxy (tests/support/servers.py). While the proxy is cut, txid 1 is planned
with that partition unavailable (count 0, flagged) and its Spark job dies at its fault point; its retry waits 30 s
(``retry_delay``). Meanwhile txid 2 is planned after txid 1's batch, the link is healed and both streams get more
entries. The retry plans txid 1 again and reads the partition that came back: txid 2 was planned on the old batch,
so txdag marks it and, once txid 1 commits, replays its run; it is re-emitted after txid 1's new batch. Nobody
steps in; the counts equal a recount of both streams, commits in order with no gap."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import redis
from conftest import REPO, AirflowInstance
from e2e_runs import RUN_TIMEOUT, trigger_until_drained
from support.runs import check_commits, counts
from support.servers import Proxy, RedisServer

from txdag.airflow.api import unique_run_id

pytestmark = pytest.mark.own_topologies  # no wait for the hour's scheduled runs (conftest)

TOPOLOGY = "streams_back"
NEAR, FAR = "streams_back:s:0", "streams_back:s:1"  # FAR lives on the test's own Redis, behind the proxy
FAR_CONN = "streams_back_far"


def dag_file() -> str:
    return f"""# An Airflow DAG: seed 004's word count over two Redis streams, one of them on another server.
from datetime import timedelta
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, StreamsSource
topology = TransactionalTopology(
    {TOPOLOGY!r},
    source=StreamsSource(streams=[{NEAR!r}, {FAR!r}], opaque=True, max_per_partition=20,
                         stream_conn_ids={{{FAR!r}: {FAR_CONN!r}}}),
    job={str(REPO / "spark_jobs" / "word_count.py")!r},
    states=[State("words", namespace={TOPOLOGY + ":words"!r})],
    max_active_transactions=2,
    retry_delay=timedelta(seconds=30),
)
dag = render(topology, dag_file=__file__)
"""


@pytest.fixture
def far(tmp_path) -> Iterator[tuple[redis.Redis, Proxy]]:
    server = RedisServer(tmp_path / "far-redis")
    server.start()
    proxy = Proxy(server.port)
    try:
        yield redis.Redis(host="127.0.0.1", port=server.port, decode_responses=True), proxy
    finally:
        proxy.close()
        server.kill()


def append(client: redis.Redis, stream: str, sentences: list[str]) -> None:
    for sentence in sentences:
        client.xadd(stream, {"value": sentence})


def recount(*readers: tuple[redis.Redis, str]) -> dict[str, int]:
    """The ground truth: every entry of both streams, read back, its words counted."""
    words = Counter()
    for client, stream in readers:
        for _, fields in client.xrange(stream):
            value = fields.get("value") or fields.get(b"value")
            words.update(w for w in (value.decode() if isinstance(value, bytes) else value).split(" ") if w)
    return dict(words)


def test_an_opaque_retry_that_finds_a_partition_brought_back_replays_the_later_txid_by_itself(
        airflow: AirflowInstance, store_of, far: tuple[redis.Redis, Proxy]) -> None:
    far_client, proxy = far
    store = store_of(TOPOLOGY)
    near_client = redis.Redis.from_url(airflow.redis_url, decode_responses=True)
    airflow.api.request("POST", "/connections", json={
        "connection_id": FAR_CONN, "conn_type": "redis", "host": "127.0.0.1", "port": proxy.port,
        "extra": json.dumps({"db": 0})})
    append(near_client, NEAR, [f"n{i % 5} first" for i in range(10)])
    append(far_client, FAR, [f"f{i % 3} first" for i in range(10)])
    proxy.cut()  # the far partition is unreachable while txid 1 and txid 2 are planned
    airflow.add_dag_file(f"{TOPOLOGY}.py", dag_file())
    airflow.api.wait_dag_parsed(TOPOLOGY, timeout=120)
    airflow.api.unpause(TOPOLOGY)

    first = airflow.api.trigger(TOPOLOGY, run_id=unique_run_id(TOPOLOGY))
    deadline = time.monotonic() + 300
    while f"process-{TOPOLOGY}-1-1" not in airflow.fired_faults():  # txid 1's first try died; its retry waits 30 s
        assert time.monotonic() < deadline, "txid 1's Spark job never reached its fault point"
        time.sleep(0.3)
    planned = store.read_txid(1)[0].metadata  # type: ignore[index]
    assert planned["partitions"][FAR].get("unavailable"), planned
    append(near_client, NEAR, [f"n{i % 4} second" for i in range(10)])
    second = airflow.api.trigger(TOPOLOGY, run_id=unique_run_id(TOPOLOGY))
    deadline = time.monotonic() + 120
    while store.read_topology()[0].last_txid < 2:
        assert time.monotonic() < deadline, "txid 2 was never allocated"
        time.sleep(0.3)
    proxy.heal()  # the partition comes back, with more entries, before txid 1's retry
    append(far_client, FAR, [f"f{i % 2} third" for i in range(10)])

    assert airflow.api.wait_run(TOPOLOGY, first, timeout=RUN_TIMEOUT) == "success"
    deadline = time.monotonic() + RUN_TIMEOUT
    while (got := store.read_txid(2)[0]).status.value != "committed":  # type: ignore[index]
        assert time.monotonic() < deadline, f"txid 2 never committed: {got}"
        time.sleep(0.5)
    assert airflow.api.wait_run(TOPOLOGY, second, timeout=RUN_TIMEOUT) == "success"
    trigger_until_drained(airflow, TOPOLOGY, at_once=2)
    records = check_commits(store)
    assert records[1].attempt == 2 and not records[1].metadata["partitions"][FAR].get("unavailable"), \
        f"txid 1's retry did not read the partition that came back: {records[1].metadata}"
    assert any("re-emitted automatically once txid 1 commits" in (h.error or "") for h in records[2].history), \
        "txid 2 was not marked for an automatic replay"
    assert records[2].attempt >= 2 and records[2].run_id == second
    assert counts(near_client, f"{TOPOLOGY}:words") == recount((near_client, NEAR), (far_client, FAR))
    print(f"\ntxid 1 planned {planned}, then {records[1].metadata}; txid 2 attempts {records[2].attempt}: "
          f"{[(h.attempt, h.status.value) for h in records[2].history]}")

"""The triggerer's watch of a source's backlog (txdag.airflow.triggers.SourceBacklog), run as the triggerer runs it
(its ``run()`` in an event loop, the topology loaded from its DAG file, the connections from AIRFLOW_CONN_*) over a
real Redis and ZooKeeper, with txids begun and committed by the in-process runner: it fires when enough entries
wait, not again until the run it started has begun its txid, not while the topology's txids in flight are at its
maximum, again for what is left once one commits; and a Redis that is down is logged, not raised."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from access import ZK_AUTH

from txdag.analytics.tweets import STATES, tweet_partials
from txdag.local import LocalTopology
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.state import RedisBackingMap, TransactionalMap
from txdag.txid.coordinator import Coordinator
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore

DAG_FILE = """from datetime import timedelta
from txdag import Backlog, TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology({prefix!r}, source=TweetsSource(prefix={prefix!r} + ":", max_transaction_size=10,
    redis_conn_id={redis!r}),
    job="job.py", states=[State("users", namespace={prefix!r} + ":users")], redis_conn_id={redis!r},
    zookeeper_conn_id="zk_backlog", drain=Backlog(entries=10, wait=timedelta(seconds=30), poll=0.1))
dag = render(topology, dag_file=__file__)
"""


@pytest.fixture
def dag_file(tmp_path: Path, prefix: str, redis_url: str, zk_hosts: str, zk_root: str, monkeypatch,
             airflow_home) -> Path:
    host, port = zk_hosts.split(",")[0].split(":")
    monkeypatch.setenv("AIRFLOW_CONN_ZK_BACKLOG", json.dumps({
        "conn_type": "zookeeper", "host": host, "port": int(port), "login": ZK_AUTH[0], "password": ZK_AUTH[1],
        "extra": {"root": zk_root}}))
    monkeypatch.setenv("AIRFLOW_CONN_REDIS_BACKLOG", redis_url)
    (tmp_path / "dags").mkdir()
    (tmp_path / "job.py").write_text("")
    path = tmp_path / "dags" / "backlog.py"
    path.write_text(DAG_FILE.format(prefix=prefix, redis="redis_backlog"))
    return path


def trigger(prefix: str, dag_file: Path, active_runs: list[int], max_active: int = 1):
    """The trigger, its DAG's active runs as ``active_runs[0]`` says (in Airflow's triggerer, its API server's
    count: tests/e2e/test_backlog_drain.py)."""
    from txdag.airflow.triggers import SourceBacklog

    class Counted(SourceBacklog):
        def active_runs(self) -> int:
            return active_runs[0]

    return Counted(prefix, str(dag_file), entries=10, wait_seconds=30.0, poll=0.1, max_active=max_active)


def local(redis_client, zk_hosts, zk_root, prefix) -> LocalTopology:
    spout = TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=10, topology=prefix)
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root), spout)
    states = {name: TransactionalMap(RedisBackingMap(redis_client, f"{prefix}:{name}")) for name in STATES}
    return LocalTopology(coordinator, redis_client, states, lambda recs: tweet_partials(r.value for r in recs))


async def fired_within(events, seconds: float, pending: asyncio.Task | None = None):
    """(the next event's payload or None, the still pending read): the read goes on past the wait, as in Airflow's
    triggerer, where the trigger runs on; cancelling it would end the trigger."""
    pending = pending or asyncio.ensure_future(anext(events))
    done, _ = await asyncio.wait({pending}, timeout=seconds)
    return (pending.result().payload, None) if done else (None, pending)


async def stop(events, pending: asyncio.Task | None) -> None:
    """End the trigger as the triggerer does: cancel its read, then close it (its clients)."""
    if pending is not None:
        pending.cancel()
        await asyncio.gather(pending, return_exceptions=True)
    await events.aclose()


def test_it_fires_for_a_backlog_then_once_per_txid_begun_within_the_txids_in_flight(
        dag_file, prefix, redis_client, zk_hosts, zk_root) -> None:
    append_tweets(redis_client, sample_tweets(25, seed=34), prefix=f"{prefix}:")
    topology = local(redis_client, zk_hosts, zk_root, prefix)

    async def scenario() -> None:
        active = [0]
        events, pending = trigger(prefix, dag_file, active).run(), None
        try:
            first, _ = await fired_within(events, 30)
            assert first == {"topology": prefix, "waiting": 25, "last_txid": 0, "in_flight": 0, "active_runs": 0}
            active[0] = 1  # Airflow made the event's run
            nothing, pending = await fired_within(events, 1.0)
            assert nothing is None  # its run has not begun a txid: a second event would start a run for the same batch
            emitted = await asyncio.to_thread(topology.coordinate, "run1")  # the run begins txid 1
            nothing, pending = await fired_within(events, 1.0, pending)
            assert nothing is None  # txid 1 in flight, the topology's maximum
            await asyncio.to_thread(topology.process, emitted)
            await asyncio.to_thread(topology.commit, emitted.tx)
            active[0] = 0
            second, pending = await fired_within(events, 30, pending)
            assert second == {"topology": prefix, "waiting": 15, "last_txid": 1, "in_flight": 0, "active_runs": 0}
        finally:
            await stop(events, pending)

    asyncio.run(scenario())


def test_a_source_that_is_down_is_logged_and_watched_again(dag_file, prefix, monkeypatch, capfd) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_REDIS_BACKLOG", "redis://127.0.0.1:1/0")

    async def scenario() -> None:
        events, pending = trigger(prefix, dag_file, [0]).run(), None
        try:
            nothing, pending = await fired_within(events, 1.5)
            assert nothing is None
        finally:
            await stop(events, pending)

    asyncio.run(scenario())
    said = capfd.readouterr().out
    assert f"topology={prefix}: cannot read its backlog (ServiceUnavailable:" in said, said[-2000:]
    assert said.count("cannot read its backlog") == 1  # once per new error, not once per poll


def test_what_the_watch_reads_names_a_failed_txid_that_holds_the_next_ones(prefix, redis_client, zk_hosts,
                                                                           zk_root) -> None:
    from txdag.airflow.triggers import read_backlog
    from txdag.zk.records import TxStatus

    append_tweets(redis_client, sample_tweets(25, seed=34), prefix=f"{prefix}:")
    topology = local(redis_client, zk_hosts, zk_root, prefix)
    store, spout = topology.coordinator.store, topology.coordinator.spout
    assert read_backlog(store, spout) == (25, 0, 0, False)  # never ran: the whole source waits
    topology.coordinate("run1")
    assert read_backlog(store, spout) == (15, 1, 1, False)
    record, version = store.read_txid(1)
    store.update([(record.moved(TxStatus.FAILED, "2026-01-01T00:00:00.000+00:00", failed_by=1), version)])
    assert read_backlog(store, spout) == (15, 1, 0, True)  # no new run until txid 1 is replayed


def test_what_the_watch_reads_needs_only_the_txids_after_the_committed_one(prefix, redis_client, zk_hosts,
                                                                          zk_root) -> None:
    from txdag.airflow.triggers import read_backlog

    append_tweets(redis_client, sample_tweets(25, seed=35), prefix=f"{prefix}:")
    topology = local(redis_client, zk_hosts, zk_root, prefix)
    store, spout = topology.coordinator.store, topology.coordinator.spout
    for run in ("run1", "run2"):
        emitted = topology.coordinate(run)
        topology.process(emitted)
        topology.commit(emitted.tx)
    assert read_backlog(store, spout) == (5, 2, 0, False)  # the committed last txid's batch is where the lag counts
    topology.coordinate("run3")
    store.client.delete(store.txid_path(1))  # the committed txids' records are not read: txid 1's may be gone
    assert read_backlog(store, spout) == (0, 3, 1, False)
    store.client.delete(store.txid_path(3))
    with pytest.raises(LookupError, match="txid 3's record is not in ZooKeeper: the source's lag is unknown"):
        read_backlog(store, spout)  # never the whole source as if no txid had run: the watch logs it and looks again

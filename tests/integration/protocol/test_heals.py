"""What a failure must record cannot depend on the service whose outage caused it, and no wait outlives what it
waits for: the failure record without Redis, and a waiting task that looks at the run it waits on (over real Redis and
ZooKeeper; the run's Airflow state is given as the Task SDK's get_dagrun_state answers it)."""

from __future__ import annotations

import socket

import redis
from test_protocol_steps import statuses, tweets_topology

from txdag.airflow.awaited import look_at
from txdag.protocol import ClientsRuntime, Committed, Emission, Failed, steps
from txdag.zk.records import TxStatus


def unreachable_redis() -> redis.Redis:
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5, retry=None)


class TaskInstance:
    """Answers get_dagrun_state as the Task SDK does: the Task SDK's DagRunState per run id (a str enum whose
    str() is its name), or an error for an unknown run."""

    def __init__(self, states: dict[str, str]) -> None:
        self.states, self.asked = states, []

    def get_dagrun_state(self, dag_id: str, run_id: str):
        from airflow.sdk.api.datamodels._generated import DagRunState

        self.asked.append((dag_id, run_id))
        if run_id not in self.states:
            raise RuntimeError(f"DagRun {run_id} not found")
        return DagRunState(self.states[run_id])


def test_a_failure_is_recorded_while_redis_is_unreachable(redis_client, zk_hosts, zk_root, prefix):
    """The failure callback of a process task reads the attempt's claim in Redis; with Redis down it used to raise,
    leaving the txid 'processing' in ZooKeeper after its run had failed (the wedge). It records the failure."""
    topology = tweets_topology(redis_client, zk_hosts, zk_root, prefix)
    first = steps.coordinate(topology.runtime, "run1")
    second = steps.coordinate(topology.runtime, "run2")
    assert topology.runtime.staging.claim(first.tx, "run1 try 1") == "run1 try 1"
    down = ClientsRuntime(topology.coordinator, unreachable_redis(), topology.states)
    assert steps.fail(down, "run1", "process failed: Redis is unreachable", owner="run1 try 3") == Failed(
        first.tx, (1, 2))
    assert statuses(topology) == {1: TxStatus.FAILED, 2: TxStatus.FAILED}
    assert second.tx.txid == 2


def test_a_wait_on_a_run_that_failed_unrecorded_records_the_failure(redis_client, zk_hosts, zk_root, prefix):
    topology = tweets_topology(redis_client, zk_hosts, zk_root, prefix)
    steps.coordinate(topology.runtime, "run1")
    steps.coordinate(topology.runtime, "run2")
    ti = TaskInstance({"run1": "failed", "run2": "running"})
    assert look_at(topology.runtime, {"ti": ti}, "tweets", 1) == ("run1", "failed")
    assert ti.asked == [("tweets", "run1")]
    assert statuses(topology) == {1: TxStatus.FAILED, 2: TxStatus.FAILED}, "Airflow and ZooKeeper agree now"
    record = topology.coordinator.store.read_txid(1)[0]
    assert "its run 'run1' failed in Airflow while ZooKeeper still had txid 1 emitted (attempt 1)" in record.error
    assert look_at(topology.runtime, {"ti": ti}, "tweets", 1) == ("run1", "failed"), "seen, recorded once"
    assert topology.coordinator.store.read_txid(1)[0].error == record.error
    ti.states["run1"] = "queued"  # a replay cleared it
    assert look_at(topology.runtime, {"ti": ti}, "tweets", 1) == ("run1", "queued")
    refused = steps.coordinate(topology.runtime, "run3")
    assert refused.waiting_on == 1 and "no new txid while txid 1 is failed" in refused.reason


def test_a_queued_or_running_or_unknown_run_changes_nothing(redis_client, zk_hosts, zk_root, prefix):
    topology = tweets_topology(redis_client, zk_hosts, zk_root, prefix)
    steps.coordinate(topology.runtime, "run1")
    for states, seen in (({"run1": "queued"}, ("run1", "queued")), ({"run1": "running"}, ("run1", "running")),
                         ({}, None)):
        assert look_at(topology.runtime, {"ti": TaskInstance(states)}, "tweets", 1) == seen
    assert statuses(topology) == {1: TxStatus.EMITTED}
    assert look_at(topology.runtime, {"ti": TaskInstance({"run1": "failed"})}, "tweets", 7) is None, "no such txid"


def test_an_opaque_retry_with_another_batch_replays_the_later_txid_itself(redis_client, zk_hosts, zk_root, prefix):
    """Txid 1 is emitted with the 5 entries there were, txid 2 after it; txid 1's retry finds 10 and takes them all:
    txid 2, planned on the old batch, is marked for automatic replay (never failed for good), new runs skip until
    then, and once txid 1 commits it is due: re-emitted after txid 1's new batch. Nothing counted twice or lost."""
    from collections import Counter

    from access import ZK_AUTH

    from txdag.local import LocalTopology
    from txdag.spouts import OpaquePartitionedStreamSpout, StreamPartition, append_entries
    from txdag.spouts.samples import sample_sentences
    from txdag.state import OpaqueMap, RedisBackingMap
    from txdag.txid.coordinator import Coordinator, NotReady
    from txdag.zk.client import connect_zk
    from txdag.zk.store import TransactionStore

    part = StreamPartition(name="p", client=redis_client, stream=f"{prefix}:p")
    sentences = sample_sentences(20, seed=3)
    append_entries(part, sentences[:5])
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root),
                              OpaquePartitionedStreamSpout([part], max_per_partition=10), max_active_transactions=2)
    words = OpaqueMap(RedisBackingMap(redis_client, f"{prefix}:words"))
    topology = LocalTopology(coordinator, redis_client, {"words": words},
                             lambda recs: {"words": Counter((w,) for r in recs for w in r.value.split())})
    first = topology.coordinate("run1")
    append_entries(part, sentences[5:15])
    second = topology.coordinate("run2")
    assert second.metadata["partitions"]["p"]["after"] == first.metadata["partitions"]["p"]["last"]
    retried = topology.coordinate("run1")  # txid 1's retry (attempt 2): an opaque spout takes what is there now
    assert retried.metadata != first.metadata
    record = coordinator.store.read_txid(2)[0]
    assert (record.status, record.failed_by, record.auto_replay) == (TxStatus.FAILED, 1, True)
    assert "re-emitted automatically once txid 1 commits" in record.error
    skipped = coordinator.coordinate("run3")
    assert isinstance(skipped, NotReady) and "txid 2 is re-emitted automatically once txid 1 commits" in skipped.reason
    assert coordinator.automatic_replays(0) == [], "not before txid 1 is committed"

    topology.process(retried)
    assert isinstance(topology.commit(retried.tx), Committed)
    assert [r.txid for r in coordinator.automatic_replays(1)] == [2]
    append_entries(part, sentences[15:])
    again = topology.coordinate("run2")  # what the run's replay does (txdag.airflow.replays clears it)
    assert again.tx.attempt == 2 and again.metadata["partitions"]["p"]["after"] == retried.metadata["partitions"][
        "p"]["last"]
    topology.process(again)
    assert isinstance(topology.commit(again.tx), Committed)
    while isinstance(more := coordinator.coordinate(f"more{coordinator.committed_txid()}"), Emission):
        topology.process(more)
        topology.commit(more.tx)
    truth = Counter(w for s in sentences for w in s.split())
    assert {w: v.curr for w, v in zip(truth, words.backing.multi_get([(w,) for w in truth]))} == dict(truth)

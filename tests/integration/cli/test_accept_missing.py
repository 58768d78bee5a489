"""A hole in the tweets source, end to end against real Redis and ZooKeeper: the txid fails and every later run is
refused (naming it and the ways out), ``txdag status``/``show`` lead with it, ``txdag accept-missing`` records the
missing id in its metadata, the replay commits without it, the counts are exact, and the id is a rejected entry of
that txid. The refusals (committed, no hole, streams, unknown names) are cases of tests/integration/cli/
test_mistakes.py."""

from __future__ import annotations

import json

import pytest
from access import ZK_AUTH
from support.cli_project import dag_folder, drop_keys, set_connections, state_client

from txdag.analytics.tweets import tweet_partials
from txdag.attempt import TransactionAttempt
from txdag.cli import exits
from txdag.cli.main import main
from txdag.errors import BatchReadError
from txdag.local import LocalTopology
from txdag.protocol import Committed, steps
from txdag.spouts import SpoutContext
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import append_tweets
from txdag.topology.topology import load_definitions
from txdag.txid.coordinator import Coordinator, Emission, Wait
from txdag.zk.client import connect_zk
from txdag.zk.records import TxStatus
from txdag.zk.store import TransactionStore

pytestmark = pytest.mark.usefixtures("airflow_home")
DB = 11
DAG_FILE = """
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

dag = render(TransactionalTopology(
    "{topo}", source=TweetsSource(prefix="{topo}:", max_transaction_size=10), job="spark_jobs/job.py",
    states=[State("users", namespace="{topo}:users")]), dag_file=__file__)
"""


@pytest.fixture
def setup(monkeypatch, redis_url, zk_hosts, zk_root, prefix, tmp_path):
    """The topology's DAG folder and connections; 30 tweets (ids 1..30), of which id 16 (in txid 2) is lost."""
    set_connections(monkeypatch, redis_url, zk_hosts, zk_root, DB, zk_extra={"timeout": 2})
    dag_folder(monkeypatch, tmp_path, prefix, DAG_FILE)
    client = state_client(redis_url, DB)
    tweets = sample_tweets(30, seed=21)
    append_tweets(client, tweets, prefix=f"{prefix}:")
    client.delete(f"{prefix}:16")
    definition = load_definitions(tmp_path / "dags")[0][prefix]
    store = TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root)
    spout = definition.source.build(SpoutContext(prefix, {"redis_default": client}))
    topology = LocalTopology(Coordinator(store, spout, max_active_transactions=3), client,
                             {s.name: s.build(client) for s in definition.states}, count_users)
    yield topology, client, tweets
    store.client.stop()
    store.client.close()
    drop_keys(client, prefix)


def count_users(records):
    return {"users": tweet_partials(r.value for r in records)["users"]}


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_a_hole_fails_its_txid_and_accepting_it_lets_the_replay_commit_exact_counts(setup, prefix, capsys) -> None:
    topology, client, tweets = setup
    e1, e2, e3 = (topology.coordinate(f"run{n}") for n in (1, 2, 3))
    topology.process(e1)
    topology.commit(e1.tx)
    with pytest.raises(BatchReadError, match=f"txdag accept-missing {prefix} 2 --confirm --replay"):
        topology.process(e2)
    store = topology.coordinator.store
    assert [store.read_txid(t)[0].status for t in (2, 3)] == [TxStatus.FAILED, TxStatus.FAILED]

    refused = topology.coordinate("run4")  # the coordinate task fails on this (red, never a green skip)
    assert isinstance(refused, Wait) and not refused.replay and refused.waiting_on == 2
    for said in ("no new txid while txid 2 is failed (attempt 1, run 'run2'", f"key '{prefix}:16' is missing",
                 "run 'run4' consumed no txid", f"txdag accept-missing {prefix} 2 --confirm --replay",
                 f"txdag replay {prefix} --from 2", f"txdag reset {prefix} --confirm"):
        assert said in refused.reason, said
    before = [store.read_txid(t) for t in (2, 3)]
    assert steps.fail(topology.runtime, "run4", f"coordinate failed: {refused.reason}") is None, "it owns no txid"
    assert [store.read_txid(t) for t in (2, 3)] == before and store.txid_of_run("run4") is None

    code, out, _ = run(["status", prefix], capsys)
    lines = out.splitlines()
    assert code == exits.OK and lines[0].startswith("txid 2 FAILED (attempt 1, run run2): ")
    assert f"key '{prefix}:16' is missing" in lines[0] and lines[1] == "  failed behind it: txid 3"
    assert f"txdag accept-missing {prefix} 2 --confirm --replay" in out
    assert out.index("FAILED") < out.index(f"topology {prefix}: committed up to txid 1")

    code, out, _ = run(["accept-missing", prefix, "2"], capsys)
    assert code == exits.FAILED and "would accept 1 id(s) of txid 2's batch missing in the source (16)" in out
    assert "nothing recorded: add --confirm" in out and "missing" not in store.read_txid(2)[0].metadata
    code, out, _ = run(["accept-missing", prefix, "2", "--confirm"], capsys)
    assert code == exits.OK and out.splitlines()[-1] == f"next: txdag replay {prefix} --from 2"
    accepted = store.read_txid(2)[0].metadata["missing"]
    assert list(accepted) == ["16"]

    for run_id in ("run2", "run3"):  # what `txdag replay --from 2` has Airflow do: clear the runs, in txid order
        emission = topology.coordinate(run_id)
        assert isinstance(emission, Emission) and emission.replay and emission.tx.attempt == 2
        topology.process(emission)
        assert isinstance(topology.commit(emission.tx), Committed)
    assert store.read_topology()[0].committed_txid == 3

    truth = tweet_partials(t for i, t in enumerate(tweets, start=1) if i != 16)["users"]
    state = topology.states["users"]
    keys = sorted(truth)
    assert dict(zip(keys, state.multi_get(keys))) == dict(truth)
    assert client.hlen(f"{prefix}:users") == len(truth), "no user counted from the lost tweet"

    code, out, _ = run(["rejections", prefix, "--json"], capsys)
    rows = json.loads(out)["rejections"]
    assert code == exits.OK and [(r["id"], r["txid"], r["attempt"]) for r in rows] == [("16", 2, 2)]
    assert rows[0]["reason"] == f"accepted as missing by txdag accept-missing at {accepted['16']}"
    code, out, _ = run(["status", prefix], capsys)
    assert out.startswith(f"topology {prefix}: committed up to txid 3") and "1 rejected entries" in out
    code, out, _ = run(["show", prefix, "2"], capsys)
    assert "ids 11..20 (1 accepted as missing)" in out and "FAILED" not in out

    client.set(f"{prefix}:16", tweets[15])  # restored later: the replays still read the batch that was committed
    batch = topology.coordinator.spout.emit_batch(TransactionAttempt(2, 3), store.read_txid(2)[0].metadata)
    assert "16" not in [r.id for r in batch.records] and [r.id for r in batch.rejections] == ["16"]
    assert len(batch.records) == 9


def test_accept_missing_refuses_a_txid_changed_meanwhile_and_a_txid_in_flight(setup, prefix, capsys) -> None:
    """The metadata is written with ZooKeeper's version check; a txid still in flight is not a failed one."""
    from txdag.txid.holes import AcceptRefused, accept_missing

    topology, _, _ = setup
    topology.coordinate("run1")
    e2 = topology.coordinate("run2")
    code, _, err = run(["accept-missing", prefix, "2", "--confirm"], capsys)
    assert code == exits.REFUSED and "txid 2 is emitted, not failed" in err
    with pytest.raises(BatchReadError):
        topology.process(e2)
    store, spout = topology.coordinator.store, topology.coordinator.spout
    real_update = store.update

    def concurrent(records, topology=None):
        current, version = store.read_txid(2)
        real_update([(current, version)])  # another writer: the znode's version moves
        real_update(records, topology)

    store.update = concurrent
    with pytest.raises(AcceptRefused, match="txid 2 changed while its hole was being accepted"):
        accept_missing(store, spout, 2, "2026-11-24T16:00:00+00:00", record=True)
    assert "missing" not in store.read_txid(2)[0].metadata


def test_accept_missing_of_a_topology_that_allocated_no_txid_yet(setup, prefix, zk_hosts, zk_root, capsys) -> None:
    """Its record exists (a coordinate found nothing to emit) with no txid: said so, not 'has txids 1..0'."""
    store = TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root)
    try:
        store.ensure()
    finally:
        store.client.stop()
        store.client.close()
    assert main(["accept-missing", prefix, "1"]) == exits.REFUSED
    err = capsys.readouterr().err
    assert f"topology {prefix!r} has no txid yet: no batch has missing entries to accept" in err, err

"""One owner per topology against real ZooKeeper: the coordinate step adopts a topology without an owner, goes on
for the same definition, refuses one whose fingerprint differs (naming what changed, allocating nothing) until
``accept`` records it, and reads the owner record's format and fingerprint scheme strictly."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from access import ZK_AUTH

from txdag.analytics.tweets import STATES, tweet_partials
from txdag.errors import FormatVersionError
from txdag.local import LocalTopology
from txdag.protocol import Committed, Emission, OwnerChanged, Processed, steps
from txdag.protocol.ownership import accept, record_of
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.staging.layout import claim_key
from txdag.state import RedisBackingMap, TransactionalMap
from txdag.topology.definition import State, TweetsSource
from txdag.topology.owner import FINGERPRINT_SCHEME, Owner
from txdag.topology.topology import TransactionalTopology
from txdag.txid.coordinator import Coordinator
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def local(redis_client, zk_hosts, zk_root, prefix) -> LocalTopology:
    append_tweets(redis_client, sample_tweets(200, seed=5), prefix=f"{prefix}:")
    spout = TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=40, topology=prefix)
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root), spout,
                              max_active_transactions=10)
    states = {name: TransactionalMap(RedisBackingMap(redis_client, f"{prefix}:{name}")) for name in STATES}
    return LocalTopology(coordinator, redis_client, states, lambda recs: tweet_partials(r.value for r in recs))


def definition(prefix: str, **changed) -> TransactionalTopology:
    args = dict(source=TweetsSource(prefix=f"{prefix}:", max_transaction_size=40),
                job="spark_jobs/tweets_analytics.py", states=[State(n, namespace=f"{prefix}:{n}") for n in STATES],
                project_dir=str(ROOT))
    return TransactionalTopology(prefix, **{**args, **changed})


def owner(prefix: str, file: str = "tweets.py", **changed) -> Owner:
    return Owner.of(definition(prefix, **changed), ROOT / "dags" / file)


def test_the_first_coordinate_adopts_and_a_changed_definition_is_refused_until_accepted(local, prefix) -> None:
    rt, store = local.runtime, local.coordinator.store
    first = steps.coordinate(rt, "run1", owner(prefix))
    assert isinstance(first, Emission) and first.tx.txid == 1
    recorded, _ = store.read_owner()
    assert (recorded.dag_file, recorded.how, recorded.fingerprint) == ("dags/tweets.py", "adopted",
                                                                       owner(prefix).fingerprint)

    users = [State("users", namespace=f"{prefix}:users_v2"), *(State(n, namespace=f"{prefix}:{n}")
                                                               for n in STATES if n != "users")]
    changed = owner(prefix, "zz_copy.py", states=users)
    refused = steps.coordinate(rt, "run2", changed)
    assert isinstance(refused, OwnerChanged)
    assert refused.changes == (f"state 'users' namespace: '{prefix}:users' -> '{prefix}:users_v2'",)
    assert refused.reason.startswith(
        f"topology {prefix!r}: the definition this run uses (dags/zz_copy.py, fingerprint {changed.fingerprint}) "
        f"is not the one that owns the topology (dags/tweets.py, fingerprint {owner(prefix).fingerprint}, adopted ")
    assert f"run `txdag topology accept {prefix}`" in refused.reason
    assert store.read_topology()[0].last_txid == 1 and store.txid_of_run("run2") is None, "nothing allocated"
    assert isinstance(steps.coordinate(rt, "run2", changed), OwnerChanged), "refused again, not adopted"

    previous, new = accept(store, changed)
    assert previous == recorded and (new.how, new.dag_file) == ("accepted", "dags/zz_copy.py")
    again = steps.coordinate(rt, "run2", changed)
    assert isinstance(again, Emission) and again.tx.txid == 2
    old = steps.coordinate(rt, "run3", owner(prefix))
    assert isinstance(old, OwnerChanged), "the old definition is not the owner any more"
    assert old.changes == (f"state 'users' namespace: '{prefix}:users_v2' -> '{prefix}:users'",)


def test_a_txid_in_flight_when_its_definition_changes_waits_in_process_and_commit(local, prefix) -> None:
    """Airflow's process and commit tasks parse the DAG file again: a txid coordinated under the owner must not be
    staged or committed under an edited definition before the change is accepted (nor fail and cascade)."""
    rt, store = local.runtime, local.coordinator.store
    emission = steps.coordinate(rt, "run1", owner(prefix))
    edited = owner(prefix, states=[State(n, namespace=f"{prefix}:v2:{n}") for n in STATES])
    waiting = steps.process(rt, "run1", emission, local.run_job, owner="run1 try 1", definition=edited)
    assert isinstance(waiting, OwnerChanged) and len(waiting.changes) == len(STATES)
    assert store.read_txid(1)[0].status.value == "emitted"
    assert not local.client.exists(claim_key(prefix, emission.tx)), "not even claimed"
    assert isinstance(steps.process(rt, "run1", emission, local.run_job, owner="run1 try 1",
                                    definition=owner(prefix)), Processed)
    waiting = steps.commit(rt, emission.tx, edited)
    assert isinstance(waiting, OwnerChanged) and waiting.reason.endswith(
        f"This txid was coordinated under the owner: its commit waits, writing nothing, until you run `txdag "
        f"topology accept {prefix}` with the new definition in the DAG folder (it then goes on with the new "
        f"definition) or restore the definition")
    assert store.read_topology()[0].committed_txid == 0, "nothing committed"
    accept(store, edited)
    assert isinstance(steps.commit(rt, emission.tx, edited), Committed)


def test_tuning_and_another_dag_file_with_the_same_definition_go_on(local, prefix, caplog) -> None:
    rt = local.runtime
    assert isinstance(steps.coordinate(rt, "run1", owner(prefix)), Emission)
    bigger = owner(prefix, "moved.py", source=TweetsSource(prefix=f"{prefix}:", max_transaction_size=80),
                   max_active_transactions=3, schedule="@daily")
    with caplog.at_level("WARNING", logger="txdag.protocol.ownership"):
        assert isinstance(steps.coordinate(rt, "run2", bigger), Emission)
    assert "defined by dags/moved.py now, recorded owner dags/tweets.py (same definition" in caplog.text
    assert local.coordinator.store.read_owner()[0].dag_file == "dags/tweets.py", "a log line, not a new owner"


def test_a_topology_from_before_owners_is_adopted_and_goes_on_from_its_last_txid(local, prefix) -> None:
    rt, store = local.runtime, local.coordinator.store
    for n in (1, 2):  # a driver that records no owner (the in-process runner, an older txdag)
        emission = steps.coordinate(rt, f"run{n}")
        local.process(emission, f"run{n}")
        local.commit(emission.tx)
    assert store.read_owner() is None
    third = steps.coordinate(rt, "run3", owner(prefix))
    assert isinstance(third, Emission) and third.tx.txid == 3
    assert store.read_owner()[0].how == "adopted"


def test_a_record_of_an_older_fingerprint_scheme_is_adopted_again_and_a_newer_one_refused(local, prefix) -> None:
    rt, store = local.runtime, local.coordinator.store
    other = owner(prefix, states=[State("elsewhere")])
    assert store.write_owner(replace(record_of(other, "accepted"), scheme=FINGERPRINT_SCHEME - 1), None)
    assert isinstance(steps.coordinate(rt, "run1", owner(prefix)), Emission)
    recorded, version = store.read_owner()
    assert (recorded.scheme, recorded.fingerprint) == (FINGERPRINT_SCHEME, owner(prefix).fingerprint)
    assert store.write_owner(replace(recorded, scheme=FINGERPRINT_SCHEME + 1), version)
    with pytest.raises(FormatVersionError, match=rf"fingerprint scheme {FINGERPRINT_SCHEME + 1}, newer than this "
                                                 rf"txdag's {FINGERPRINT_SCHEME}"):
        steps.coordinate(rt, "run2", owner(prefix))


def test_writing_the_owner_is_compare_and_set(local, prefix) -> None:
    store = local.coordinator.store
    record = record_of(owner(prefix), "adopted")
    assert store.write_owner(record, None) and not store.write_owner(record, None), "created once"
    _, version = store.read_owner()
    assert store.write_owner(record, version) and not store.write_owner(record, version), "a stale version loses"

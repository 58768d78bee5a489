"""The core end to end, in process: coordinator + spout + staging + commit over real Redis and ZooKeeper.

Every scenario ends by comparing the committed state with the ground truth computed straight from the source.
"""

import pytest
from access import ZK_AUTH

from txdag import TransactionAttempt
from txdag.analytics.tweets import STATES, tweet_partials
from txdag.commit.rejections import read_rejections
from txdag.errors import CascadeError
from txdag.local import LocalTopology
from txdag.protocol import AlreadyCommitted, Committed, Wait
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.state import JoinedKeyCodec, RedisBackingMap, TransactionalMap
from txdag.state.keys import DEFAULT_KEY_CODEC
from txdag.txid.coordinator import Coordinator, Emission
from txdag.zk.client import connect_zk
from txdag.zk.records import TxStatus
from txdag.zk.store import TransactionStore


class Flaky:
    """The tweets processing, raising once for the chosen txids' first attempt."""

    def __init__(self, fail_on=()):
        self.fail_on = set(fail_on)
        self.seen = []

    def __call__(self, records):
        first_id = int(records[0].id) if records else None
        self.seen.append(first_id)
        if first_id in self.fail_on:
            self.fail_on.discard(first_id)
            raise RuntimeError(f"injected failure at tweet {first_id}")
        return tweet_partials(r.value for r in records)


@pytest.fixture
def tweets(redis_client, prefix):
    data = sample_tweets(230, seed=3)
    append_tweets(redis_client, data, prefix=f"{prefix}:")
    return data


def build(redis_client, zk_hosts, zk_root, prefix, process, max_active=3):
    spout = TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=50, topology=prefix)
    coordinator = Coordinator(
        TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root), spout,
        max_active_transactions=max_active,
    )
    codecs = {"users_hashtags": JoinedKeyCodec(":", 2)}
    states = {
        name: TransactionalMap(
            RedisBackingMap(redis_client, f"{prefix}:{name}", key_codec=codecs.get(name, DEFAULT_KEY_CODEC))
        )
        for name in STATES
    }
    return LocalTopology(coordinator, redis_client, states, process, marker_key=f"{prefix}:LAST_COMMITTED")


def committed_state(redis_client, prefix):
    out = {}
    for name in STATES:
        raw = redis_client.hgetall(f"{prefix}:{name}")
        codec = JoinedKeyCodec(":", 2) if name == "users_hashtags" else DEFAULT_KEY_CODEC
        out[name] = {codec.decode(k.decode()): int(v) for k, v in raw.items()}
    return out


def truth(tweets):
    return {name: dict(counter) for name, counter in tweet_partials(tweets).items()}


def test_parallel_processing_out_of_order_with_a_failure_commits_exactly_once(
    redis_client, zk_hosts, zk_root, prefix, tweets
):
    topology = build(redis_client, zk_hosts, zk_root, prefix, Flaky(fail_on={51}))
    e1, e2, e3 = (topology.coordinate(f"run{n}") for n in (1, 2, 3))
    assert [e.tx.txid for e in (e1, e2, e3)] == [1, 2, 3]
    assert topology.coordinate("run4").__class__.__name__ == "Busy"  # max_active_transactions = 3
    topology.process(e3)
    with pytest.raises(RuntimeError, match="injected failure at tweet 51"):
        topology.process(e2)  # txid 2 fails: 3 is failed with it (the cascade)
    topology.process(e1)
    assert isinstance(topology.commit(e1.tx), Committed)
    with pytest.raises(CascadeError, match="txid 2"):
        topology.commit(e3.tx)
    r2, r3 = topology.coordinate("run2"), topology.coordinate("run3")
    assert (r2.tx.attempt, r3.tx.attempt) == (2, 2)
    assert (r2.metadata, r3.metadata) == (e2.metadata, e3.metadata), "a transactional spout replays the same batch"
    topology.process(r3)
    topology.process(r2)
    assert isinstance(topology.commit(r3.tx), Wait)  # 3 waits for 2
    assert isinstance(topology.commit(r2.tx), Committed)
    assert isinstance(topology.commit(r3.tx), Committed)
    topology.drain(run_prefix="more")
    assert committed_state(redis_client, prefix) == truth(tweets)
    status = topology.coordinator.status()
    assert status.topology.committed_txid == 5 and redis_client.get(f"{prefix}:LAST_COMMITTED") == b"5"
    assert all(r.status is TxStatus.COMMITTED for r in status.txids)
    assert redis_client.keys(f"txdag:stage:{{{prefix}}}:*") == [], "staging cleaned up"


@pytest.mark.parametrize("crash_point", ["after_state_write", "after_commit_record"])
def test_a_crash_inside_the_commit_then_a_rerun_equals_a_clean_run(
    redis_client, zk_hosts, zk_root, prefix, tweets, monkeypatch, crash_point
):
    topology = build(redis_client, zk_hosts, zk_root, prefix, Flaky())
    emission = topology.coordinate("run1")
    topology.process(emission)

    class Crash(BaseException):
        pass

    target = topology.coordinator if crash_point == "after_state_write" else topology.staging
    name = "record_commit" if crash_point == "after_state_write" else "delete"
    original = getattr(target, name)
    monkeypatch.setattr(target, name, lambda *a, **k: (_ for _ in ()).throw(Crash()))
    with pytest.raises(Crash):
        topology.commit(emission.tx)
    monkeypatch.setattr(target, name, original)
    rerun = topology.commit(emission.tx)  # the commit task's retry
    assert isinstance(rerun, Committed if crash_point == "after_state_write" else AlreadyCommitted)
    if crash_point == "after_state_write":
        assert rerun.applied == 0, "the state already held txid 1: nothing is added twice"
        assert rerun.staged_bytes == 0, "the marker showed txid 1 in: nothing applied, no bytes"
    topology.drain(run_prefix="rest")
    assert committed_state(redis_client, prefix) == truth(tweets)


def test_a_cleared_committed_run_changes_no_count(redis_client, zk_hosts, zk_root, prefix, tweets):
    topology = build(redis_client, zk_hosts, zk_root, prefix, Flaky())
    topology.drain()
    replay = topology.coordinate("local__1")
    assert isinstance(replay, Emission) and replay.already_committed and replay.tx == TransactionAttempt(2, 2)
    topology.process(replay)
    assert isinstance(topology.commit(replay.tx), AlreadyCommitted)
    assert committed_state(redis_client, prefix) == truth(tweets)


def test_a_restart_resumes_from_zookeeper(redis_client, zk_hosts, zk_root, prefix, tweets):
    first = build(redis_client, zk_hosts, zk_root, prefix, Flaky())
    emission = first.coordinate("a")
    first.process(emission)
    first.commit(emission.tx)
    pending = first.coordinate("b")  # processed by nobody: the process dies here
    again = build(redis_client, zk_hosts, zk_root, prefix, Flaky())
    replay = again.coordinate("b")
    assert replay.tx == TransactionAttempt(2, 2) and replay.metadata == pending.metadata
    again.process(replay)
    again.commit(replay.tx)
    again.drain(run_prefix="c")
    assert committed_state(redis_client, prefix) == truth(tweets)


def test_a_non_utf8_tweet_is_a_listed_rejection_and_its_neighbours_count(redis_client, zk_hosts, zk_root, prefix):
    from txdag.commit.rejections import list_rejections, record_rejections

    good = ["hi @ann #x", "@bob #y"]
    append_tweets(redis_client, [good[0], b"\xff\xfe @bad #bad", good[1]], prefix=f"{prefix}:")
    topology = build(redis_client, zk_hosts, zk_root, prefix, Flaky())
    topology.drain()
    assert committed_state(redis_client, prefix) == truth(good)
    rejected = list_rejections(redis_client, prefix)
    assert list(rejected) == ["2"] and rejected["2"]["txid"] == 1 and "UTF-8" in rejected["2"]["reason"]
    record = topology.coordinator.status().txids[0]
    batch = topology.coordinator.spout.emit_batch(TransactionAttempt(1, 2), record.metadata)  # a replay
    assert record_rejections(redis_client, prefix, batch.tx, batch.rejections) == 1
    assert len(list_rejections(redis_client, prefix)) == 1, "a replayed rejection is not counted twice"


def test_a_key_whose_first_field_holds_the_separator_is_a_counted_rejection_not_another_keys_count(
    redis_client, zk_hosts, zk_root, prefix
):
    """("@a:#b", "#c") would be stored as "@a:#b:#c", the field of ("@a", "#b:#c"): it is rejected, named by
    state, txid and field, and the other key keeps its own count."""
    append_tweets(redis_client, ["@a:#b #c", "@a #b:#c", "@ann #x"], prefix=f"{prefix}:")
    topology = build(redis_client, zk_hosts, zk_root, prefix, Flaky())
    emission = topology.coordinate("run1")
    assert topology.process(emission) == 3
    assert isinstance(topology.commit(emission.tx), Committed)
    assert committed_state(redis_client, prefix)["users_hashtags"] == {("@a", "#b:#c"): 1, ("@ann", "#x"): 1}
    assert redis_client.hgetall(f"{prefix}:users_hashtags") == {b"@a:#b:#c": b"1", b"@ann:#x": b"1"}
    assert committed_state(redis_client, prefix)["users"] == {("@a:#b",): 1, ("@a",): 1, ("@ann",): 1}
    total, rows = read_rejections(redis_client, prefix, 10)
    assert total == 1
    assert rows[0]["id"] == 'key:users_hashtags:1:["@a:#b","#c"]' and rows[0]["txid"] == 1
    assert rows[0]["reason"].startswith("state 'users_hashtags' txid 1: key field 0 '@a:#b' of ('@a:#b', '#c') "
                                        "contains the separator ':'")


def test_a_commit_reports_the_bytes_of_the_partials_it_applied(redis_client, zk_hosts, zk_root, prefix, tweets):
    """The commit's staged_bytes (txdag.airflow.metrics' commit_bytes) is the fields and values of the txid's
    staging as Redis holds them, counted inside Redis by the script that applies them; a commit whose marker
    shows the txid in already applied nothing and reports no bytes."""
    from txdag.staging.layout import stage_key

    topology = build(redis_client, zk_hosts, zk_root, prefix, Flaky())
    emission = topology.coordinate("run1")
    topology.process(emission)
    staged = sum(len(f) + len(v) for name in STATES
                 for f, v in redis_client.hgetall(stage_key(prefix, emission.tx, name)).items())
    outcome = topology.commit(emission.tx)
    assert isinstance(outcome, Committed) and outcome.applied > 0
    assert outcome.staged_bytes == staged > 0, (outcome, staged)

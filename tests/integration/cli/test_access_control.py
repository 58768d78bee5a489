"""Access control against the real Redis and ZooKeeper: a topology's restricted user runs it end to end, is
refused everything else with an AccessDenied that names what and what to do, and no password is ever shown."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest
import redis
from access import PASSWORDS, ZK_AUTH, redis_user
from support.keys import every_kind_of_key, source_keys, written_keys

from txdag.analytics.tweets import tweet_partials
from txdag.attempt import TransactionAttempt
from txdag.errors import AccessDenied, ConfigError
from txdag.local import LocalTopology
from txdag.protocol import Committed
from txdag.redisio import redis_errors
from txdag.spouts import SpoutContext, StreamPartition, append_entries
from txdag.spouts.samples import sample_sentences, sample_tweets
from txdag.spouts.tweets import append_tweets
from txdag.staging.store import Staging
from txdag.topology.definition import State, StreamsSource, TweetsSource
from txdag.topology.topology import TransactionalTopology
from txdag.txid.coordinator import Coordinator
from txdag.zk.client import close_zk, connect_zk
from txdag.zk.store import TransactionStore

ROOT = Path(__file__).resolve().parents[3]


def tweets_topology(name: str) -> TransactionalTopology:
    return TransactionalTopology(
        name, source=TweetsSource(prefix=f"{name}:", max_transaction_size=40), job="spark_jobs/tweets_analytics.py",
        states=[State("users", namespace=f"{name}:users"), State("hashtags", namespace=f"{name}:hashtags"),
                State("users_hashtags", namespace=f"{name}:users_hashtags", key_fields=2, separator=":")],
        marker_key=f"{name}:LAST", project_dir=str(ROOT),
    )


def local(t: TransactionalTopology, client: redis.Redis, zk, zk_root: str) -> LocalTopology:
    spout = t.source.build(SpoutContext(t.topology_id, {t.source.redis_conn_id: client}))
    coordinator = Coordinator(TransactionStore(zk, t.topology_id, root=zk_root), spout, max_active_transactions=2)
    states = {s.name: s.build(client) for s in t.states}
    return LocalTopology(coordinator, client, states, lambda recs: tweet_partials(r.value for r in recs),
                         marker_key=t.marker_key)


@pytest.fixture
def password() -> str:
    return f"pw-{uuid.uuid4().hex}"


def no_password_in(text: str, password: str) -> None:
    for secret in (password, *PASSWORDS):
        assert secret not in text


def test_a_restricted_user_runs_its_topology_and_nothing_else(redis_client, zk_hosts, zk_root, prefix, password,
                                                              caplog) -> None:
    mine, other = tweets_topology(f"{prefix}a"), tweets_topology(f"{prefix}b")
    tweets = sample_tweets(100, seed=5)
    append_tweets(redis_client, tweets, prefix=f"{mine.topology_id}:")  # the producer (admin) seeds the source
    caplog.set_level(logging.DEBUG)  # kazoo logs its Auth packet at DEBUG
    caplog.set_level(logging.DEBUG, logger="kazoo")  # a txdag command run earlier in this process set it to ERROR
    with redis_user(redis_client, f"{prefix}-user", [mine], password) as client:
        zk = connect_zk(zk_hosts, auth=ZK_AUTH)
        try:
            outcomes = local(mine, client, zk, zk_root).drain()
            assert [type(o) for o in outcomes] == [Committed] * 3
            truth = tweet_partials(tweets)["hashtags"]
            got = {k.decode(): int(v) for k, v in redis_client.hgetall(f"{mine.topology_id}:hashtags").items()}
            assert got == {k[0]: n for k, n in truth.items()}

            with pytest.raises(AccessDenied) as err:  # another topology's staging
                local(other, client, zk, zk_root).staging.read(outcomes[0].tx)
            with pytest.raises(AccessDenied) as err_state:  # another topology's state
                local(other, client, zk, zk_root).states["users"].multi_get([("@x",)])
            with pytest.raises(AccessDenied) as err_seed:  # its own source is read-only
                append_tweets(client, ["one more"], prefix=f"{mine.topology_id}:")
            with pytest.raises(AccessDenied) as err_cmd:  # a command txdag never sends
                with redis_errors(client, "flushing", topology=mine.topology_id):
                    client.flushall()
        finally:
            close_zk(zk)
    text = str(err.value)
    for part in (f"topology '{other.topology_id}'", f"'{prefix}-user'", f"txdag:stage:{{{other.topology_id}}}:1:1",
                 f"txdag acl redis {other.topology_id} --user {prefix}-user"):
        assert part in text
    assert f"'{other.topology_id}:users'" in str(err_state.value)
    assert f"'{mine.topology_id}:NEXT_WRITE'" in str(err_seed.value)
    assert "flushall" in str(err_cmd.value)
    for e in (err, err_state, err_seed, err_cmd):
        no_password_in(str(e.value), password)
    messages = [r.getMessage() for r in caplog.records]
    assert any("Auth(" in m and "***" in m for m in messages)  # the filter did mask kazoo's Auth record
    no_password_in("\n".join(messages), password)


def test_redis_grants_every_key_of_the_layouts_and_none_of_another_topology(redis_client, prefix, password) -> None:
    """Redis itself (ACL DRYRUN) on the keys the layout modules build: the topology's own ones read-write, its
    source's read-only, another topology's refused."""
    mine, other, user = every_kind_of_key(f"{prefix}a"), every_kind_of_key(f"{prefix}b"), f"{prefix}-user"

    def allowed(*command: str) -> bool:
        return redis_client.execute_command("ACL", "DRYRUN", user, *command) == b"OK"

    with redis_user(redis_client, user, [mine], password):
        assert [k for k in written_keys(mine) if not allowed("SET", k, "1")] == []
        assert [k for k in source_keys(mine) if not allowed("GET", k) or allowed("SET", k, "1")] == []
        assert [k for k in written_keys(other) + source_keys(other) if allowed("GET", k)] == []
        assert not allowed("SET", f"{prefix}a:LAST1", "1")  # the marker's glob characters are escaped


def test_stream_partitions_read_only_plan_with_eval_ro_and_refuse_unknown_streams(redis_client, zk_hosts, zk_root,
                                                                                   prefix, password) -> None:
    streams = [f"{prefix}:s0", f"{prefix}:s1"]
    t = TransactionalTopology(prefix, source=StreamsSource(streams, max_per_partition=30),
                              job="spark_jobs/word_count.py", states=[State("words", kind="opaque",
                                                                            namespace=f"{prefix}:words")],
                              project_dir=str(ROOT))
    for i, stream in enumerate(streams):
        append_entries(StreamPartition(stream, redis_client, stream), sample_sentences(20, seed=i))
    granted = TransactionalTopology(prefix, source=StreamsSource(streams[:1]), job="spark_jobs/word_count.py",
                                    states=t.states, project_dir=str(ROOT))
    with redis_user(redis_client, f"{prefix}-user", [t], password) as client:
        spout = t.source.build(SpoutContext(prefix, {"redis_default": client}))
        meta = spout.initialize_transaction(1, None)
        assert spout.batch_size(meta) == 40
        assert len(spout.emit_batch(TransactionAttempt(1, 1), meta).records) == 40
    with redis_user(redis_client, f"{prefix}-user", [granted], password) as client:
        with pytest.raises(AccessDenied) as err:
            t.source.build(SpoutContext(prefix, {"redis_default": client})).is_ready(None)
    assert f"partition(s) '{streams[1]}'" in str(err.value) and "txdag acl redis" in str(err.value)
    no_password_in(str(err.value), password)


def test_a_wrong_redis_password_names_the_user_not_the_password(redis_client, prefix, password) -> None:
    t = tweets_topology(prefix)
    with redis_user(redis_client, f"{prefix}-user", [t], password):
        kwargs = redis_client.connection_pool.connection_kwargs
        wrong = redis.Redis(host=kwargs["host"], port=kwargs["port"], username=f"{prefix}-user",
                            password=password + "x")
        with pytest.raises(AccessDenied) as err:
            Staging(wrong, t.topology_id).claim(TransactionAttempt(1, 1), "me")
        wrong.close()
    assert f"'{prefix}-user'" in str(err.value) and "check the login and password" in str(err.value)
    no_password_in(str(err.value), password + "x")


def test_a_wrong_zookeeper_digest_is_a_clear_noauth_error(zk_hosts, zk_root, prefix, caplog) -> None:
    owner = connect_zk(zk_hosts, auth=ZK_AUTH)
    TransactionStore(owner, prefix, root=zk_root).ensure()
    caplog.set_level(logging.DEBUG)
    intruder = connect_zk(zk_hosts, auth=(ZK_AUTH[0], "not-the-zk-password"))
    try:
        with pytest.raises(ConfigError, match="NoAuth.*same user and password") as err:
            TransactionStore(intruder, prefix, root=zk_root).read_topology()
    finally:
        close_zk(intruder)
        close_zk(owner)
    assert prefix in str(err.value)
    for text in (str(err.value), *(r.getMessage() for r in caplog.records)):
        assert "not-the-zk-password" not in text and ZK_AUTH[1] not in text

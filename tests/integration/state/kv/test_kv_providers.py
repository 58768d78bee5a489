"""What is particular to each KeyValueState provider: the cluster is real (namespaces spread over its masters,
one namespace in one slot), a server that is down, a wrong password, and a topology's restricted Redis user."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import redis
from access import PASSWORDS, redis_config_of, redis_user
from support.servers import free_port

from txdag.attempt import TransactionAttempt as Tx
from txdag.cli.acl import setuser_args
from txdag.errors import AccessDenied, ServiceUnavailable
from txdag.state import KeyValueState
from txdag.state.kv import (
    KVNamespace,
    commit,
    kv_namespace,
    load_state,
    make_client,
    migrate,
    parse_provider_config,
    prepare,
    seal_stage,
    stage_writes,
)
from txdag.topology.definition import State, TweetsSource
from txdag.topology.topology import TransactionalTopology

ROOT = Path(__file__).resolve().parents[4]


def test_cluster_spreads_namespaces_over_its_masters_and_keeps_each_in_one_slot(redis_cluster, prefix):
    client = load_state("redis_cluster", redis_cluster.config(), f"{prefix}:probe").client
    owners = {}
    for i in range(12):
        spec = KVNamespace(f"{prefix}:step{i}")
        stage_writes(client, spec, Tx(1, 1), [("k", i), ("j", i)])
        seal_stage(client, spec, Tx(1, 1), 2)
        prepare(client, spec, Tx(1, 1))
        stage_writes(client, spec, Tx(2, 1), [("k", -i)])  # a staged attempt left beside the committed values
        commit(client, spec, 1)
        keys = [spec.committed, spec.meta, spec.stages, spec.stage(Tx(2, 1))]
        slots = {client.keyslot(k) for k in keys}
        assert len(slots) == 1, f"{spec.namespace} spans slots {slots}"
        slot = slots.pop()
        # ask the servers themselves: the master owning the slot holds the keys, the other masters none of them
        holders = [port for port in redis_cluster.ports
                   if redis_cluster.node_client(port).execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) >= len(keys)]
        assert len(holders) == 1, f"slot {slot} of {spec.namespace} held by {holders}"
        assert redis_cluster.node_client(holders[0]).hget(spec.committed, b'"k"') == str(i).encode()
        owners[spec.namespace] = holders[0]
    assert len(set(owners.values())) >= 2, f"every namespace landed on one master: {owners}"
    client.close()


def test_timeout_and_max_redirections_reach_the_clients(redis_cluster, redis_url):
    """timeout (ms) -> both socket timeouts (s); max_redirections -> how many MOVED replies one command follows."""
    config = parse_provider_config("redis_cluster", redis_cluster.config(timeout=1500, max_redirections=0))
    client = make_client(config)
    kwargs = client.nodes_manager.connection_kwargs
    assert kwargs["socket_timeout"] == kwargs["socket_connect_timeout"] == 1.5
    key = "txdag:kv:{redirect-probe}"
    client.set(key, "1")

    def misroute(c) -> None:  # the client's slot map points the key at a master that does not own it
        slot = c.keyslot(key)
        owner = c.nodes_manager.slots_cache[slot][0]
        c.nodes_manager.slots_cache[slot] = [n for n in c.get_primaries() if n.name != owner.name][:1]

    misroute(client)
    with pytest.raises(redis.exceptions.ClusterError, match="TTL exhausted"):
        client.get(key)  # MOVED once, no redirection allowed
    one = make_client(parse_provider_config("redis_cluster", redis_cluster.config(max_redirections=1)))
    misroute(one)
    assert one.get(key) == b"1"  # MOVED once, followed
    one.delete(key)
    single = make_client(parse_provider_config("redis", {**redis_config_of(redis_url), "timeout": 2500, "database": 3}))
    kwargs = single.connection_pool.connection_kwargs
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"], kwargs["db"]) == (2.5, 2.5, 3)


def test_redis_down_names_the_address_and_how_to_start_it():
    port = free_port()
    with pytest.raises(ServiceUnavailable, match=rf"Redis at 127.0.0.1:{port}/0 is unreachable .*services.sh start"):
        load_state("redis", {"host": "127.0.0.1", "port": port, "timeout": 300}, "t:s")


def test_cluster_down_names_its_nodes_and_how_to_start_them():
    ports = [free_port(), free_port()]
    with pytest.raises(ServiceUnavailable, match=rf"Redis Cluster at 127.0.0.1:{ports[0]},127.0.0.1:{ports[1]} is "
                                                 r"unreachable .*start its nodes"):
        load_state("redis_cluster", {"nodes": [f"127.0.0.1:{p}" for p in ports], "timeout": 300}, "t:s")


def test_wrong_password_is_access_denied_without_the_password(kv_provider):
    wrong = f"wrong-{uuid.uuid4().hex}"
    with pytest.raises(AccessDenied) as caught:
        load_state(kv_provider.name, {**kv_provider.config, "password": wrong}, "t:s")
    text = str(caught.value)
    assert "txdag-admin" in text and wrong not in text and all(p not in text for p in PASSWORDS)
    assert kv_provider.config["password"] not in text


def test_a_topologys_user_runs_its_key_value_states_and_nothing_else(redis_client, prefix):
    """txdag.cli.acl grants a topology's user txdag:kv:{<topology>:*: the whole protocol works through it."""
    topology = TransactionalTopology(prefix, source=TweetsSource(prefix=f"{prefix}src:"), states=[State("users")],
                                     job="spark_jobs/tweets_analytics.py", project_dir=str(ROOT))
    password = f"pw-{uuid.uuid4().hex}"
    with redis_user(redis_client, f"{prefix}-user", [topology], password) as client:
        spec = KVNamespace(kv_namespace(prefix, "counter"), value_serializer="base64")
        stage_writes(client, spec, Tx(1, 1), [("a", 1), ("b", 2)])
        seal_stage(client, spec, Tx(1, 1), 2)
        prepare(client, spec, Tx(1, 1))
        assert commit(client, spec, 1).keys == 2
        kwargs = client.connection_pool.connection_kwargs
        state = load_state("redis", {"host": kwargs["host"], "port": kwargs["port"], "username": f"{prefix}-user",
                                     "password": password, "value_serializer": "base64"}, spec.namespace)
        assert dict(state.items()) == {"a": 1, "b": 2}
        assert migrate(client, spec.namespace, "json", "json", chunk=1).outcome == "migrated"  # COPY, RENAME...
        assert dict(KeyValueState(client, spec.namespace).items()) == {"a": 1, "b": 2}
        other = KVNamespace(kv_namespace(f"{prefix}x", "counter"))
        with pytest.raises(AccessDenied, match=rf"refused user '{prefix}-user'"):
            stage_writes(client, other, Tx(1, 1), [("a", 1)])
        with pytest.raises(AccessDenied):
            load_state("redis", {"host": kwargs["host"], "port": kwargs["port"], "username": f"{prefix}-user",
                                 "password": password}, other.namespace)


def test_a_topologys_user_on_the_cluster_runs_its_key_value_states(redis_cluster, prefix):
    """The same ACL line on every node: the cluster client's discovery (CLUSTER SLOTS, COMMAND) is granted too;
    a user without it gets an AccessDenied naming the missing command, not 'unreachable'."""
    topology = TransactionalTopology(prefix, source=TweetsSource(prefix=f"{prefix}src:"), states=[State("users")],
                                     job="spark_jobs/tweets_analytics.py", project_dir=str(ROOT))
    user, password = f"{prefix}-user", f"pw-{uuid.uuid4().hex}"
    config = {"nodes": redis_cluster.nodes, "username": user, "password": password}
    admins = [redis_cluster.node_client(port) for port in redis_cluster.ports]
    try:
        for admin in admins:
            admin.execute_command("ACL", "SETUSER", *setuser_args(user, [topology], password=password))
        state = load_state("redis_cluster", config, kv_namespace(prefix, "counter"))
        state.put("a", 1)
        state.prepare_commit(1)
        assert state.commit(1).outcome == "committed" and dict(state.items()) == {"a": 1}
        with pytest.raises(AccessDenied, match=rf"refused user '{user}'"):
            load_state("redis_cluster", config, kv_namespace(f"{prefix}x", "counter"))
        for admin in admins:
            admin.execute_command("ACL", "SETUSER", user, "-command")
        with pytest.raises(AccessDenied, match="no permissions to run the 'command' command.*on every node") as e:
            load_state("redis_cluster", config, kv_namespace(prefix, "counter"))
        assert password not in str(e.value)
    finally:
        for admin in admins:
            admin.execute_command("ACL", "DELUSER", user)
            admin.close()

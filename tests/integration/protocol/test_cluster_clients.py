"""Clients of a real Redis Cluster from what a user configures: a URL with ``?cluster=true`` (what an Airflow Redis
connection with extra ``{"cluster": true}`` becomes), and the portable spec a Spark executor opens; a cluster that
does not answer or refuses the login gets an error naming it and what to do."""

import pytest

from txdag.errors import AccessDenied, ConfigError, ServiceUnavailable
from txdag.redisio import client_from_url, describe, from_portable, is_cluster, portable
from txdag.spark.env import redis_clients_from_env


def url_of(cluster, *, password=None, nodes=True):
    first, *others = cluster.nodes
    query = "?cluster=true" + (f"&nodes={','.join(others)}" if nodes else "")
    return f"redis://{cluster.username}:{password or cluster.password}@{first}/0{query}"


def test_a_cluster_url_gives_a_cluster_client_that_reaches_every_slot(redis_cluster, prefix):
    client = client_from_url(url_of(redis_cluster), socket_timeout=5)
    assert is_cluster(client) and describe(client).startswith("cluster 127.0.0.1:")
    keys = [f"{prefix}:k{i}" for i in range(30)]  # spread over the three masters' slots
    for key in keys:
        client.set(key, key)
    assert len({client.nodes_manager.get_node_from_slot(client.keyslot(k)).name for k in keys}) == 3
    copy = from_portable(portable(client))  # what a Spark executor opens
    assert is_cluster(copy) and [copy.get(k) for k in keys] == [k.encode() for k in keys]
    assert "password" not in describe(copy) and redis_cluster.password not in describe(copy)
    client.delete(*keys)


def test_the_spark_job_reads_a_cluster_url_from_its_environment(redis_cluster):
    env = {"TXDAG_REDIS_URLS": f'{{"states": "{url_of(redis_cluster, nodes=False)}"}}'}
    client = redis_clients_from_env(["states"], env)["states"]
    assert is_cluster(client) and client.ping()


def test_cluster_false_is_one_server(redis_url):
    client = client_from_url(f"{redis_url}?cluster=false")
    assert not is_cluster(client) and client.ping()


def test_a_wrong_password_and_a_cluster_that_is_down_say_what_to_do(redis_cluster):
    refused = r"Redis Cluster at 127\.0\.0\.1:\d+.* refused user 'txdag-admin': .*check the login and password"
    with pytest.raises(AccessDenied, match=refused + " of the Airflow Redis connection") as denied:
        client_from_url(url_of(redis_cluster, password="wrong"))
    assert redis_cluster.password not in str(denied.value)
    with pytest.raises(ServiceUnavailable, match=r"Redis Cluster at 127\.0\.0\.1:1,127\.0\.0\.1:2 is unreachable "
                                                 r".*start (its|that Redis Cluster's) nodes"):
        client_from_url("redis://127.0.0.1:1/0?cluster=true&nodes=127.0.0.1:2", socket_connect_timeout=0.5)
    with pytest.raises(ConfigError, match=r"node 'nohost' is malformed \(no port\): a node is host:port, port 1-65535"):
        client_from_url("redis://127.0.0.1:1/0?cluster=true&nodes=nohost")


def test_a_cluster_flag_on_one_server_and_a_cluster_node_without_it_say_which_to_change(redis_cluster, redis_url):
    from txdag.errors import ConfigError
    from txdag.redisio import redis_errors

    with pytest.raises(ConfigError, match=r"is a single server, not a Redis Cluster: remove \"cluster\": true"):
        client_from_url(f"{redis_url}?cluster=true")
    node = client_from_url(url_of(redis_cluster).split("?")[0])  # one node, as a plain server
    with pytest.raises(ConfigError, match=r"is a node of a Redis Cluster .*add \"cluster\": true"):
        with redis_errors(node, "reading"):
            for i in range(20):  # some keys' slots are on another master: MOVED
                node.get(f"k{i}")


def test_a_source_on_the_cluster_says_to_keep_it_on_a_single_redis(redis_cluster, prefix):
    from txdag.errors import ConfigError
    from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets

    client = client_from_url(url_of(redis_cluster))
    try:
        # a script may touch another slot of its own node: 30 ids put some key on another node for sure
        with pytest.raises(ConfigError, match=r"appending tweets .* takes keys of several hash slots .*'\{tweets\}:'"):
            append_tweets(client, [f"@a #{i}" for i in range(30)], prefix=f"{prefix}:")
        with pytest.raises(ConfigError, match=r"reads a single Redis, not a Redis Cluster: keep the source on a Redis "
                                              r"server of its own .*the states may stay on the cluster"):
            TweetsTransactionalSpout(client, prefix=f"{prefix}:", topology="t")
    finally:
        client.close()

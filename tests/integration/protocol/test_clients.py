"""txdag.protocol.clients against real Redis and ZooKeeper: one client per connection id, built on first use from
the settings it resolves to; a topology's TransactionStore under its connection's root, and the topologies under
that root listed without naming one; a lost ZooKeeper reported within the session timeout, not waited on."""

from __future__ import annotations

import pytest
from access import ZK_AUTH
from support.servers import Proxy

from txdag.errors import ServiceUnavailable
from txdag.protocol.clients import Clients, RedisSettings, ZooKeeperSettings
from txdag.spouts.tweets import TweetsTransactionalSpout
from txdag.topology.definition import State, TweetsSource
from txdag.topology.topology import TransactionalTopology


@pytest.fixture
def resolved(redis_url, zk_hosts, zk_root):
    """Resolvers that record which connection ids were looked up, in order."""
    asked: list[tuple[str, str]] = []

    def redis_of(conn_id: str) -> RedisSettings:
        asked.append(("redis", conn_id))
        return RedisSettings(redis_url, timeout=5)

    def zookeeper_of(conn_id: str) -> ZooKeeperSettings:
        asked.append(("zookeeper", conn_id))
        return ZooKeeperSettings(zk_hosts, ZK_AUTH, root=zk_root, timeout=5)

    return Clients(redis=redis_of, zookeeper=zookeeper_of), asked


def test_one_client_per_connection_id_built_on_first_use(resolved) -> None:
    clients, asked = resolved
    with clients:
        assert asked == []
        first = clients.redis("a")
        assert clients.redis("a") is first and clients.redis("b") is not first and first.ping()
        zk = clients.zookeeper("zk")
        assert clients.zookeeper("zk") is zk and zk.connected
        assert asked == [("redis", "a"), ("redis", "b"), ("zookeeper", "zk")]
    assert not zk.connected  # closed with the block
    assert clients.zookeeper("zk") is not zk and clients.zookeeper("zk").connected  # a later use connects again
    assert asked == [("redis", "a"), ("redis", "b"), ("zookeeper", "zk")]  # settings are looked up once
    clients.close()


def test_stores_sit_under_the_connections_root_and_are_listed_from_it(resolved, zk_root, prefix) -> None:
    clients, _ = resolved
    with clients:
        assert clients.topology_ids("zk") == []  # no root yet: no topology ran
        store = clients.store(prefix, "zk")
        assert store.path == f"{zk_root}/{prefix}" and store.client is clients.zookeeper("zk")
        store.ensure()
        clients.store(f"{prefix}_2", "zk").ensure()
        assert clients.topology_ids("zk") == [prefix, f"{prefix}_2"]


def test_a_topologys_spout_reads_through_the_client_of_its_connection(resolved, prefix, tmp_path) -> None:
    clients, asked = resolved
    (tmp_path / "job.py").write_text("")
    topology = TransactionalTopology(prefix, source=TweetsSource(prefix=f"{prefix}:", redis_conn_id="source"),
                                     job=str(tmp_path / "job.py"), states=[State("users", namespace=f"{prefix}:u")])
    with clients:
        spout = clients.spout(topology)
        assert isinstance(spout, TweetsTransactionalSpout) and spout.client is clients.redis("source")
        assert asked == [("redis", "source")]


def test_a_lost_zookeeper_is_reported_within_the_session_timeout(zk_hosts, zk_root) -> None:
    proxy = Proxy(int(zk_hosts.split(",")[0].rsplit(":", 1)[1]))
    settings = ZooKeeperSettings(proxy.hosts, ZK_AUTH, root=zk_root, timeout=2)
    try:
        with Clients(redis=lambda c: RedisSettings("redis://unused"), zookeeper=lambda c: settings) as clients:
            assert clients.topology_ids("zk") == []
            proxy.cut()  # at once: the next request meets the lost connection, or waits for kazoo to reconnect
            with pytest.raises(ServiceUnavailable, match=rf"ZooKeeper at {proxy.hosts} has been unreachable for 2s "
                                                          rf"\(listing the topologies under {zk_root}\); .*start"):
                clients.topology_ids("zk")
    finally:
        proxy.close()

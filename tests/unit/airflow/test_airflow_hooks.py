"""Connection objects -> ZooKeeper settings and Redis URLs (pure functions shared by the hooks and the CLI), from
which txdag.protocol.clients builds the clients."""

from __future__ import annotations

from types import SimpleNamespace

from txdag.airflow.hooks import redis_url_of, zookeeper_settings
from txdag.protocol.clients import ZooKeeperSettings


def conn(host, port=None, login=None, password=None, **extra):
    return SimpleNamespace(host=host, port=port, login=login, password=password, extra_dejson=extra)


def test_zookeeper_settings_add_the_port_to_hosts_without_one() -> None:
    settings = zookeeper_settings(conn("zk1,zk2:2182", 2181, "ops", "s3cret", root="/apps/txdag", timeout=4))
    assert settings == ZooKeeperSettings("zk1:2181,zk2:2182", ("ops", "s3cret"), root="/apps/txdag", timeout=4.0)
    assert "s3cret" not in repr(settings)
    assert zookeeper_settings(conn("127.0.0.1", 2191)) == ZooKeeperSettings("127.0.0.1:2191", root="/txdag",
                                                                            timeout=10.0)


def test_redis_url_quotes_credentials_and_keeps_db_and_ssl() -> None:
    assert redis_url_of(conn("r", 6391, db=3)) == "redis://r:6391/3"
    assert redis_url_of(conn("r", None, "u", "p@ss:/", ssl=True)) == "rediss://u:p%40ss%3A%2F@r:6379/0"
    assert redis_url_of(conn(None, None, password="None")) == "redis://127.0.0.1:6379/0"

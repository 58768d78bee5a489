"""Connection objects -> ZooKeeper settings and Redis URLs (pure functions shared by the hooks and the CLI), from
which txdag.protocol.clients builds the clients."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from txdag.airflow.hooks import redis_url_of, zookeeper_settings
from txdag.errors import ConfigError
from txdag.protocol.clients import ZooKeeperSettings


def conn(host, port=None, login=None, password=None, **extra):
    return SimpleNamespace(conn_id="redis_default", host=host, port=port, login=login, password=password,
                           extra_dejson=extra)


def test_zookeeper_settings_add_the_port_to_hosts_without_one() -> None:
    settings = zookeeper_settings(conn("zk1,zk2:2182", 2181, "ops", "s3cret", root="/apps/txdag", timeout=4))
    assert settings == ZooKeeperSettings("zk1:2181,zk2:2182", ("ops", "s3cret"), root="/apps/txdag", timeout=4.0)
    assert "s3cret" not in repr(settings)
    assert zookeeper_settings(conn("127.0.0.1", 2191)) == ZooKeeperSettings("127.0.0.1:2191", root="/txdag",
                                                                            timeout=10.0)
    # the connection form's fields (the provider's conn-fields) left empty are saved as null: the defaults
    assert zookeeper_settings(conn("127.0.0.1", 2191, root=None, timeout=None)) == zookeeper_settings(
        conn("127.0.0.1", 2191))
    assert zookeeper_settings(conn("zk", 2181, timeout="2.5")).timeout == 2.5


@pytest.mark.parametrize("timeout", [0, -1, "0", "soon", [3], True, "nan", "inf"])
def test_a_zookeeper_timeout_that_is_not_a_positive_number_is_refused_by_name(timeout) -> None:
    with pytest.raises(ConfigError, match=r"ZooKeeper connection 'redis_default': its timeout .* is not a positive"):
        zookeeper_settings(conn("zk", 2181, timeout=timeout))


def test_redis_url_quotes_credentials_and_keeps_db_and_ssl() -> None:
    assert redis_url_of(conn("r", 6391, db=3)) == "redis://r:6391/3"
    assert redis_url_of(conn("r", None, "u", "p@ss:/", ssl=True)) == "rediss://u:p%40ss%3A%2F@r:6379/0"
    assert redis_url_of(conn(None, None, password="None")) == "redis://127.0.0.1:6379/0"


def test_the_redis_providers_tls_extras_go_into_the_url_with_ssl_only() -> None:
    tls = {"ssl_ca_certs": "/etc/redis tls/ca.pem", "ssl_certfile": "/etc/c.pem", "ssl_keyfile": "/etc/c.key",
           "ssl_cert_reqs": "Required", "ssl_check_hostname": True}
    assert redis_url_of(conn("r", 6380, "u", "pw", ssl=True, db=1, **tls)) == (
        "rediss://u:pw@r:6380/1?ssl_cert_reqs=required&ssl_ca_certs=/etc/redis+tls/ca.pem&ssl_certfile=/etc/c.pem"
        "&ssl_keyfile=/etc/c.key&ssl_check_hostname=true")
    # the provider's form saves its defaults whether or not ssl is on: without it they mean nothing, as there
    assert redis_url_of(conn("r", 6380, ssl=False, ssl_cert_reqs="required", ssl_check_hostname=False)) == \
        "redis://r:6380/0"
    assert redis_url_of(conn("r", 6380, ssl="true", ssl_check_hostname="false", ssl_ca_certs="")) == \
        "rediss://r:6380/0?ssl_check_hostname=false"
    assert redis_url_of(conn("n1", 7001, cluster=True, ssl=True, ssl_cert_reqs="none")) == \
        "rediss://n1:7001/0?ssl_cert_reqs=none&cluster=true"
    # a null, as the provider hands it to redis-py: no verification, no hostname check; "yes" is true there too
    assert redis_url_of(conn("r", 6380, ssl="yes", ssl_cert_reqs=None, ssl_check_hostname=None)) == \
        "rediss://r:6380/0?ssl_cert_reqs=none&ssl_check_hostname=false"
    with pytest.raises(ConfigError, match=r"^Redis connection 'redis_default': ssl_cert_reqs is 'require'; use one of "
                                          r"required, optional, none \(the Redis provider's choices\)$"):
        redis_url_of(conn("r", 6380, ssl=True, ssl_cert_reqs="require"))


def test_a_redis_cluster_connection_lists_its_other_nodes_in_the_url() -> None:
    assert redis_url_of(conn("n1,n2:7002, n3", 7001, "u", "pw", cluster=True)) == (
        "redis://u:pw@n1:7001/0?cluster=true&nodes=n2:7002,n3:7001")
    assert redis_url_of(conn("n1:7001", None, cluster="true")) == "redis://n1:7001/0?cluster=true"


def test_several_hosts_without_cluster_and_a_cluster_database_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"lists several hosts \(a,b\) and is no cluster: .* \"cluster\": true"):
        redis_url_of(conn("a,b", 6379))
    with pytest.raises(ConfigError, match="database 0 only: remove \"db\""):
        redis_url_of(conn("a", 7001, cluster=True, db=2))


@pytest.mark.parametrize("host,port,bad,problem", [
    ("h1:7000,h2:abc", None, "h2:abc", "port 'abc' is not a number"),
    ("h1:", None, "h1:", "no port"),
    ("h1:99999,h2:7000", None, "h1:99999", "port 99999 is out of range"),
    ("h1,h2:7001", 70000, "h1:70000", "port 70000 is out of range"),  # a node without a port takes the connection's
])
def test_a_malformed_cluster_node_names_the_connection_and_what_to_fix(host, port, bad, problem) -> None:
    with pytest.raises(ConfigError) as refused:
        redis_url_of(conn(host, port, "u", "s3cret", cluster=True))
    message = str(refused.value)
    listed = "" if host == bad else f" (of {host!r})"
    assert message.startswith(f"Redis connection 'redis_default': Redis Cluster node {bad!r}{listed} is malformed "
                              f"({problem}): a node is host:port, port 1-65535; fix the connection's Host"), message
    assert "s3cret" not in message


def test_a_kafka_connection_is_its_extra_as_the_kafka_provider_reads_it_and_its_secrets_are_masked() -> None:
    from txdag.airflow.hooks import kafka_config_of
    from txdag.masking import mask

    extra = {"bootstrap.servers": "k1:9093,k2:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
             "sasl.password": "kafka-s3cret-77", "sasl.oauthbearer.client.secret": "oauth-s3cret-78",
             "sasl.jaas.config": 'PlainLoginModule required username="u" password="jaas-s3cret-79";'}
    assert kafka_config_of(conn(None, **extra)) == extra
    assert mask("auth kafka-s3cret-77 failed") == "auth *** failed"
    assert mask("oauth-s3cret-78 and PlainLoginModule required username=\"u\" password=\"jaas-s3cret-79\";") \
        == "*** and ***"
    assert kafka_config_of(conn("k1,k2:9095", 9094)) == {"bootstrap.servers": "k1:9094,k2:9095"}
    with pytest.raises(ConfigError, match=r"Kafka connection 'redis_default' names no broker: give its extra "
                                          r'\{"bootstrap.servers": "host:9092"\}'):
        kafka_config_of(conn(None))


@pytest.mark.parametrize(("connection", "said"), [
    (conn("r", 99999), "Redis server 'r:99999' is malformed (port 99999 is out of range): a node is host:port, "
                       "port 1-65535; fix the connection's Port"),
    (conn("r:12x"), "Redis server 'r:12x' is malformed (port '12x' is not a number)"),
    (conn("r", 6379, db="abc"), "its extra's \"db\" is 'abc', not a database number"),
    (conn("r", 6379, db=-1), "its extra's \"db\" is -1, not a database number"),
])
def test_a_redis_connection_mistyped_is_named_not_a_crash(connection, said) -> None:
    """A port out of range or a database that is no number ended txdag commands as 'a bug in txdag' (ValueError)."""
    with pytest.raises(ConfigError, match=re.escape(f"Redis connection 'redis_default': {said}")):
        redis_url_of(connection)


def test_an_ipv6_host_takes_the_connections_port_unless_it_holds_one() -> None:
    assert redis_url_of(conn("[::1]", 6391)) == "redis://[::1]:6391/0"
    assert redis_url_of(conn("[::1]:7000", 6391)) == "redis://[::1]:7000/0"

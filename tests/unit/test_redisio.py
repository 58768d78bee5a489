"""txdag.redisio's pure parts: Redis Cluster startup nodes parsed from a URL, and what ``portable`` keeps of a
cluster client. No server is contacted: a malformed node is refused before any connection, and the cluster
client is a stand-in holding only what ``portable`` reads."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from txdag.errors import ConfigError
from txdag.redisio import (
    CLUSTER_PORTABLE_KEYS,
    NODE_FORM,
    PORTABLE_KEYS,
    TLS_KEYS,
    RedisAddress,
    client_from_url,
    node_address,
    portable,
)


def test_a_node_is_host_and_port() -> None:
    assert node_address(" h1:7000 ") == ("h1", 7000)
    assert node_address("10.0.0.5:1") == ("10.0.0.5", 1)
    assert node_address("h1:65535", "h0:7000,h1:65535") == ("h1", 65535)


@pytest.mark.parametrize("node,problem", [
    ("h1:", "no port"),
    ("nohost", "no port"),
    (":7000", "no host"),
    ("h2:abc", "port 'abc' is not a number"),
    ("h1:99999", "port 99999 is out of range"),
    ("h1:0", "port 0 is out of range"),
])
def test_a_malformed_node_is_a_config_error_naming_it_and_the_valid_form(node: str, problem: str) -> None:
    with pytest.raises(ConfigError) as refused:
        node_address(node)
    message = str(refused.value)
    assert f"Redis Cluster node {node!r} is malformed ({problem}): a node is {NODE_FORM}" in message
    assert NODE_FORM == "host:port, port 1-65535"


def test_a_malformed_node_of_a_url_names_the_whole_nodes_option_before_connecting() -> None:
    url = "redis://u:s3cret@h1:7000/0?cluster=true&nodes=h2:7001,h3:abc"
    with pytest.raises(ConfigError, match=r"^Redis Cluster node 'h3:abc' \(of 'h2:7001,h3:abc'\) is malformed "
                                          r"\(port 'abc' is not a number\): a node is host:port, port 1-65535; "
                                          r"fix the nodes option of the Redis URL") as refused:
        client_from_url(url)
    assert "s3cret" not in str(refused.value)


def test_a_cluster_client_is_portable_with_its_login_timeouts_and_tls_only() -> None:
    assert CLUSTER_PORTABLE_KEYS == ("username", "password", "socket_timeout", "socket_connect_timeout", *TLS_KEYS)
    assert set(CLUSTER_PORTABLE_KEYS) < set(PORTABLE_KEYS)
    kwargs = {"host": "h1", "port": 7000, "db": 0, "path": "/tmp/r.sock", "username": "txdag", "password": "pw",
              "socket_timeout": 5.0, "socket_connect_timeout": None, "retry_on_timeout": True}
    client = SimpleNamespace(nodes_manager=SimpleNamespace(connection_kwargs=kwargs,
                                                           startup_nodes={"h2:7001": None, "h1:7000": None}))
    assert portable(client) == {"username": "txdag", "password": "pw", "socket_timeout": 5.0,  # type: ignore[arg-type]
                                "cluster_nodes": ["h1:7000", "h2:7001"]}
    tls = {"ssl": True, "ssl_ca_certs": "/etc/ca.pem", "ssl_certfile": "/etc/c.pem", "ssl_keyfile": "/etc/c.key",
           "ssl_cert_reqs": "required", "ssl_check_hostname": False, "ssl_min_version": None}
    client.nodes_manager.connection_kwargs = {**kwargs, **tls}
    assert portable(client) == {"username": "txdag", "password": "pw", "socket_timeout": 5.0,  # type: ignore[arg-type]
                                "cluster_nodes": ["h1:7000", "h2:7001"], "ssl": True, "ssl_ca_certs": "/etc/ca.pem",
                                "ssl_certfile": "/etc/c.pem", "ssl_keyfile": "/etc/c.key", "ssl_cert_reqs": "required",
                                "ssl_check_hostname": False}


def test_a_tls_client_is_portable_with_its_certificates() -> None:
    client = client_from_url("rediss://u:pw@h1:6380/2?ssl_ca_certs=/etc/ca.pem&ssl_cert_reqs=optional"
                             "&ssl_check_hostname=false&ssl_certfile=/etc/c.pem&ssl_keyfile=/etc/c.key")
    assert portable(client) == {"host": "h1", "port": 6380, "db": 2, "username": "u", "password": "pw",
                                "ssl": True, "ssl_ca_certs": "/etc/ca.pem", "ssl_cert_reqs": "optional",
                                "ssl_check_hostname": False, "ssl_certfile": "/etc/c.pem", "ssl_keyfile": "/etc/c.key"}
    assert "ssl_ca_certs" not in portable(client_from_url("redis://h1:6380/0"))


def test_a_redis_url_s_address_and_login_as_redis_py_reads_them() -> None:
    assert RedisAddress.of("rediss://app%40x:p%3Ass@r.example:6380/3") == RedisAddress(
        "r.example", 6380, 3, "app@x", "p:ss", True)
    assert RedisAddress.of("redis://r") == RedisAddress("r", 6379, 0, None, None, False)
    assert RedisAddress.of("redis://:only@127.0.0.1/") == RedisAddress("127.0.0.1", 6379, 0, None, "only", False)
    assert RedisAddress.of("redis:///2").host == "localhost"
    assert RedisAddress.of("redis://h:7/x").db == 0 and RedisAddress.of("redis://h/1?db=4").db == 4  # as redis-py
    assert "p:ss" not in repr(RedisAddress.of("redis://u:p%3Ass@h"))


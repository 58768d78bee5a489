"""Provider configs of KeyValueState (seed 002): txdag's shape, Storm's pasted shape, and every refusal."""

from __future__ import annotations

import json
import re

import pytest

from txdag.errors import ConfigError
from txdag.state.kv import parse_provider_config
from txdag.state.kv.config import STORM_PROVIDER

SECRET = "s3cr3t-Pa55"


def test_redis_txdag_shape_with_defaults_and_every_key():
    assert parse_provider_config("redis", {}).address == "localhost:6379"
    c = parse_provider_config("redis", {"host": "127.0.0.1", "port": 6401, "timeout": 1500, "database": 3,
                                        "username": "txdag", "password": SECRET, "value_serializer": "utf8"})
    assert (c.provider, c.host, c.port, c.timeout_ms, c.database, c.username, c.password) == (
        "redis", "127.0.0.1", 6401, 1500, 3, "txdag", SECRET)
    assert (c.key_serializer, c.value_serializer) == ("json", "utf8")


def test_cluster_txdag_shape():
    c = parse_provider_config("redis_cluster", {"nodes": ["127.0.0.1:7000", "h2:7001", "127.0.0.1:7000"],
                                                "timeout": 900, "max_redirections": 2})
    assert c.nodes == (("127.0.0.1", 7000), ("h2", 7001)) and c.timeout_ms == 900 and c.max_redirections == 2
    assert parse_provider_config("redis_cluster", {"nodes": ["a:1"]}).max_redirections == 5


def test_storm_pool_shape_as_pasted_from_the_seed():
    pasted = json.dumps({
        "keyClass": "java.lang.String", "valueClass": "java.lang.Long",
        "keySerializerClass": "org.apache.storm.state.DefaultStateSerializer", "valueSerializerClass": "base64",
        "jedisPoolConfig": {"host": "localhost", "port": 6379, "timeout": 2000, "database": 0, "password": "xyz"},
    })
    for provider in ("redis", STORM_PROVIDER):
        c = parse_provider_config(provider, pasted)
        assert (c.provider, c.host, c.port, c.timeout_ms, c.database, c.password) == (
            "redis", "localhost", 6379, 2000, 0, "xyz")
        assert (c.key_serializer, c.value_serializer) == ("json", "base64")


def test_storm_cluster_shape_as_pasted_from_the_seed():
    pasted = {"jedisClusterConfig": {"nodes": ["localhost:7379", "localhost:7380", "localhost:7381"],
                                     "timeout": 2000, "maxRedirections": 5}}
    for provider in ("redis_cluster", STORM_PROVIDER):
        c = parse_provider_config(provider, pasted)
        assert c.provider == "redis_cluster" and len(c.nodes) == 3 and c.max_redirections == 5


@pytest.mark.parametrize(("provider", "config", "message"), [
    ("memcached", {}, "unknown state provider 'memcached'"),
    ("redis", "{not json", "not valid JSON"),
    ("redis", "[1, 2]", "must be a JSON object"),
    ("redis", {"hots": "x"}, r"unknown config key\(s\) \['hots'\]"),
    ("redis", {"nodes": ["a:1"]}, "use provider 'redis_cluster'"),
    ("redis_cluster", {"nodes": ["a:1"], "database": 1}, "database 0 only"),
    ("redis", {"port": "6379"}, "'port' must be an integer 1..65535"),
    ("redis", {"port": 70000}, "'port' must be an integer 1..65535"),
    ("redis", {"port": True}, "'port' must be an integer"),
    ("redis", {"timeout": 0}, "'timeout' must be an integer >= 1 \\(milliseconds\\)"),
    ("redis", {"timeout": 2.5}, "'timeout' must be an integer"),
    ("redis", {"database": -1}, "'database' must be an integer >= 0"),
    ("redis", {"host": ""}, "'host' must be a host name"),
    ("redis", {"host": "redis://x"}, "'host' must be a host name"),
    ("redis", {"username": "a b"}, "'username' must be a non-empty string"),
    ("redis", {"password": 123}, "'password' must be a non-empty string"),
    ("redis", {"value_serializer": "kryo"}, "'value_serializer': unknown serializer 'kryo'"),
    ("redis_cluster", {}, "'nodes' must list the cluster's nodes"),
    ("redis_cluster", {"nodes": []}, "'nodes' must list"),
    ("redis_cluster", {"nodes": "a:1"}, "'nodes' must list"),
    ("redis_cluster", {"nodes": ["a"]}, "entry 'a' is not \"host:port\""),
    ("redis_cluster", {"nodes": ["a:x"]}, "entry 'a:x'"),
    ("redis_cluster", {"nodes": [7000]}, "entry 7000"),
    ("redis_cluster", {"nodes": ["a:1"], "max_redirections": -1}, "'max_redirections' must be an integer >= 0"),
    ("redis", {"jedisClusterConfig": {"nodes": ["a:1"]}}, "got jedisClusterConfig: use provider 'redis_cluster'"),
    ("redis_cluster", {"jedisPoolConfig": {}}, "got jedisPoolConfig: use provider 'redis'"),
    (STORM_PROVIDER, {"jedisPoolConfig": {}, "jedisClusterConfig": {}}, "not both"),
    (STORM_PROVIDER, {"host": "x"}, "takes Storm's config shape"),
    ("redis", {"jedisPoolConfig": {}, "port": 1}, r"mixes Storm's shape .* other keys \['port'\]"),
    ("redis", {"jedisPoolConfig": {"hostname": "x"}}, r"\['jedisPoolConfig.hostname'\]"),
    ("redis", {"jedisPoolConfig": {"port": "x"}}, "'jedisPoolConfig.port' must be an integer"),
    ("redis", {"jedisPoolConfig": []}, "'jedisPoolConfig' must be a JSON object"),
    ("redis_cluster", {"jedisClusterConfig": {"nodes": ["a:1"], "maxRedirections": "5"}},
     "'jedisClusterConfig.maxRedirections' must be an integer"),
    ("redis_cluster", {"jedisClusterConfig": {"nodes": ["a:1"], "max_redirections": 5}},
     r"\['jedisClusterConfig.max_redirections'\]"),
    ("redis", {"keySerializerClass": "com.example.KryoThing"}, "'keySerializerClass': unknown serializer"),
    ("redis", {"keyClass": 5}, "'keyClass' must be a class name"),
])
def test_every_mistake_says_what_to_change(provider, config, message):
    with pytest.raises(ConfigError, match=message):
        parse_provider_config(provider, config)


def test_the_password_never_shows():
    c = parse_provider_config("redis", {"password": SECRET, "username": "u"})
    assert SECRET not in repr(c) and SECRET not in str(c) and "***" in repr(c)
    with pytest.raises(ConfigError) as bad_type:
        parse_provider_config("redis", {"password": [SECRET]})
    assert SECRET not in str(bad_type.value)
    with pytest.raises(ConfigError) as other_error:
        parse_provider_config("redis", {"password": SECRET, "port": "x"})
    assert SECRET not in str(other_error.value)


def test_a_state_without_config_takes_the_topologys_redis_and_refuses_one_over_tls():
    from txdag.topology.definition import KeyValue
    from txdag.topology.kvstates import provider_config

    c = provider_config(KeyValue("seen"), "redis://u:pw@10.0.0.5:6380/4")
    assert (c.host, c.port, c.database, c.username) == ("10.0.0.5", 6380, 4, "u")
    with pytest.raises(ConfigError, match=r"^key-value state 'seen' would live in the topology's Redis, whose "
                                          r"connection uses TLS, which a key-value state's provider config cannot "
                                          r"carry yet"):
        provider_config(KeyValue("seen"), "rediss://10.0.0.5:6380/0?ssl_ca_certs=/etc/ca.pem")


@pytest.mark.parametrize(("provider", "said"), [
    ("Redis", "unknown state provider 'Redis': did you mean 'redis'?"),
    ("redis-cluster", "unknown state provider 'redis-cluster': did you mean 'redis_cluster'?"),
    ("nope", "unknown state provider 'nope': use one of redis, redis_cluster"),
])
def test_a_key_value_state_with_a_provider_misspelt_is_named_as_unknown(provider, said) -> None:
    """Without a config, a misspelt provider was told it 'needs a config (its nodes)'."""
    from txdag.topology.definition import KeyValue

    with pytest.raises(ConfigError, match=re.escape(f"key-value state 'k': {said}")):
        KeyValue("k", provider=provider)

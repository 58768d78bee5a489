"""Clients for the checked provider configs (``txdag.state.kv.config``), and seed 002's ``newState(namespace)``.

``redis``: a redis.Redis; ``timeout`` (ms) becomes both ``socket_connect_timeout`` and ``socket_timeout`` (s),
like Jedis's single timeout. ``redis_cluster``: a redis.cluster.RedisCluster over ``startup_nodes``, the same
two timeouts, and ``max_redirections`` (Jedis's MOVED/ASK redirections to follow) mapped to redis-py 8.1's
``RedisClusterRequestTTL`` (the number of tries of one command, each MOVED/ASK using one) as
``max_redirections + 1``; redis-py has no constructor argument for it, so it is set on the client. Cluster
pipelines (the staging writes) follow redirections by their own retry logic, not that TTL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster

from txdag.masking import register_secret
from txdag.redisio import connect_cluster
from txdag.state.kv.config import ProviderConfig, parse_provider_config
from txdag.state.kv.layout import KVNamespace
from txdag.state.kv.protocol import StateHooks
from txdag.state.kv.state import KeyValueState


def make_client(config: ProviderConfig) -> Any:
    """A redis.Redis or RedisCluster for ``config`` (a cluster is contacted now, to learn its slots)."""
    register_secret(config.password)
    seconds = config.timeout_ms / 1000
    if config.provider == "redis":
        return redis.Redis(host=config.host, port=config.port, db=config.database, socket_timeout=seconds,
                           socket_connect_timeout=seconds, username=config.username, password=config.password)
    client = connect_cluster(
        lambda: RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in config.nodes], socket_timeout=seconds,
                             socket_connect_timeout=seconds, username=config.username, password=config.password),
        config.address, config.username, "check \"username\" and \"password\" in the provider config")
    client.RedisClusterRequestTTL = config.max_redirections + 1  # type: ignore[attr-defined]
    return client


def namespace_of(config: ProviderConfig, namespace: str) -> KVNamespace:
    """The namespace with the config's serializers (what a Spark executor needs to stage writes)."""
    return KVNamespace(namespace, config.key_serializer, config.value_serializer)


def load_state(provider: str, config: Mapping[str, Any] | str | None, namespace: str, *,
               hooks: StateHooks | None = None) -> KeyValueState:
    """Seed 002's ``StateProvider.newState``: ``load_state("redis", {"host": ..., "port": ...}, "topo:step")``."""
    checked = parse_provider_config(provider, config)
    return KeyValueState(make_client(checked), namespace_of(checked, namespace), hooks=hooks)

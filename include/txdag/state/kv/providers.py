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

from txdag.errors import AccessDenied, ServiceUnavailable
from txdag.masking import register_secret
from txdag.state.kv.config import ProviderConfig, parse_provider_config
from txdag.state.kv.layout import KVNamespace
from txdag.state.kv.protocol import HOW_TO_START_CLUSTER, StateHooks
from txdag.state.kv.state import KeyValueState

REFUSALS = ("invalid username-password pair", "WRONGPASS", "NOAUTH")


def make_client(config: ProviderConfig) -> Any:
    """A redis.Redis or RedisCluster for ``config`` (a cluster is contacted now, to learn its slots)."""
    register_secret(config.password)
    seconds = config.timeout_ms / 1000
    if config.provider == "redis":
        return redis.Redis(host=config.host, port=config.port, db=config.database, socket_timeout=seconds,
                           socket_connect_timeout=seconds, username=config.username, password=config.password)
    try:
        client = RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in config.nodes], socket_timeout=seconds,
                              socket_connect_timeout=seconds, username=config.username, password=config.password)
    except (redis.exceptions.RedisClusterException, redis.RedisError) as exc:
        refusal = _refusal(exc)
        if refusal is not None:
            raise AccessDenied(f"Redis Cluster at {config.address} refused user {config.username or 'default'!r}: "
                               f"{refusal}; {_fix(refusal, config)}") from None
        raise ServiceUnavailable(f"Redis Cluster at {config.address} is unreachable ({type(exc).__name__}: "
                                 f"{exc}); {HOW_TO_START_CLUSTER}") from None
    client.RedisClusterRequestTTL = config.max_redirections + 1
    return client


def _refusal(exc: BaseException) -> BaseException | None:
    """The login or ACL refusal behind a failed cluster connection (redis-py wraps it in RedisClusterException)."""
    chain: BaseException | None = exc
    while chain is not None:
        if isinstance(chain, redis.AuthenticationError | redis.exceptions.NoPermissionError):
            return chain
        chain = chain.__cause__ or chain.__context__
    return exc if any(s in str(exc) for s in REFUSALS) else None


def _fix(refusal: BaseException, config: ProviderConfig) -> str:
    if isinstance(refusal, redis.exceptions.NoPermissionError):
        return (f"the cluster client needs CLUSTER SLOTS and COMMAND besides the topology's keys: give user "
                f"{config.username or 'default'!r} the ACL SETUSER line `txdag acl redis TOPOLOGY` prints, on every "
                f"node")
    return "check \"username\" and \"password\" in the provider config"


def namespace_of(config: ProviderConfig, namespace: str) -> KVNamespace:
    """The namespace with the config's serializers (what a Spark executor needs to stage writes)."""
    return KVNamespace(namespace, config.key_serializer, config.value_serializer)


def load_state(provider: str, config: Mapping[str, Any] | str | None, namespace: str, *,
               hooks: StateHooks | None = None) -> KeyValueState:
    """Seed 002's ``StateProvider.newState``: ``load_state("redis", {"host": ..., "port": ...}, "topo:step")``."""
    checked = parse_provider_config(provider, config)
    return KeyValueState(make_client(checked), namespace_of(checked, namespace), hooks=hooks)

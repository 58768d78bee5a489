"""Seed 002's state provider configuration: a provider name and a JSON config, checked before any connection.

txdag's shape (``timeout`` in milliseconds, as in the seed):

    redis:          {"host", "port", "timeout", "database", "username", "password", "key_serializer",
                     "value_serializer"}
    redis_cluster:  {"nodes": ["host:port", ...], "timeout", "max_redirections", "username", "password",
                     "key_serializer", "value_serializer"}

Storm's own shape is accepted too, so a Storm user can paste theirs: ``{"keyClass", "valueClass",
"keySerializerClass", "valueSerializerClass", "jedisPoolConfig": {...}}`` or ``"jedisClusterConfig": {"nodes",
"timeout", "maxRedirections"}``. ``keyClass``/``valueClass`` are accepted and ignored (Python values carry their
type); a serializer class is a txdag serializer name, or Storm's ``DefaultStateSerializer``, which maps to
``json`` (txdag has no Kryo). The provider name may be Storm's ``RedisKeyValueStateProvider`` class: the shape
then says whether it is a cluster.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from txdag.errors import ConfigError
from txdag.state.kv.serializers import DEFAULT_SERIALIZER, get_serializer

STORM_PROVIDER = "org.apache.storm.redis.state.RedisKeyValueStateProvider"
PROVIDERS = ("redis", "redis_cluster")
STORM_SERIALIZERS = {"org.apache.storm.state.DefaultStateSerializer": DEFAULT_SERIALIZER}
STORM_TOP = {"keyClass", "valueClass", "keySerializerClass", "valueSerializerClass", "jedisPoolConfig",
             "jedisClusterConfig"}
REDIS_KEYS = {"host", "port", "timeout", "database", "username", "password"}
CLUSTER_KEYS = {"nodes", "timeout", "max_redirections", "username", "password"}
SERIALIZER_KEYS = {"key_serializer", "value_serializer"}
STORM_CLUSTER_KEYS = {"nodes", "timeout", "maxRedirections", "username", "password"}


@dataclass(frozen=True)
class ProviderConfig:
    """A checked provider config; ``nodes`` for a cluster, ``host``/``port``/``database`` otherwise."""

    provider: str
    host: str = "localhost"
    port: int = 6379
    database: int = 0
    nodes: tuple[tuple[str, int], ...] = ()
    timeout_ms: int = 2000
    max_redirections: int = 5
    username: str | None = None
    password: str | None = None
    key_serializer: str = DEFAULT_SERIALIZER
    value_serializer: str = DEFAULT_SERIALIZER

    def __repr__(self) -> str:
        where = (",".join(f"{h}:{p}" for h, p in self.nodes) if self.nodes
                 else f"{self.host}:{self.port}/{self.database}")
        secret = ", password='***'" if self.password else ""
        return (f"ProviderConfig({self.provider!r}, {where}, user={self.username!r}{secret}, "
                f"serializers={self.key_serializer},{self.value_serializer})")

    __str__ = __repr__

    @property
    def address(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.nodes) if self.nodes else f"{self.host}:{self.port}"


def parse_provider_config(provider: str, config: Mapping[str, Any] | str | None) -> ProviderConfig:
    """Check ``config`` for ``provider``; a ConfigError says which key to change and how."""
    data = _as_mapping(provider, config)
    check_provider(provider)
    if STORM_TOP & set(data):
        return _storm_shape(provider, data)
    if provider == STORM_PROVIDER:
        raise ConfigError(f"provider {STORM_PROVIDER} takes Storm's config shape (jedisPoolConfig or "
                          f"jedisClusterConfig); for txdag's shape use provider 'redis' or 'redis_cluster'")
    _only(provider, "", data, (REDIS_KEYS if provider == "redis" else CLUSTER_KEYS) | SERIALIZER_KEYS)
    serializers = {k: _serializer(provider, k, data[k]) for k in SERIALIZER_KEYS if k in data}
    return _connection(provider, "", data, data.get("max_redirections"), serializers)


def check_provider(provider: str) -> None:
    """A ConfigError for a provider txdag does not know, with the one it looks like ('Redis', 'redis-cluster')."""
    known = (*PROVIDERS, STORM_PROVIDER)
    if provider in known:
        return
    close = difflib.get_close_matches(str(provider).lower().replace("-", "_"), known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(f"unknown state provider {provider!r}: {hint}use one of {', '.join(PROVIDERS)} (or Storm's "
                      f"{STORM_PROVIDER})")


def _as_mapping(provider: str, config: Mapping[str, Any] | str | None) -> Mapping[str, Any]:
    if config is None:
        return {}
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError as exc:
            raise ConfigError(f"state provider {provider!r}: the config is not valid JSON ({exc})") from None
    if not isinstance(config, Mapping):
        raise ConfigError(f"state provider {provider!r}: the config must be a JSON object, got "
                          f"{type(config).__name__}")
    return config


def _storm_shape(provider: str, data: Mapping[str, Any]) -> ProviderConfig:
    mixed = sorted(set(data) - STORM_TOP)
    if mixed:
        storm = sorted(STORM_TOP & set(data))
        raise ConfigError(f"state provider {provider!r}: the config mixes Storm's shape ({storm}) with other keys "
                          f"{mixed}; use one shape (see txdag.state.kv.config)")
    for name in ("keyClass", "valueClass"):
        if name in data and not isinstance(data[name], str):
            raise ConfigError(f"state provider {provider!r}: {name!r} must be a class name (a string)")
    serializers = {ours: _serializer(provider, storm, data[storm]) for storm, ours in
                   (("keySerializerClass", "key_serializer"), ("valueSerializerClass", "value_serializer"))
                   if storm in data}
    if "jedisPoolConfig" in data and "jedisClusterConfig" in data:
        raise ConfigError(f"state provider {provider!r}: give jedisPoolConfig or jedisClusterConfig, not both")
    cluster = "jedisClusterConfig" in data
    name = "redis_cluster" if cluster else "redis"
    if provider != STORM_PROVIDER and provider != name:
        raise ConfigError(f"state provider {provider!r} got "
                          f"{'jedisClusterConfig' if cluster else 'jedisPoolConfig'}: use provider {name!r}")
    section = "jedisClusterConfig" if cluster else "jedisPoolConfig"
    inner = data.get(section, {})
    if not isinstance(inner, Mapping):
        raise ConfigError(f"state provider {provider!r}: {section!r} must be a JSON object")
    _only(name, f"{section}.", inner, STORM_CLUSTER_KEYS if cluster else REDIS_KEYS)
    return _connection(name, f"{section}.", inner, inner.get("maxRedirections"), serializers)


def _connection(provider: str, where: str, d: Mapping[str, Any], redirections: Any,
                serializers: Mapping[str, str]) -> ProviderConfig:
    common: dict[str, Any] = {
        "provider": provider,
        "timeout_ms": _int(provider, f"{where}timeout", d.get("timeout", 2000), 1, None, "milliseconds"),
        "username": _text(provider, f"{where}username", d.get("username")),
        "password": _secret(provider, f"{where}password", d.get("password")),
        **serializers,
    }
    if provider == "redis":
        return ProviderConfig(
            host=_host(provider, f"{where}host", d.get("host", "localhost")),
            port=_int(provider, f"{where}port", d.get("port", 6379), 1, 65535, "a TCP port"),
            database=_int(provider, f"{where}database", d.get("database", 0), 0, None, "a database number"),
            **common)
    name = "maxRedirections" if where else "max_redirections"
    return ProviderConfig(nodes=_nodes(provider, f"{where}nodes", d.get("nodes")),
                          max_redirections=_int(provider, f"{where}{name}", 5 if redirections is None else redirections,
                                                0, None, "a count"), **common)


def _only(provider: str, where: str, data: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if not unknown:
        return
    hint = ""
    if provider == "redis" and ({"nodes", "max_redirections", "maxRedirections"} & set(unknown)):
        hint = "; a cluster config: use provider 'redis_cluster'"
    elif provider == "redis_cluster" and "database" in unknown:
        hint = "; Redis Cluster has database 0 only: remove 'database'"
    raise ConfigError(f"state provider {provider!r}: unknown config key(s) {[where + k for k in unknown]}; "
                      f"known: {sorted(allowed)}{hint}")


def _int(provider: str, key: str, value: Any, low: int, high: int | None, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise ConfigError(f"state provider {provider!r}: {key!r} must be an integer {bound} ({what}), got {value!r}")
    return value


def _text(provider: str, key: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value or any(c.isspace() for c in value)):
        raise ConfigError(f"state provider {provider!r}: {key!r} must be a non-empty string without spaces, got "
                          f"{value!r}")
    return value


def _secret(provider: str, key: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(f"state provider {provider!r}: {key!r} must be a non-empty string (not shown here)")
    return value


def _host(provider: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value or any(c.isspace() or c in "/:@" for c in value):
        raise ConfigError(f"state provider {provider!r}: {key!r} must be a host name or address, got {value!r}")
    return value


def _nodes(provider: str, key: str, value: Any) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"state provider {provider!r}: {key!r} must list the cluster's nodes, e.g. "
                          f'["127.0.0.1:7000", "127.0.0.1:7001"], got {value!r}')
    nodes = []
    for node in value:
        host, _, port = node.rpartition(":") if isinstance(node, str) else ("", "", "")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ConfigError(f"state provider {provider!r}: {key!r} entry {node!r} is not \"host:port\"")
        nodes.append((_host(provider, key, host), int(port)))
    return tuple(dict.fromkeys(nodes))


def _serializer(provider: str, key: str, value: Any) -> str:
    name = STORM_SERIALIZERS.get(value, value) if isinstance(value, str) else value
    try:
        get_serializer(name)
    except ConfigError as exc:
        raise ConfigError(f"state provider {provider!r}: {key!r}: {exc}") from None
    return name

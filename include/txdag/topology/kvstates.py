"""Where a topology's key-value states live, resolved for the tasks and handed to the Spark job.

A ``KeyValue`` with a config names its own Redis (or Redis Cluster); one without uses the topology's Redis
connection. The resolved ``ProviderConfig`` holds a password, so the job gets them in its environment
(``TXDAG_KV_CONFIGS``, JSON by state name), never on its command line, like ``TXDAG_REDIS_URLS``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from txdag.errors import ConfigError
from txdag.masking import register_secret
from txdag.redisio import RedisAddress
from txdag.state.kv import KVNamespace, ProviderConfig, parse_provider_config
from txdag.topology.definition import KeyValue

CONFIGS_VAR = "TXDAG_KV_CONFIGS"
SERIALIZER_KEYS = ("key_serializer", "value_serializer", "keySerializerClass", "valueSerializerClass")
TIMEOUT_MS = 5000


def provider_config(kv: KeyValue, redis_url: str | None) -> ProviderConfig:
    """The state's provider config: its own (its serializers unless the config names some), else the Redis of
    ``redis_url`` (the topology's connection)."""
    serializers: dict[str, Any] = {"key_serializer": kv.key_serializer, "value_serializer": kv.value_serializer}
    if kv.config is not None:
        parsed = parse_provider_config(kv.provider, kv.config)
        raw = json.loads(kv.config) if isinstance(kv.config, str) else kv.config
        named = any(k in raw for k in SERIALIZER_KEYS)
        return parsed if named else dataclasses.replace(parsed, **serializers)
    if redis_url is None:
        raise ConfigError(f"key-value state {kv.name!r} has no config and no Redis connection to live in")
    url = RedisAddress.of(redis_url)
    if url.tls:
        raise ConfigError(f"key-value state {kv.name!r} would live in the topology's Redis, whose connection uses "
                          f"TLS, which a key-value state's provider config cannot carry yet: keep the topology's "
                          f"key-value states on a Redis reached without TLS (docs/operations.md, TLS)")
    register_secret(url.password or "")
    return ProviderConfig("redis", host=url.host, port=url.port, database=url.db, timeout_ms=TIMEOUT_MS,
                          username=url.username, password=url.password, **serializers)


def namespace(kv: KeyValue, topology: str, config: ProviderConfig) -> KVNamespace:
    return KVNamespace(kv.namespace_of(topology), config.key_serializer, config.value_serializer)


def configs_to_env(configs: Mapping[str, ProviderConfig]) -> dict[str, str]:
    return {CONFIGS_VAR: json.dumps({name: dataclasses.asdict(c) for name, c in configs.items()})} if configs else {}


def configs_from_env(names: list[str], environ: Mapping[str, str] | None = None) -> dict[str, ProviderConfig]:
    """The configs of the key-value states ``names`` from the job's environment."""
    if not names:
        return {}
    text = (os.environ if environ is None else environ).get(CONFIGS_VAR)
    try:
        data: dict[str, Any] = json.loads(text or "")
    except ValueError:
        raise ConfigError(f"{CONFIGS_VAR} is not set or not JSON: the process task sets it for a topology with "
                          f"key-value states {names}; run the job through txdag") from None
    missing = [n for n in names if n not in data]
    if missing:
        raise ConfigError(f"{CONFIGS_VAR} has no config for key-value state(s) {missing}")
    configs = {}
    for name in names:
        entry = dict(data[name])
        entry["nodes"] = tuple(tuple(n) for n in entry.get("nodes", ()))
        configs[name] = ProviderConfig(**entry)
        register_secret(configs[name].password or "")
    return configs

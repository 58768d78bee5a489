"""The Spark job's Redis connections, from ``TXDAG_REDIS_URLS``, and its Kafka ones, from ``TXDAG_KAFKA_CONFIGS``
(pyspark-free).

Airflow resolves the topology's connection ids to redis-py URLs and passes them in the job's environment as
one JSON object ``{conn_id: url}``; the job command line then carries no password. Timeouts go in the URL
(``redis://host:6379/0?socket_timeout=5&socket_connect_timeout=5``); without them, ``txdag.defaults.REDIS_TIMEOUT``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlparse

import redis

from txdag.defaults import REDIS_TIMEOUT
from txdag.errors import ConfigError
from txdag.masking import register_config_secrets, register_secret
from txdag.redisio import client_from_url

URLS_VAR = "TXDAG_REDIS_URLS"
KAFKA_VAR = "TXDAG_KAFKA_CONFIGS"  # {conn_id: Kafka client configuration}


def parse_redis_urls(text: str | None, conn_ids: Iterable[str]) -> dict[str, str]:
    """The URL of each of ``conn_ids``; a clear error naming what to set when one is missing."""
    needed = sorted(set(conn_ids))
    example = json.dumps({c: "redis://host:6379/0" for c in needed})
    if text is None or not text.strip():
        raise ConfigError(f"{URLS_VAR} is not set; set it to a JSON object of Redis URLs by connection id, "
                          f"e.g. {URLS_VAR}='{example}'")
    try:
        urls = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{URLS_VAR} is not JSON ({exc}); set it like {URLS_VAR}='{example}'") from None
    if not isinstance(urls, dict) or not all(isinstance(v, str) for v in urls.values()):
        raise ConfigError(f"{URLS_VAR} must be a JSON object of connection id -> Redis URL, like '{example}'")
    missing = [c for c in needed if c not in urls]
    if missing:
        raise ConfigError(f"{URLS_VAR} has no URL for connection(s) {missing} (it has {sorted(urls)}); add "
                          f"them, e.g. {URLS_VAR}='{example}'")
    return {c: urls[c] for c in needed}


def redis_clients_from_env(
    conn_ids: Iterable[str], environ: Mapping[str, str] | None = None
) -> dict[str, redis.Redis]:
    """One bytes-mode client per connection id (the spouts decode values themselves)."""
    env = os.environ if environ is None else environ
    urls = parse_redis_urls(env.get(URLS_VAR), conn_ids)
    clients = {}
    for conn_id, url in urls.items():
        try:
            register_secret(unquote(urlparse(url).password or ""))
            clients[conn_id] = client_from_url(url, socket_timeout=REDIS_TIMEOUT,
                                               socket_connect_timeout=REDIS_TIMEOUT)  # the URL's win
        except ValueError as exc:  # the message may hold the URL's password: name the connection only
            raise ConfigError(f"{URLS_VAR}: the URL of connection {conn_id!r} is not a Redis URL "
                              f"({type(exc).__name__}); use redis://[user:password@]host:port/db") from None
    return clients


def kafka_configs_from_env(conn_ids: Iterable[str], environ: Mapping[str, str] | None = None
                           ) -> dict[str, dict[str, Any]]:
    """The Kafka client configuration of each of ``conn_ids`` (none needed: {} without reading the variable)."""
    needed = sorted(set(conn_ids))
    if not needed:
        return {}
    text = (os.environ if environ is None else environ).get(KAFKA_VAR)
    example = json.dumps({c: {"bootstrap.servers": "host:9092"} for c in needed})
    try:
        configs = json.loads(text or "")
    except ValueError:
        raise ConfigError(f"{KAFKA_VAR} is not set or not JSON; set it to the Kafka client configuration by "
                          f"connection id, e.g. {KAFKA_VAR}='{example}'") from None
    missing = [c for c in needed if not isinstance(configs, dict) or not isinstance(configs.get(c), dict)]
    if missing:
        raise ConfigError(f"{KAFKA_VAR} has no configuration for Kafka connection(s) {missing}; set it like "
                          f"{KAFKA_VAR}='{example}'")
    for config in configs.values():
        register_config_secrets(config)
    return {c: configs[c] for c in needed}

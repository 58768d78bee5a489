"""Redis plumbing shared by state, staging and spouts: errors that name the server and say how to fix it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import redis

from txdag.errors import ServiceUnavailable

HOW_TO_START_REDIS = (
    "start it with `bash scripts/services.sh start` (development), or check the Airflow connection "
    "that points txdag at Redis"
)


def describe(client: redis.Redis) -> str:
    """host:port/db of a client, without its password."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


@contextlib.contextmanager
def redis_errors(client: redis.Redis, doing: str) -> Iterator[None]:
    """Turn a Redis connection failure into ServiceUnavailable naming Redis, its address and what to do."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ServiceUnavailable(
            f"Redis at {describe(client)} is unreachable while {doing} ({type(exc).__name__}: {exc}); "
            f"{HOW_TO_START_REDIS}"
        ) from exc

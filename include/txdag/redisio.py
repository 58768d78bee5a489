"""Redis plumbing shared by state, staging and spouts: errors that name the server and say how to fix it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import redis

from txdag import hints
from txdag.errors import AccessDenied, ServiceUnavailable

SCRIPT_REFUSED = "The user executing the script can't"  # Redis 7's ACL refusal inside a Lua script
SHOWN_KEYS = 4


def how_to_start_redis() -> str:
    """The fix for an unreachable Redis, for where txdag runs (a checkout, a container, an installed wheel)."""
    return f"{hints.how_to_start('redis')}, or check the Airflow connection that points txdag at Redis"


def _kwargs(client: redis.Redis) -> dict:
    """The connection keyword arguments of a client (a Redis Cluster client keeps them in its nodes manager)."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        return pool.connection_kwargs
    return getattr(getattr(client, "nodes_manager", None), "connection_kwargs", {})


def describe(client: redis.Redis) -> str:
    """host:port/db of a client (``cluster host:port,...`` for a Redis Cluster), without its password."""
    manager = getattr(client, "nodes_manager", None)
    if manager is not None:
        return "cluster " + ",".join(sorted(manager.startup_nodes))
    kwargs = _kwargs(client)
    if "path" in kwargs:
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


def user_of(client: redis.Redis) -> str:
    """The ACL user a client logs in as (``default`` without a username); never its password."""
    return _kwargs(client).get("username") or "default"


def is_refusal(exc: BaseException) -> bool:
    """A Redis ACL refusal: wrong credentials (WRONGPASS/NOAUTH), or a key or command outside the user's ACL."""
    return isinstance(exc, redis.AuthenticationError | redis.exceptions.NoPermissionError) or (
        isinstance(exc, redis.ResponseError) and SCRIPT_REFUSED in str(exc)
    )


def access_denied(
    client: redis.Redis, exc: BaseException, doing: str, *, topology: str | None = None, keys: Sequence[str] = ()
) -> AccessDenied:
    """AccessDenied naming the server, the user, the topology, the keys and what to do; never the password."""
    user, where = user_of(client), f"topology {topology!r}: " if topology else ""
    shown = ", ".join(repr(k) for k in keys[:SHOWN_KEYS]) + (f" and {len(keys) - SHOWN_KEYS} more" if len(
        keys) > SHOWN_KEYS else "")
    reason = str(exc).split(" script: ")[0]  # the server's words; they never hold the password
    if isinstance(exc, redis.AuthenticationError):
        fix = (f"check the login and password of the Airflow Redis connection (user {user!r}); create the user "
               f"with the line `txdag acl redis {topology or 'TOPOLOGY'} --user {user}` prints")
    else:
        fix = (f"grant the user the topology's keys and commands: run, as a Redis admin, the ACL SETUSER line "
               f"`txdag acl redis {topology or 'TOPOLOGY'} --user {user}` prints")
    return AccessDenied(
        f"{where}Redis at {describe(client)} refused user {user!r} while {doing}"
        f"{f' (keys {shown})' if shown else ''}: {reason}; {fix}"
    )


@contextlib.contextmanager
def redis_errors(
    client: redis.Redis, doing: str, *, topology: str | None = None, keys: Sequence[str] = ()
) -> Iterator[None]:
    """Turn a refusal into AccessDenied, and a connection failure into ServiceUnavailable naming Redis, its
    address and what to do."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as exc:
        if is_refusal(exc):
            raise access_denied(client, exc, doing, topology=topology, keys=keys) from exc
        if isinstance(exc, redis.ResponseError):
            raise
        raise ServiceUnavailable(
            f"Redis at {describe(client)} is unreachable while {doing} ({type(exc).__name__}: {exc}); "
            f"{how_to_start_redis()}"
        ) from exc


PORTABLE_KEYS = ("host", "port", "db", "username", "password", "socket_timeout", "socket_connect_timeout", "path")


def portable(client: redis.Redis) -> dict[str, object]:
    """What it takes to open the same connection elsewhere (a Spark executor): plain values, picklable."""
    kwargs = client.connection_pool.connection_kwargs
    spec: dict[str, object] = {k: kwargs[k] for k in PORTABLE_KEYS if kwargs.get(k) is not None}
    if issubclass(client.connection_pool.connection_class, redis.SSLConnection):
        spec["ssl"] = True
    return spec


def from_portable(spec: dict[str, object]) -> redis.Redis:
    """A client of what ``portable`` described."""
    kwargs = dict(spec)
    if "path" in kwargs:
        kwargs.pop("host", None)
        kwargs.pop("port", None)
        return redis.Redis(unix_socket_path=kwargs.pop("path"), **kwargs)  # type: ignore[arg-type]
    return redis.Redis(**kwargs)  # type: ignore[arg-type]

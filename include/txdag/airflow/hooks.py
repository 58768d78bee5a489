"""Connections the provider way: a ZooKeeper hook, and the settings of Redis, ZooKeeper and Kafka connections, from
which ``txdag.protocol.clients.Clients`` builds every client of a task or of the transactions page.

Storm's ``transactional.zookeeper.servers/port`` is an Airflow connection of type ``zookeeper``: host (several
hosts comma-separated), port, login/password for digest auth, extra ``{"root": "/txdag", "timeout": 10}``.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote, urlencode

from airflow.sdk import BaseHook

from txdag.airflow.provider import ZOOKEEPER_HOOK_NAME
from txdag.defaults import REDIS_TIMEOUT, ZK_ROOT, ZK_TIMEOUT, ZOOKEEPER_CONN_ID
from txdag.errors import ConfigError
from txdag.masking import register_config_secrets, register_secret
from txdag.protocol.clients import Clients, RedisSettings, ZooKeeperSettings
from txdag.redisio import CLUSTER_OPTION, NODES_OPTION, TLS_KEYS, node_address
from txdag.zk.client import ZkClient, close_zk


class ZooKeeperHook(BaseHook):
    """A started KazooClient for a ``zookeeper`` connection; ``close()`` stops it."""

    conn_name_attr = "zookeeper_conn_id"
    default_conn_name = ZOOKEEPER_CONN_ID
    conn_type = "zookeeper"
    hook_name = ZOOKEEPER_HOOK_NAME  # its form: ZOOKEEPER_CONNECTION in the provider's metadata

    def __init__(self, zookeeper_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.zookeeper_conn_id = zookeeper_conn_id
        self.client: ZkClient | None = None
        self._settings: ZooKeeperSettings | None = None

    def settings(self) -> ZooKeeperSettings:
        """The connection's settings, looked up once per hook."""
        if self._settings is None:
            self._settings = zookeeper_settings(self.get_connection(self.zookeeper_conn_id))
        return self._settings

    def get_conn(self) -> ZkClient:
        if self.client is None:
            self.client = self.settings().connect()
        return self.client

    def close(self) -> None:
        if self.client is not None:
            close_zk(self.client)
            self.client = None


def airflow_clients() -> Clients:
    """Clients of Airflow connections, by connection id: each connection is looked up on first use. Redis replies
    are bounded (``REDIS_TIMEOUT``): a hung Redis fails the task instead of wedging it."""
    return Clients(redis=lambda conn_id: RedisSettings(redis_url(conn_id), timeout=REDIS_TIMEOUT),
                   zookeeper=lambda conn_id: zookeeper_settings(BaseHook.get_connection(conn_id)),
                   kafka=lambda conn_id: kafka_config_of(BaseHook.get_connection(conn_id)))


def kafka_config_of(conn: Any) -> dict[str, Any]:
    """The client configuration of a Kafka connection, as the Kafka provider's hooks read it: its extra, with
    ``bootstrap.servers`` (else the connection's host and port) and any TLS/SASL settings."""
    config = dict(conn.extra_dejson)
    if not config.get("bootstrap.servers") and conn.host:
        config["bootstrap.servers"] = ",".join(h if ":" in h else f"{h}:{conn.port or 9092}"
                                               for h in conn.host.split(","))
    if not config.get("bootstrap.servers"):
        raise ConfigError(f"Kafka connection {conn.conn_id!r} names no broker: give its extra "
                          f'{{"bootstrap.servers": "host:9092"}} (the Kafka provider\'s connection type "kafka")')
    register_config_secrets(config)
    return config


def redis_url(conn_id: str) -> str:
    """A redis-py URL for ``conn_id``: the tasks' clients are made from it, and the Spark job gets it in its
    environment (never on its command line)."""
    return redis_url_of(BaseHook.get_connection(conn_id))


def redis_url_of(conn: Any) -> str:
    """The URL of a Redis connection object (host, port, login/password, extra ``db`` and ``ssl``). Extra
    ``{"cluster": true}``: a Redis Cluster, its host one node or several (``h1:7000,h2:7000``), the first in the
    URL and the others in its ``nodes`` option (txdag.redisio.client_from_url); a malformed node is a ConfigError
    naming the connection (txdag.redisio.node_address)."""
    extra = conn.extra_dejson
    cluster = str(extra.get("cluster", "")).lower() in TRUE
    hosts = [h.strip() for h in (conn.host or "127.0.0.1").split(",") if h.strip()] or ["127.0.0.1"]
    if len(hosts) > 1 and not cluster:
        raise ConfigError(f"Redis connection {conn.conn_id!r} lists several hosts ({conn.host}) and is no cluster: "
                          f"give one host, or add \"cluster\": true to its extra for a Redis Cluster")
    db = str(extra.get("db") or 0)
    if not db.isascii() or not db.isdigit():
        raise ConfigError(f"Redis connection {conn.conn_id!r}: its extra's \"db\" is {extra.get('db')!r}, not a "
                          f"database number: give 0-15 (or the server's databases - 1), or remove it for 0")
    if cluster and int(db) != 0:
        raise ConfigError(f"Redis connection {conn.conn_id!r} is a Redis Cluster, which has database 0 only: "
                          f"remove \"db\" from its extra")
    first, *others = (with_port(h, conn.port) for h in hosts)
    for node in (first, *others):
        node_address(node, conn.host if cluster else None, where=f"Redis connection {conn.conn_id!r}: ",
                     kind="Redis Cluster node" if cluster else "Redis server",
                     fix="fix the connection's Host (nodes comma-separated, host:port,host:port; a node without "
                         ":port takes the connection's Port, which must be 1-65535 too)" if cluster else
                         "fix the connection's Port (or the host:port of its Host)")
    tls = str(extra.get("ssl", "")).lower() in TRUE
    scheme = "rediss" if tls else "redis"
    auth = ""
    if conn.password and str(conn.password).lower() not in ("none", "false"):
        _mask(conn.password)
        auth = f"{quote(conn.login or '', safe='')}:{quote(conn.password, safe='')}@"
    elif conn.login:
        auth = f"{quote(conn.login, safe='')}@"
    options = tls_options(conn) if tls else []
    if cluster:
        options += [(CLUSTER_OPTION, "true")] + ([(NODES_OPTION, ",".join(others))] if others else [])
    url = f"{scheme}://{auth}{first}/{int(db)}"
    return url + (f"?{urlencode(options, safe=',:/')}" if options else "")


def with_port(host: str, port: int | None) -> str:
    """``host:port`` of a connection's host, which may hold its own port (an IPv6 address in brackets too)."""
    has_port = "]:" in host if host.startswith("[") else ":" in host
    return host if has_port else f"{host}:{port or 6379}"


CERT_REQS = ("required", "optional", "none")  # the Redis provider's choices (and redis-py's)
NULL_MEANS = {"ssl_cert_reqs": "none", "ssl_check_hostname": "false"}  # an extra set to null: redis-py's reading
TRUE = ("1", "true", "yes", "on")


def tls_options(conn: Any) -> list[tuple[str, str]]:
    """The Redis provider's TLS extras of a connection with ``"ssl": true``, as redis-py URL options (a private
    CA, a client certificate; the paths must be readable where the tasks and Spark executors run)."""
    extra = conn.extra_dejson
    options = []
    for name in TLS_KEYS:  # the Redis provider's TLS extras, as redis-py names them
        value = extra.get(name)
        if name in extra and value is None and name in NULL_MEANS:  # the provider's hook hands redis-py the None
            value = NULL_MEANS[name]
        if value is None or value == "":
            continue
        if name == "ssl_cert_reqs" and str(value).lower() not in CERT_REQS:
            raise ConfigError(f"Redis connection {conn.conn_id!r}: ssl_cert_reqs is {value!r}; use one of "
                              f"{', '.join(CERT_REQS)} (the Redis provider's choices)")
        if name == "ssl_check_hostname":
            value = "true" if str(value).lower() in TRUE else "false"
        options.append((name, str(value).lower() if name == "ssl_cert_reqs" else str(value)))
    return options


def _mask(password: str) -> None:
    """Mask the password, raw and URL-quoted, in task logs (Airflow's masker) and txdag's loggers."""
    from airflow.sdk.log import mask_secret

    for form in {password, quote(password, safe="")}:
        mask_secret(form)
    register_secret(password)


def zookeeper_settings(conn: Any) -> ZooKeeperSettings:
    """The settings of a ``zookeeper`` connection object; a host without a port gets the connection's port."""
    hosts = ",".join(
        h if ":" in h or not conn.port else f"{h}:{conn.port}" for h in (conn.host or "").split(",") if h
    )
    auth = (conn.login, conn.password) if conn.login else None
    extra = conn.extra_dejson
    timeout = extra.get("timeout")
    if timeout is None or timeout == "":  # a form's empty field: null
        timeout = ZK_TIMEOUT
    try:
        timeout = -1.0 if isinstance(timeout, bool) else float(timeout)  # JSON's true is no number of seconds
    except (TypeError, ValueError):
        timeout = -1.0
    if not 0 < timeout < math.inf:
        raise ConfigError(f"ZooKeeper connection {conn.conn_id!r}: its timeout {extra.get('timeout')!r} is not a "
                          f"positive number of seconds: give one (the default is {ZK_TIMEOUT:g}), or leave it empty")
    return ZooKeeperSettings(hosts, auth, root=extra.get("root") or ZK_ROOT, timeout=timeout)

"""Connections the provider way: a ZooKeeper hook, and Redis clients and URLs from Redis connections.

Storm's ``transactional.zookeeper.servers/port`` is an Airflow connection of type ``zookeeper``: host (several
hosts comma-separated), port, login/password for digest auth, extra ``{"root": "/txdag", "timeout": 10}``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import redis
from airflow.providers.redis.hooks.redis import RedisHook
from airflow.sdk import BaseHook

from txdag.defaults import ZK_ROOT, ZK_TIMEOUT, ZOOKEEPER_CONN_ID
from txdag.masking import register_secret
from txdag.zk.client import ZkClient, close_zk, connect_zk


class ZooKeeperHook(BaseHook):
    """A started KazooClient for a ``zookeeper`` connection; ``close()`` stops it."""

    conn_name_attr = "zookeeper_conn_id"
    default_conn_name = ZOOKEEPER_CONN_ID
    conn_type = "zookeeper"
    hook_name = "ZooKeeper"

    def __init__(self, zookeeper_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.zookeeper_conn_id = zookeeper_conn_id
        self.client: ZkClient | None = None
        self._settings: tuple[str, tuple[str, str] | None, str, float] | None = None

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["schema"],
            "relabeling": {"host": "Hosts (host1,host2:2182,...)", "login": "Digest user (optional)"},
            "placeholders": {"host": "127.0.0.1", "port": "2181",
                             "extra": f'{{"root": "{ZK_ROOT}", "timeout": {ZK_TIMEOUT:g}}}'},
        }

    def settings(self) -> tuple[str, tuple[str, str] | None, str, float]:
        """(hosts, auth, root, timeout) of the connection, looked up once per hook."""
        if self._settings is None:
            self._settings = zookeeper_settings(self.get_connection(self.zookeeper_conn_id))
        return self._settings

    def get_conn(self) -> ZkClient:
        if self.client is None:
            hosts, auth, _, timeout = self.settings()
            self.client = connect_zk(hosts, auth=auth, timeout=timeout)
        return self.client

    def close(self) -> None:
        if self.client is not None:
            close_zk(self.client)
            self.client = None


def redis_client(conn_id: str) -> redis.Redis:
    """The Redis provider's client for ``conn_id`` (bytes replies, as the spouts require)."""
    return RedisHook(redis_conn_id=conn_id).get_conn()


def redis_url(conn_id: str) -> str:
    """A redis-py URL for ``conn_id``, handed to the Spark job in its environment (never on its command line)."""
    return redis_url_of(BaseHook.get_connection(conn_id))


def redis_url_of(conn: Any) -> str:
    """The URL of a Redis connection object (host, port, login/password, extra ``db`` and ``ssl``)."""
    extra = conn.extra_dejson
    scheme = "rediss" if str(extra.get("ssl", "")).lower() in ("1", "true") else "redis"
    auth = ""
    if conn.password and str(conn.password).lower() not in ("none", "false"):
        _mask(conn.password)
        auth = f"{quote(conn.login or '', safe='')}:{quote(conn.password, safe='')}@"
    elif conn.login:
        auth = f"{quote(conn.login, safe='')}@"
    return f"{scheme}://{auth}{conn.host or '127.0.0.1'}:{conn.port or 6379}/{int(extra.get('db') or 0)}"


def _mask(password: str) -> None:
    """Mask the password, raw and URL-quoted, in task logs (Airflow's masker) and txdag's loggers."""
    from airflow.sdk.log import mask_secret

    for form in {password, quote(password, safe="")}:
        mask_secret(form)
    register_secret(password)


def zookeeper_settings(conn: Any) -> tuple[str, tuple[str, str] | None, str, float]:
    """(hosts, auth, root, timeout) of a ``zookeeper`` connection object; a host without a port gets its port."""
    hosts = ",".join(
        h if ":" in h or not conn.port else f"{h}:{conn.port}" for h in (conn.host or "").split(",") if h
    )
    auth = (conn.login, conn.password) if conn.login else None
    extra = conn.extra_dejson
    return hosts, auth, extra.get("root", ZK_ROOT), float(extra.get("timeout", ZK_TIMEOUT))

"""A topology's clients, built in one place from where its services are: Redis clients and ZooKeeper sessions by
connection id, the spout of a topology's source, and the TransactionStore of a topology under its connection's
root.

Each edge only resolves its own configuration into settings and hands them down: the Airflow side from its
connections (``txdag.airflow.hooks.airflow_clients``), the CLI from its flags and the Airflow connections they
name (``txdag.cli.common.clients``). Nothing here knows Airflow, so a task, the transactions page and a command
build their clients the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from redis import Redis

from txdag.errors import ConfigError
from txdag.redisio import client_from_url
from txdag.spouts.base import Source, SpoutContext, TransactionalSpout
from txdag.topology.topology import TransactionalTopology
from txdag.zk.client import ZkClient, close_zk, connect_zk
from txdag.zk.store import TransactionStore, topology_ids


@dataclass(frozen=True)
class RedisSettings:
    """A Redis server as a redis-py URL (credentials, db and TLS in it, as the Spark job gets it too); ``timeout``
    bounds each connect and reply (None: wait as long as it takes, redis-py's default)."""

    url: str = field(repr=False)  # it may hold a password
    timeout: float | None = None

    def connect(self) -> Redis:
        """A client with bytes replies, as the spouts and the states read them; it connects on first use (a Redis
        Cluster's, ``?cluster=true`` in the URL, now: to learn the slots)."""
        if self.timeout is None:
            return client_from_url(self.url)
        return client_from_url(self.url, socket_connect_timeout=self.timeout, socket_timeout=self.timeout)


@dataclass(frozen=True)
class ZooKeeperSettings:
    """A ZooKeeper ensemble (``"h1:2181,h2:2181[/chroot]"``), its digest credentials, the root znode under which
    every topology has its subtree, and the session timeout in seconds."""

    hosts: str
    auth: tuple[str, str] | None = field(default=None, repr=False)
    root: str = field(kw_only=True)
    timeout: float = field(kw_only=True)

    def connect(self) -> ZkClient:
        """A started session (ServiceUnavailable when no server answers within the timeout)."""
        return connect_zk(self.hosts, auth=self.auth, timeout=self.timeout)


class Clients:
    """Clients by connection id, each built on first use from the settings ``redis``/``zookeeper`` resolve the id
    to, shared afterwards, and closed together by ``close()`` (or at the end of a ``with`` block). Thread-safe:
    the API server's threads share one."""

    def __init__(self, redis: Callable[[str], RedisSettings], zookeeper: Callable[[str], ZooKeeperSettings],
                 kafka: Callable[[str], dict[str, Any]] | None = None) -> None:
        self._resolve_redis, self._resolve_zookeeper, self._resolve_kafka = redis, zookeeper, kafka
        self._kafka: dict[str, dict[str, Any]] = {}
        self._redis: dict[str, tuple[RedisSettings, Redis | None]] = {}
        self._zookeeper: dict[str, tuple[ZooKeeperSettings, ZkClient | None]] = {}
        self._lock = threading.RLock()

    def __enter__(self) -> Clients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def redis_settings(self, conn_id: str) -> RedisSettings:
        with self._lock:
            if conn_id not in self._redis:
                self._redis[conn_id] = (self._resolve_redis(conn_id), None)
            return self._redis[conn_id][0]

    def redis(self, conn_id: str) -> Redis:
        with self._lock:
            settings = self.redis_settings(conn_id)
            client = self._redis[conn_id][1]
            if client is None:
                client = settings.connect()
                self._redis[conn_id] = (settings, client)
            return client

    def zookeeper_settings(self, conn_id: str) -> ZooKeeperSettings:
        with self._lock:
            if conn_id not in self._zookeeper:
                self._zookeeper[conn_id] = (self._resolve_zookeeper(conn_id), None)
            return self._zookeeper[conn_id][0]

    def zookeeper(self, conn_id: str) -> ZkClient:
        """The session of ``conn_id``, started on first use."""
        with self._lock:
            settings = self.zookeeper_settings(conn_id)
            client = self._zookeeper[conn_id][1]
            if client is None:
                client = settings.connect()
                self._zookeeper[conn_id] = (settings, client)
            return client

    def store(self, topology_id: str, zookeeper_conn_id: str) -> TransactionStore:
        """The znodes of ``topology_id``: its subtree under the root of ``zookeeper_conn_id``."""
        root = self.zookeeper_settings(zookeeper_conn_id).root
        return TransactionStore(self.zookeeper(zookeeper_conn_id), topology_id, root=root)

    def topology_ids(self, zookeeper_conn_id: str) -> list[str]:
        """The topologies with a subtree under the root of ``zookeeper_conn_id`` (none before the first one ran)."""
        return topology_ids(self.zookeeper(zookeeper_conn_id), self.zookeeper_settings(zookeeper_conn_id).root)

    def kafka_config(self, conn_id: str) -> dict[str, Any]:
        """The Kafka client configuration of the connection ``conn_id`` (``bootstrap.servers`` and the rest)."""
        with self._lock:
            if conn_id not in self._kafka:
                if self._resolve_kafka is None:
                    raise ConfigError(f"Kafka connection {conn_id!r}: these clients resolve no Kafka connection")
                self._kafka[conn_id] = self._resolve_kafka(conn_id)
            return dict(self._kafka[conn_id])

    def kafka_configs(self, source: Source) -> dict[str, dict[str, Any]]:
        return {c: self.kafka_config(c) for c in source.kafka_conn_ids()}

    def spout(self, topology: TransactionalTopology) -> TransactionalSpout:
        """The spout of the topology's source, over the clients of the connections it reads."""
        clients = {c: self.redis(c) for c in topology.source.conn_ids()}
        return topology.source.build(SpoutContext(topology.topology_id, clients, self.kafka_configs(topology.source)))

    def close(self) -> None:
        """Stop every session and close every client; the settings stay, so a later use connects again."""
        with self._lock:
            for conn_id, (zk_settings, zk) in self._zookeeper.items():
                if zk is not None:
                    close_zk(zk)
                    self._zookeeper[conn_id] = (zk_settings, None)
            for conn_id, (redis_settings, client) in self._redis.items():
                if client is not None:
                    client.close()
                    self._redis[conn_id] = (redis_settings, None)

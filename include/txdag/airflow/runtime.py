"""What a task needs at run time, built from the topology and its Airflow connections, and closed after: the
Airflow implementation of ``txdag.protocol.Runtime``, which the per-txid steps run on.

Clients are made lazily and once per task (``txdag.protocol.clients``, from the topology's connections): the
coordinate task needs ZooKeeper and the source's Redis; the process task also builds the Spark job's environment;
the commit task needs the states' Redis.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from functools import cached_property
from types import ModuleType
from typing import Any

from redis import Redis

from txdag.airflow.hooks import airflow_clients
from txdag.attempt import TransactionAttempt
from txdag.commit.keyvalue import KVTarget
from txdag.spark.env import KAFKA_VAR, URLS_VAR
from txdag.staging.store import Staging
from txdag.state.kv import ProviderConfig
from txdag.state.map_state import MapStateBase
from txdag.topology.definition import JobSpec
from txdag.topology.jobfile import load_job_module
from txdag.topology.kvstates import configs_to_env, namespace, provider_config
from txdag.topology.topology import TransactionalTopology
from txdag.txid.coordinator import Coordinator, Emission

log = logging.getLogger("txdag.airflow")


def emission_to_xcom(emission: Emission, batch_size: int | None) -> dict[str, Any]:
    return {
        "txid": emission.tx.txid, "attempt": emission.tx.attempt, "metadata": emission.metadata,
        "replay": emission.replay, "already_committed": emission.already_committed, "batch_size": batch_size,
    }


def tx_from_xcom(value: Any, task: str) -> TransactionAttempt:
    if not isinstance(value, dict) or "txid" not in value:
        raise ValueError(f"no txid in the XCom of task {task!r} ({value!r}): clear the run from its coordinate task")
    return TransactionAttempt(int(value["txid"]), int(value["attempt"]))


class TopologyRuntime:
    """Clients, coordinator, staging and states of one topology inside one task (a ``txdag.protocol.Runtime``
    built from Airflow connections); use as a context manager."""

    def __init__(self, topology: TransactionalTopology) -> None:
        self.topology = topology
        self.clients = airflow_clients()

    def __enter__(self) -> TopologyRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def client(self) -> Redis:
        """The Redis of the states, the staging and the rejections."""
        return self.clients.redis(self.topology.redis_conn_id)

    @cached_property
    def coordinator(self) -> Coordinator:
        t = self.topology
        return Coordinator(self.clients.store(t.topology_id, t.zookeeper_conn_id), self.clients.spout(t),
                           max_active_transactions=t.max_active_transactions, keep_txids=t.keep_txids)

    @cached_property
    def staging(self) -> Staging:
        return Staging(self.client, self.topology.topology_id)

    @cached_property
    def states(self) -> dict[str, MapStateBase]:
        return {s.name: s.build(self.client, self.topology.topology_id) for s in self.topology.states}

    def job_spec(self, emission: Emission) -> JobSpec:
        t = self.topology
        return JobSpec(t.topology_id, emission.tx, emission.metadata, t.source, tuple(t.states), t.redis_conn_id,
                       tuple(t.key_values), tuple(t.sinks))

    def job_env(self) -> dict[str, str]:
        """The Spark job's Redis URLs, by connection id, and its key-value states' provider configs (passwords
        travel in the environment only)."""
        t = self.topology
        conn_ids = sorted({t.redis_conn_id, *t.source.conn_ids()})
        kafka = {KAFKA_VAR: json.dumps(self.clients.kafka_configs(t.source))} if t.source.kafka_conn_ids() else {}
        return {URLS_VAR: json.dumps({c: self.clients.redis_settings(c).url for c in conn_ids}), **kafka,
                **configs_to_env(self.kv_configs)}

    @cached_property
    def kv_configs(self) -> dict[str, ProviderConfig]:
        """Where each key-value state lives: its own config, else the topology's Redis connection."""
        t = self.topology
        url = self.clients.redis_settings(t.redis_conn_id).url if any(k.config is None for k in t.key_values) else None
        return {k.name: provider_config(k, url) for k in t.key_values}

    @cached_property
    def kv_targets(self) -> dict[str, KVTarget]:
        t = self.topology
        return {k.name: KVTarget(namespace(k, t.topology_id, self.kv_configs[k.name]), self.kv_configs[k.name])
                for k in t.key_values}

    @property
    def marker_key(self) -> str:
        return self.topology.commit_marker

    @property
    def job_loader(self) -> Callable[[], ModuleType]:
        return self.load_job

    @property
    def sinks(self) -> list[str]:
        return [s.name for s in self.topology.sinks]

    def load_job(self) -> ModuleType:
        """The topology's job file as a module: the commit rebuilds the job's aggregators, updaters and steps."""
        return load_job_module(self.topology.job_path)

    def close(self) -> None:
        """The spout first (its own clients), then every client of the connections."""
        try:
            if "coordinator" in self.__dict__:
                self.coordinator.spout.close()
        finally:
            self.clients.close()

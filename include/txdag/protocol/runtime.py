"""What the per-txid steps need of a topology at run time, built in one place per driver.

``Runtime`` is the contract; three drivers fulfil it: ``txdag.airflow.runtime.TopologyRuntime`` builds everything
lazily from the topology's Airflow connections, through ``txdag.protocol.clients`` (one task needs ZooKeeper only,
another the states' Redis too); ``ClientsRuntime`` holds clients given explicitly (the in-process runner, the tests,
and the soak, which makes them from its URLs). The steps never build a client themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Protocol

import redis

from txdag.commit.keyvalue import KVTarget
from txdag.staging.store import Staging
from txdag.state.map_state import MapStateBase
from txdag.state.marker import default_key
from txdag.txid.coordinator import Coordinator


class Runtime(Protocol):
    """The coordinator (ZooKeeper store and spout), the staging, the states and where they live."""

    @property
    def coordinator(self) -> Coordinator: ...

    @property
    def staging(self) -> Staging: ...

    @property
    def client(self) -> redis.Redis:
        """The Redis of the states, the staging and the rejections."""
        ...

    @property
    def states(self) -> Mapping[str, MapStateBase]: ...

    @property
    def kv_targets(self) -> Mapping[str, KVTarget]:
        """The topology's key-value states (seed 002): committed at every txid, read as of txid - 1."""
        ...

    @property
    def marker_key(self) -> str:
        """The Redis key holding the last committed txid, written with the last state write (Storm's
        LAST_COMMITED_TRANSACTION; txdag.state.marker)."""
        ...

    @property
    def job_loader(self) -> Callable[[], ModuleType] | None:
        """Imports the topology's job file, for outputs whose aggregator the job defines; None: no job file."""
        ...

    @property
    def sinks(self) -> Collection[str]:
        """The names of the topology's sinks (their committers are rebuilt from the staging)."""
        ...


@dataclass
class ClientsRuntime:
    """A Runtime over clients and states built by the caller."""

    coordinator: Coordinator
    client: redis.Redis
    states: Mapping[str, MapStateBase]
    marker_key: str = ""  # "" : the topology's default marker (txdag.state.marker)
    kv_targets: Mapping[str, KVTarget] = field(default_factory=dict)
    job_loader: Callable[[], ModuleType] | None = None
    sinks: Collection[str] = ()
    staging: Staging = field(init=False)

    def __post_init__(self) -> None:
        self.staging = Staging(self.client, self.coordinator.name)
        self.marker_key = self.marker_key or default_key(self.coordinator.name)

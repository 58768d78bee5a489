"""Are the Airflow connections a topology names defined? Asked where a connection is used, never at parse time.

Rendering a DAG looks up no connection (Airflow's best practices keep the secrets backend out of top-level DAG
code). The coordinate task asks first, so that a missing connection fails the run before a txid is allocated,
with a message naming the connection, the topology and how to add it; ``txdag doctor --check connections`` asks
the same question for every topology of the DAG folder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from txdag import hints
from txdag.errors import ConfigError
from txdag.topology.topology import TransactionalTopology


def missing_connection(topology_id: str, conn_id: str, kind: str, reason: str) -> str:
    """The message for a connection ``topology_id`` uses that is not defined (``reason``: the lookup's error)."""
    return (f"topology {topology_id!r}: Airflow connection {conn_id!r} ({kind}) is not defined ({reason}): "
            f"{hints.how_to_add_connection(conn_id, kind)}")


def require_connections(topology: TransactionalTopology, get: Callable[[str], Any] | None = None) -> None:
    """Raise a ConfigError naming the first connection of ``topology`` that ``get`` (Airflow's
    ``BaseHook.get_connection`` by default) cannot find."""
    if get is None:
        from airflow.sdk import BaseHook

        get = BaseHook.get_connection
    for conn_id, kind in topology.conn_ids().items():
        try:
            get(conn_id)
        except Exception as exc:  # AirflowNotFoundException, or the supervisor's error: both mean "not usable"
            raise ConfigError(missing_connection(topology.topology_id, conn_id, kind, type(exc).__name__)) from None

"""The Airflow side of txdag: hooks, the three task operators, the renderer from topology to DAG, the states' assets.

Only this package (and ``txdag.spark``) imports Airflow; the core stays testable without it. A DAG file imports
the renderer as ``from txdag.airflow import render``, and a DAG scheduled on a state's commits ``from txdag.airflow
import state_asset``; they are loaded on first use, so that importing the hooks or the REST client does not import
the operators. Inside :func:`definitions_only` (the ``txdag`` command reading a
DAG folder) ``render`` builds no DAG and imports no Airflow: it returns the located definition alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from txdag.errors import ConfigError

if TYPE_CHECKING:
    from txdag.airflow.assets import state_asset
    from txdag.airflow.rendering import render
    from txdag.topology.topology import TransactionalTopology

__all__ = ["render", "state_asset", "definitions_only", "located"]
_DEFINITIONS_ONLY: ContextVar[bool] = ContextVar("txdag_definitions_only", default=False)


def __getattr__(name: str) -> Any:
    if name == "render":
        if _DEFINITIONS_ONLY.get():
            return _definition
        from txdag.airflow.rendering import render

        return render
    if name == "state_asset":
        from txdag.airflow.assets import state_asset

        return state_asset
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@contextlib.contextmanager
def definitions_only() -> Iterator[None]:
    """DAG files run inside it get a definition from ``render``, not a DAG. Importing Airflow creates its logs
    folder and, on the first connection lookup, a metadata database: a command that only reads must not."""
    token = _DEFINITIONS_ONLY.set(True)
    try:
        yield
    finally:
        _DEFINITIONS_ONLY.reset(token)


def located(topology: TransactionalTopology, dag_file: str | Path | None) -> TransactionalTopology:
    """The definition with its project located from the DAG file, or an error when a relative job cannot be."""
    from txdag.topology.topology import TransactionalTopology

    if not isinstance(topology, TransactionalTopology):
        raise ConfigError(f"render() takes a txdag.TransactionalTopology(...), got {topology!r}")
    t = topology.located(dag_file) if dag_file is not None else topology
    if not t.job_located:
        raise ConfigError(
            f"topology {t.topology_id!r}: the job {t.job!r} is relative and render() does not know where the DAG "
            f"file is: write render(TransactionalTopology(...), dag_file=__file__), or give an absolute project_dir"
        )
    return t


@dataclass
class Definition:
    """What ``render`` returns inside :func:`definitions_only`: the located topology, as a DAG carries it."""

    txdag_topology: TransactionalTopology

    @property
    def dag_id(self) -> str:
        return self.txdag_topology.topology_id


def _definition(topology: TransactionalTopology, *, dag_file: str | Path | None = None) -> Definition:
    return Definition(located(topology, dag_file))

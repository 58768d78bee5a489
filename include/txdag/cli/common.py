"""What every command shares: Airflow connections, the topologies of the DAG folder, and output for a person
(aligned plain tables) or for a script (``--json``), so each command only gathers its data."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from txdag import hints
from txdag.defaults import REDIS_CONN_ID, ZOOKEEPER_CONN_ID
from txdag.errors import ConfigError, TxdagError

DEFAULT_REDIS_CONN = REDIS_CONN_ID
DEFAULT_ZK_CONN = ZOOKEEPER_CONN_ID


class CliError(TxdagError):
    """A command cannot do what was asked; the message says what to do instead."""


# --- connections -------------------------------------------------------------------------------------------


class _Stderr:
    """Whatever ``sys.stderr`` is when a log line is written (it is replaced under pytest and by redirections)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def logs_to_stderr() -> None:
    """Importing Airflow sends every INFO log line to stdout; the CLI's stdout is its result (and ``--json``), so
    keep warnings and errors only, on stderr."""
    root = logging.getLogger()
    root.setLevel(logging.WARNING)
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # its reconnection warnings; the commands report outages
    for handler in root.handlers:
        if type(handler) is logging.StreamHandler and not isinstance(handler.stream, _Stderr):  # not pytest's
            handler.setStream(_Stderr())


def connection(conn_id: str) -> Any:
    """The Airflow connection ``conn_id`` (environment variables, secrets backend or metadata database)."""
    from airflow.models.connection import Connection

    logs_to_stderr()
    try:
        return Connection.get_connection_from_secrets(conn_id)
    except Exception as exc:  # not found, or no metadata database to look in
        raise ConfigError(
            f"Airflow connection {conn_id!r} is not usable ({type(exc).__name__}: {exc}): set "
            f"AIRFLOW_CONN_{conn_id.upper()} or add it in Admin > Connections ({hints.how_to_env()})"
        ) from None


def redis_for(conn_id: str, timeout: float | None = None) -> Any:
    """A redis-py client for a Redis connection (bytes replies, as the spouts and state read them)."""
    import redis

    from txdag.airflow.hooks import redis_url_of

    return redis.Redis.from_url(redis_url_of(connection(conn_id)), socket_connect_timeout=timeout,
                                socket_timeout=timeout)


def zookeeper_for(conn_id: str, timeout: float | None = None) -> tuple[Any, str]:
    """A started KazooClient for a ZooKeeper connection, and the connection's root znode."""
    from txdag.airflow.hooks import zookeeper_settings
    from txdag.zk.client import connect_zk

    hosts, auth, root, conn_timeout = zookeeper_settings(connection(conn_id))
    return connect_zk(hosts, auth=auth, timeout=timeout or conn_timeout), root


def store_of(client: Any, root: str, topology: str) -> Any:
    """The topology's TransactionStore, refusing a topology that has no znode (it never ran, or a wrong root)."""
    from txdag.zk.store import TransactionStore

    store = TransactionStore(client, topology, root=root)
    if not client.exists(store.path):
        raise CliError(f"topology {topology!r} has no transactions in ZooKeeper ({store.path} does not exist): "
                       "it has not run yet, or the ZooKeeper connection's root is not the one its DAG uses")
    return store


def zk_topologies(client: Any, root: str) -> list[str]:
    """Topology ids with a znode under the root."""
    return sorted(client.get_children(root)) if client.exists(root) else []


def conn_id(args: argparse.Namespace, name: str, topology: Any = None) -> str:
    """An explicit ``--redis-conn-id``/``--zookeeper-conn-id``, else the topology's own, else the default."""
    given = getattr(args, f"{name}_conn_id", None)
    if given:
        return str(given)
    if topology is not None:
        return str(getattr(topology, f"{name}_conn_id"))
    return DEFAULT_REDIS_CONN if name == "redis" else DEFAULT_ZK_CONN


# --- topologies in the DAG folder -------------------------------------------------------------------------


def dags_folder(args: argparse.Namespace) -> Path:
    """``--dags``, else $TXDAG_DAGS_FOLDER, else Airflow's $AIRFLOW__CORE__DAGS_FOLDER, else ./dags."""
    from txdag.topology.topology import dags_folder as resolve

    return resolve(getattr(args, "dags", None))


def topologies(args: argparse.Namespace) -> dict[str, Any]:
    """The topologies of the DAG folder; a DAG file that fails is reported on stderr, not fatal."""
    from txdag.topology.topology import load_definitions

    found, errors = load_definitions(dags_folder(args))
    for path, error in errors.items():
        print(f"txdag: warning: skipped DAG file {path}: {error}", file=sys.stderr)
    return found


def topology(args: argparse.Namespace, name: str) -> Any:
    """One topology's definition, or an error listing the ones the DAG folder has."""
    found = topologies(args)
    if name not in found:
        raise CliError(f"topology {name!r} is not defined in {dags_folder(args)} (found: "
                       f"{', '.join(sorted(found)) or 'none'}): give the DAG folder with --dags or TXDAG_DAGS_FOLDER")
    return found[name]


# --- output ------------------------------------------------------------------------------------------------


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], headers: Sequence[str] | None = None) -> str:
    """Rows as an aligned plain-text table: upper-case headers, two spaces between columns, no trailing blanks."""
    heads = [h.upper() for h in (headers or columns)]
    cells = [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(x) for x in col) for col in zip(heads, *cells)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip() for line in [heads, *cells]]
    return "\n".join(lines)


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    """``name  value`` lines with the values aligned (one record)."""
    width = max((len(name) for name, _ in pairs), default=0)
    return "\n".join(f"{name.ljust(width)}  {cell(value)}".rstrip() for name, value in pairs)


def emit(args: argparse.Namespace, data: Any, human: Callable[[Any], str], out: TextIO | None = None) -> None:
    """Print ``data`` as JSON with ``--json``, else as ``human(data)``."""
    out = out or sys.stdout
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, sort_keys=True, default=str), file=out)
    else:
        text = human(data)
        if text:
            print(text, file=out)


class Progress:
    """``[i/n] what`` lines on stderr for long commands, so stdout stays the result (and valid JSON)."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr

    def step(self, what: str, amount: int = 1) -> None:
        self.done += amount
        print(f"[{self.done}/{self.total}] {what}", file=self.stream, flush=True)

"""What every command shares: Airflow connections, the topologies of the DAG folder, and output for a person
(aligned plain tables) or for a script (``--json``), so each command only gathers its data."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from txdag import hints
from txdag.defaults import REDIS_CONN_ID, ZOOKEEPER_CONN_ID
from txdag.errors import ConfigError, TxdagError

if TYPE_CHECKING:  # imported where used: a command that only prints does not load redis-py or kazoo
    from redis import Redis

    from txdag.protocol.clients import Clients, RedisSettings, ZooKeeperSettings
    from txdag.zk.store import TransactionStore

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


def redis_settings(conn_id: str, timeout: float | None = None) -> RedisSettings:
    """Where the Redis connection ``conn_id`` points, with ``timeout`` on connects and replies."""
    from txdag.airflow.hooks import redis_url_of
    from txdag.protocol.clients import RedisSettings

    return RedisSettings(redis_url_of(connection(conn_id)), timeout)


def zookeeper_settings(conn_id: str, timeout: float | None = None) -> ZooKeeperSettings:
    """Where the ZooKeeper connection ``conn_id`` points; ``timeout`` replaces the connection's own."""
    from dataclasses import replace

    from txdag.airflow.hooks import zookeeper_settings as settings_of

    settings = settings_of(connection(conn_id))
    return settings if timeout is None else replace(settings, timeout=timeout)


def clients(redis_timeout: float | None = None, zookeeper_timeout: float | None = None) -> Clients:
    """The command's clients of the Airflow connections its flags name; use as a context manager, so that its
    ZooKeeper sessions are closed."""
    from txdag.protocol.clients import Clients

    return Clients(redis=lambda c: redis_settings(c, redis_timeout),
                   zookeeper=lambda c: zookeeper_settings(c, zookeeper_timeout))


def redis_for(conn_id: str, timeout: float | None = None) -> Redis:
    """A redis-py client for a Redis connection (bytes replies, as the spouts and state read them)."""
    return redis_settings(conn_id, timeout).connect()


def store_of(using: Clients, zookeeper_conn_id: str, topology: str) -> TransactionStore:
    """The topology's TransactionStore, refusing a topology that has no znode (it never ran, or a wrong root)."""
    store = using.store(topology, zookeeper_conn_id)
    if not store.client.exists(store.path):
        raise CliError(f"topology {topology!r} has no transactions in ZooKeeper ({store.path} does not exist): "
                       "it has not run yet, or the ZooKeeper connection's root is not the one its DAG uses")
    return store


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

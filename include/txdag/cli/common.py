"""What every command shares: Airflow connections, the topologies of the DAG folder, and output for a person
(aligned plain tables) or for a script (``--json``), so each command only gathers its data."""

from __future__ import annotations

import argparse
import configparser
import contextlib
import json
import logging
import math
import os
import sys
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from txdag import hints
from txdag.cli import exits
from txdag.defaults import REDIS_CONN_ID, ZOOKEEPER_CONN_ID
from txdag.errors import ConfigError, TxdagError

if TYPE_CHECKING:  # imported where used: a command that only prints does not load redis-py or kazoo
    from redis import Redis

    from txdag.protocol.clients import Clients, RedisSettings, ZooKeeperSettings
    from txdag.zk.store import TransactionStore

DEFAULT_REDIS_CONN = REDIS_CONN_ID
DEFAULT_ZK_CONN = ZOOKEEPER_CONN_ID


class CliError(TxdagError):
    """A command cannot do what was asked; the message says what to do instead, ``exit_code`` (txdag.cli.exits)
    which kind of answer it is."""

    def __init__(self, message: str, exit_code: int = exits.FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# --- arguments: a value out of range is a usage error (exit 2), as argparse's own are ---------------------


def int_at_least(minimum: int, what: str = "", maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum`` (and <= ``maximum``) written in ASCII digits alone, leading zeros
    allowed (a txid znode's name, ``00000000000000000003``, is txid 3); argparse names the argument first. Python's
    ``int()`` would take ``3_0`` (30), `` 3 ``, ``+3`` and a full-width ``３``: a script's typo, not a number."""
    bounds = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"

    def parse(text: str) -> int:
        value = _digits(text)
        if value is None or value < minimum or (maximum is not None and value > maximum):
            how = " written in digits 0-9 alone (no sign, space or '_')" if value is None and _lax(text) else ""
            raise argparse.ArgumentTypeError(f"{what}must be an integer {bounds}{how}, got {text!r}")
        return value

    return parse


def _digits(text: str) -> int | None:
    """The number ``text`` writes in ASCII digits alone, or None."""
    try:
        return int(text) if text.isascii() and text.isdigit() else None
    except ValueError:  # more digits than Python converts (thousands)
        return None


def _lax(text: str) -> bool:
    """Whether Python's ``int()`` reads a number >= 1 in ``text`` (``3_0``, ``+3``, `` 3 ``, ``３``)."""
    try:
        return int(text) >= 1
    except ValueError:
        return False


txid_arg = int_at_least(1, "a txid ")  # the one parser of a txid on the command line, for every command
MAX_SECONDS = 600.0


def seconds_arg(text: str) -> float:
    """An argparse type: a number of seconds, more than 0 and at most MAX_SECONDS."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_SECONDS:  # NaN fails too
        raise argparse.ArgumentTypeError(f"seconds must be a number > 0 and <= {MAX_SECONDS:g}, got {text!r}")
    return value


def conn_id_arg(text: str) -> str:
    """An argparse type: an Airflow connection id (letters, digits, '_', '.', '-', as Airflow takes them)."""
    from txdag.topology.definition import NAME

    if not NAME.match(text):
        raise argparse.ArgumentTypeError(f"a connection id is letters, digits, '_', '.' and '-', got {text!r}")
    return text


def dags_arg(text: str) -> str:
    """An argparse type: a DAG folder; an empty one is a mistake (a variable that expanded to nothing), not a
    request for the default folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"the DAG folder is empty ({text!r}): give the folder that holds the "
                                         "topologies' DAG files, or leave --dags out for $TXDAG_DAGS_FOLDER")
    return text


def topology_arg(text: str) -> str:
    """An argparse type: a topology id as a DAG id, a znode and a Redis key can hold it."""
    from txdag.topology.definition import NAME

    if not NAME.match(text):
        raise argparse.ArgumentTypeError(f"a topology id is letters, digits, '_', '.' and '-' (its DAG id), "
                                         f"got {text!r}")
    return text


# --- connections -------------------------------------------------------------------------------------------


class _Stderr:
    """Whatever ``sys.stderr`` is when a log line is written (it is replaced under pytest and by redirections)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


_results: list[TextIO] = []  # the stdout of the command that main() runs, the innermost last


@contextlib.contextmanager
def results_to(stream: TextIO) -> Iterator[None]:
    """While a command runs, its result goes to ``stream`` (result_stream) and anything else written to stdout
    goes to stderr: Airflow's log lines (structlog prints to stdout), what a DAG file prints."""
    _results.append(stream)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _results.pop()
        stream.flush()  # here, where a reader gone is ReaderSafe's to drop, not at the interpreter's exit


class ReaderSafe:
    """stdout for a command's result that a reader gone (``txdag seed ... | head -1``) does not stop halfway: what
    is written after the pipe closed is dropped, and the command finishes its work (a replay clears every run)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.gone = stream, False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self.reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self.reader_gone()

    def reader_gone(self) -> None:
        """From now on nothing reaches the pipe, not even the interpreter's last flush (which would complain)."""
        self.gone = True
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def result_stream() -> TextIO:
    """Where a command's result goes: the process's stdout as main() found it."""
    return _results[-1] if _results else sys.stdout


def logs_to_stderr() -> None:
    """Importing Airflow sends every INFO log line to stdout; the CLI's stdout is its result (and ``--json``), so
    keep warnings and errors only, on stderr."""
    root = logging.getLogger()
    root.setLevel(logging.WARNING)
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # its reconnection warnings; the commands report outages
    logging.getLogger("airflow.models.crypto").setLevel(logging.ERROR)  # "empty cryptography key": not ours to say
    for handler in root.handlers:
        if type(handler) is logging.StreamHandler and not isinstance(handler.stream, _Stderr):  # not pytest's
            handler.setStream(_Stderr())


def connection(conn_id: str) -> Any:
    """The Airflow connection ``conn_id`` (environment variables, secrets backend or metadata database). Where
    Airflow has only the environment to look in, Airflow is not even imported: looking would create its logs
    folder and an empty metadata database (a command that reads must leave nothing behind)."""
    variable = f"AIRFLOW_CONN_{conn_id.upper()}"
    nowhere = None if variable in os.environ else airflow_store_missing()
    if nowhere:
        raise ConfigError(f"Airflow connection {conn_id!r} is not defined ({variable} is not set, and {nowhere}): "
                          f"set {variable} or add it in Admin > Connections ({hints.how_to_env()})")
    from airflow.models.connection import Connection

    logs_to_stderr()
    try:
        return Connection.get_connection_from_secrets(conn_id)
    except Exception as exc:  # not found, or no metadata database to look in
        raise ConfigError(
            f"Airflow connection {conn_id!r} is not usable ({type(exc).__name__}: {exc}): set "
            f"AIRFLOW_CONN_{conn_id.upper()} or add it in Admin > Connections ({hints.how_to_env()})"
        ) from None


DATABASE_SETTINGS = ("sql_alchemy_conn", "sql_alchemy_conn_cmd", "sql_alchemy_conn_secret")


def airflow_store_missing() -> str | None:
    """Why Airflow has nowhere but AIRFLOW_CONN_* variables to find a connection in (None: it has a metadata
    database or a secrets backend): no database configured, and no airflow.db in AIRFLOW_HOME."""
    variables = [f"AIRFLOW__DATABASE__{s.upper()}" for s in DATABASE_SETTINGS] + ["AIRFLOW__SECRETS__BACKEND"]
    if any(os.environ.get(v) for v in variables):
        return None
    home = Path(os.environ.get("AIRFLOW_HOME") or "~/airflow").expanduser()
    if (home / "airflow.db").exists():
        return None
    config = Path(os.environ.get("AIRFLOW_CONFIG") or home / "airflow.cfg").expanduser()
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(config)
    except configparser.Error:
        return None  # Airflow will say what is wrong with it
    database = parser["database"] if parser.has_section("database") else {}
    secrets = parser["secrets"] if parser.has_section("secrets") else {}
    if any(database.get(s) for s in DATABASE_SETTINGS) or secrets.get("backend"):
        return None
    return f"Airflow has no metadata database here: no {home / 'airflow.db'}, no sql_alchemy_conn in {config}"


def redis_settings(conn_id: str, timeout: float | None = None) -> RedisSettings:
    """Where the Redis connection ``conn_id`` points, with ``timeout`` on connects and replies."""
    conn = connection(conn_id)  # before importing the hooks: they import Airflow
    from txdag.airflow.hooks import redis_url_of
    from txdag.protocol.clients import RedisSettings

    return RedisSettings(redis_url_of(conn), timeout)


def zookeeper_settings(conn_id: str, timeout: float | None = None) -> ZooKeeperSettings:
    """Where the ZooKeeper connection ``conn_id`` points; ``timeout`` replaces the connection's own."""
    from dataclasses import replace

    conn = connection(conn_id)  # before importing the hooks: they import Airflow
    from txdag.airflow.hooks import zookeeper_settings as settings_of

    settings = settings_of(conn)
    return settings if timeout is None else replace(settings, timeout=timeout)


def clients(redis_timeout: float | None = None, zookeeper_timeout: float | None = None) -> Clients:
    """The command's clients of the Airflow connections its flags name; use as a context manager, so that its
    ZooKeeper sessions are closed."""
    from txdag.protocol.clients import Clients

    return Clients(redis=lambda c: redis_settings(c, redis_timeout),
                   zookeeper=lambda c: zookeeper_settings(c, zookeeper_timeout), kafka=kafka_config)


def kafka_config(conn_id: str) -> dict[str, Any]:
    """The client configuration of the Kafka connection ``conn_id``."""
    conn = connection(conn_id)  # before importing the hooks: they import Airflow
    from txdag.airflow.hooks import kafka_config_of

    return kafka_config_of(conn)


def redis_for(conn_id: str, timeout: float | None = None) -> Redis:
    """A redis-py client for a Redis connection (bytes replies, as the spouts and state read them)."""
    return redis_settings(conn_id, timeout).connect()


def store_of(using: Clients, zookeeper_conn_id: str, topology: str,
             defined: Collection[str] | None = None) -> TransactionStore:
    """The topology's TransactionStore, refusing a topology that has no znode (it never ran, or a wrong root);
    ``defined``, the topologies of the DAG folder, tells a typo from a topology that has not run."""
    store = using.store(topology, zookeeper_conn_id)
    if not store.client.exists(store.path):
        if defined is not None and topology not in defined:
            raise CliError(f"no topology {topology!r}: the DAG folder defines {', '.join(sorted(defined)) or 'none'} "
                           f"and ZooKeeper has no {store.path}: check the name (txdag status lists them all)")
        raise CliError(f"topology {topology!r} has not run yet: no txid in ZooKeeper ({store.path} does not exist); "
                       "trigger its DAG in Airflow, or, if it has run, give the ZooKeeper connection the root its "
                       "DAG uses")
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
    """``--dags``, else $TXDAG_DAGS_FOLDER, $AIRFLOW__TXDAG__DAGS_FOLDER or Airflow's $AIRFLOW__CORE__DAGS_FOLDER,
    else ./dags (txdag.topology.topology.dags_folder_source). A folder given that does not exist is an error (2 from
    --dags, 5 from a variable); ./dags may be missing."""
    from txdag.topology.topology import dags_folder_source

    folder, source = dags_folder_source(getattr(args, "dags", None))
    if source is not None and not folder.is_dir():
        problem = "does not exist" if not folder.exists() else "is not a folder"
        named = source if source == "--dags" else f"${source}"
        raise CliError(f"the DAG folder {folder} ({named}) {problem}: give the folder that holds the topologies' "
                       "DAG files", exits.USAGE if source == "--dags" else exits.CONFIG)
    return folder


def load_folder(folder: str | Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The definitions of a DAG folder's files and the files that failed. They run without building Airflow DAGs
    (txdag.airflow.definitions_only), with stdout sent to stderr: what a DAG file prints, and the logs of an Airflow
    it imports (a plain DAG file looks up a connection at parse time), must not mix with the result (--json)."""
    from txdag.airflow import definitions_only
    from txdag.topology.topology import load_definitions

    with definitions_only(), contextlib.redirect_stdout(sys.stderr):
        return load_definitions(folder)


def topologies(args: argparse.Namespace) -> dict[str, Any]:
    """The topologies of the DAG folder, read once per command; a DAG file that fails is reported on stderr, not
    fatal. The files run without building Airflow DAGs (txdag.airflow.definitions_only): no Airflow import."""
    cached = getattr(args, "_topologies", None)
    if cached is not None:
        return dict(cached[0])
    folder = dags_folder(args)
    found, errors = load_folder(folder) if folder.is_dir() else ({}, {})
    for path, error in errors.items():
        print(f"txdag: warning: skipped DAG file {path}: {error}", file=sys.stderr)
    args._topologies = (found, errors)
    return dict(found)


def topology(args: argparse.Namespace, name: str) -> Any:
    """One topology's definition, or an error listing the ones the DAG folder has (and the files that failed)."""
    found = topologies(args)
    if name not in found:
        broken: dict[str, str] = getattr(args, "_topologies", ({}, {}))[1]
        failed = f"; {len(broken)} DAG file(s) failed to load, see the warnings above" if broken else ""
        raise CliError(f"topology {name!r} is not defined in the DAG folder {dags_folder(args)} (it defines "
                       f"{', '.join(sorted(found)) or 'none'}{failed}): check the name, or give the DAG folder with "
                       "--dags or TXDAG_DAGS_FOLDER")
    return found[name]


# --- output ------------------------------------------------------------------------------------------------


def shorten(text: str, keep: int = 300) -> str:
    """A server's answer cut to one readable line (an HTML error page is not one)."""
    line = " ".join(text.split())
    return line if len(line) <= keep else line[:keep] + "..."




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
    out = out or result_stream()
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

"""``txdag warm TOPOLOGY``: ready a warm-mode topology's shared Spark Connect session before its first txid
(txdag.spark.warm), after the server starts or at the start of a UTC day (the day names the session)."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import urlsplit

from txdag.cli import exits
from txdag.cli.common import CliError, connection, emit, topology, topology_arg
from txdag.errors import ConfigError, ServiceUnavailable


def connect_url_arg(text: str) -> str:
    """A Spark Connect URL: sc://HOST:PORT, optionally with /;parameters."""
    try:
        parsed = urlsplit(text)
        port = parsed.port
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a Spark Connect URL ({exc}): {text!r}; give sc://HOST:PORT") from None
    if parsed.scheme != "sc" or not parsed.hostname or port is None:
        raise argparse.ArgumentTypeError(f"not a Spark Connect URL: {text!r}; give sc://HOST:PORT, e.g. "
                                         f"sc://127.0.0.1:15002")
    return text


def add_cli(sub: Any, common: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("warm", parents=common, help="ready a warm-mode topology's Spark Connect session, so that "
                       "its first txid does not pay for a cold server")
    p.add_argument("topology", type=topology_arg)
    p.add_argument("--url", metavar="sc://HOST:PORT", type=connect_url_arg, help="the Spark Connect server "
                   "(default: the topology's spark_connect_conn_id connection)")
    p.set_defaults(func=cmd_warm)


def cmd_warm(args: argparse.Namespace) -> int:
    t = topology(args, args.topology)
    name = t.topology_id
    if t.spark_mode != "connect":
        raise CliError(f"topology {name!r} runs spark_mode={t.spark_mode!r}: each txid starts an application of "
                       f"its own, there is no session to warm (spark_mode='connect' shares one)", exits.USAGE)
    from pyspark.errors import PySparkException

    from txdag.spark.connect import how_to_start, py_files, server_address
    from txdag.spark.warm import warm

    url = args.url or _connection_url(name, t.spark_connect_conn_id)
    address = server_address(url)
    try:
        data = warm(url, name, py_files(t.spark_conf))
    except ServiceUnavailable:
        raise CliError(f"topology {name!r}: the Spark Connect server at {address} does not answer; {how_to_start()}, "
                       f"then run `txdag warm {name}` again", exits.UNAVAILABLE) from None
    except ConfigError as exc:
        raise CliError(f"topology {name!r}: {exc}", exits.CONFIG) from None
    except PySparkException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CliError(f"topology {name!r}: the warm-up job failed in its Spark Connect session at {address} "
                       f"({first}); look at the server's log, and check that its Python workers import txdag and "
                       f"pyarrow (spark_conf spark.submit.pyFiles, `txdag pyfiles`), then run `txdag warm {name}` "
                       f"again") from None
    emit(args, data, _text)
    return 0


def _connection_url(topology: str, conn_id: str) -> str:
    """The URL of the Spark Connect connection the topology's process tasks use, as they build it."""
    try:
        connection(conn_id)
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        return connect_url_arg(str(SparkConnectHook(conn_id).get_connection_url()))
    except (ConfigError, ValueError, AttributeError, argparse.ArgumentTypeError) as exc:
        raise CliError(f"topology {topology!r}: no Spark Connect URL from connection {conn_id!r} ({exc}); fix the "
                       f"connection, or give the server with --url sc://HOST:PORT", exits.CONFIG) from None


def _text(data: dict[str, Any]) -> str:
    return (f"warmed topology {data['topology']}'s Spark Connect session {data['session']} in {data['seconds']:.1f} s "
            f"({data['rows']} rows through its Python workers)")

"""The ``txdag`` command: inspect a topology's transactions and state, replay, seed demo data, sync pools, doctor.

Hosts and passwords come from the same Airflow connections the DAGs use (``redis_default``,
``zookeeper_default``, ``spark_default``), read through Airflow's secrets (environment variables or the metadata
database), so run it where the ``airflow`` CLI works (``eval "$(bash scripts/airflow.sh env)"`` first in a
checkout; errors name the fix that applies where it runs, see :mod:`txdag.hints`). Topologies are read from the DAG
folder (``--dags``, ``TXDAG_DAGS_FOLDER``, ``AIRFLOW__CORE__DAGS_FOLDER`` or ``./dags``). Every command takes
``--json``. Exit codes: 0 done, 1 failed (the message says what to do), 2 usage error. ``txdag --version``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Sequence

from txdag.cli.acl import add_cli as add_acl_cli
from txdag.defaults import REDIS_CONN_ID, SPARK_CONN_ID, ZOOKEEPER_CONN_ID
from txdag.errors import TxdagError

DESCRIPTION = "Inspect a txdag topology's transactions and state, replay txids, seed demo data, sync pools, doctor."


def _options() -> argparse.ArgumentParser:
    """Options every subcommand takes (after its name): --json, the DAG folder, the connections."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON for scripts instead of tables")
    common.add_argument("--dags", metavar="DIR", help="the DAG folder holding the topologies (default: "
                        "$TXDAG_DAGS_FOLDER, $AIRFLOW__CORE__DAGS_FOLDER or ./dags)")
    common.add_argument("--redis-conn-id", metavar="ID", help="Redis connection (default: the topology's, or "
                        f"{REDIS_CONN_ID})")
    common.add_argument("--zookeeper-conn-id", metavar="ID", help="ZooKeeper connection (default: the "
                        f"topology's, or {ZOOKEEPER_CONN_ID})")
    return common


def version() -> str:
    """The installed distribution's version (the package's own when it is imported from sources alone)."""
    try:
        return importlib.metadata.version("txdag")
    except importlib.metadata.PackageNotFoundError:
        from txdag import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    from txdag.cli import doctor, inspect, kvstate, ops, state, topology

    common = [_options()]
    parser = argparse.ArgumentParser(prog="txdag", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("status", parents=common, help="committed txid, txids in flight, failures, rejections")
    p.add_argument("topology", nargs="?", help="one topology (default: every one in the DAG folder or ZooKeeper)")
    p.set_defaults(func=inspect.cmd_status)

    p = sub.add_parser("show", parents=common, help="one txid's record: batch, attempt, phase, run, history")
    p.add_argument("topology")
    p.add_argument("txid", type=int)
    p.set_defaults(func=inspect.cmd_show)

    p = sub.add_parser("replay", parents=common, help="replay txid N and every later one (clears their runs)")
    p.add_argument("topology")
    p.add_argument("--from", dest="from_txid", type=int, required=True, metavar="N")
    p.add_argument("--dry-run", action="store_true", help="list the runs without clearing them")
    p.set_defaults(func=ops.cmd_replay)

    p = sub.add_parser("reset", parents=common, help="start a topology over on purpose: delete its records and "
                       "the keys it wrote (not its source)")
    p.add_argument("topology")
    p.add_argument("--confirm", action="store_true", help="do it (without: say what would be deleted)")
    p.set_defaults(func=ops.cmd_reset)

    p = sub.add_parser("state", help="read committed state values; dump or migrate a KeyValueState")
    state_sub = p.add_subparsers(dest="state_command", required=True, metavar="get|top|dump|migrate")
    g = state_sub.add_parser("get", parents=common, help="values of keys (hash fields as stored, e.g. @bob:#tag)")
    g.add_argument("topology")
    g.add_argument("state", help="the state's name (or its Redis namespace)")
    g.add_argument("keys", nargs="*", metavar="KEY", help="none for a global state")
    g.set_defaults(func=state.cmd_get)
    t = state_sub.add_parser("top", parents=common, help="the keys with the largest values")
    t.add_argument("topology")
    t.add_argument("state")
    t.add_argument("-n", type=int, default=10, help="how many (default 10)")
    t.set_defaults(func=state.cmd_top)
    kvstate.add_cli(state_sub, common)

    p = sub.add_parser("seed", parents=common, help="append demo data for a shipped topology")
    p.add_argument("topology", choices=[*ops.ALIASES, *ops.SAMPLES],
                   help="tweets (tweets_analytics), words (word_count), global (global_count)")
    p.add_argument("--count", type=int, default=500)
    p.add_argument("--seed", type=int, default=0, help="random seed of the sample generator")
    p.set_defaults(func=ops.cmd_seed)

    p = sub.add_parser("pools", help="the topologies' 1-slot Airflow pools")
    pools_sub = p.add_subparsers(dest="pools_command", required=True, metavar="sync")
    s = pools_sub.add_parser("sync", parents=common, help="create missing pools, set every one back to 1 slot")
    s.add_argument("topologies", nargs="*", metavar="TOPOLOGY", help="default: every one in the DAG folder")
    s.add_argument("--dry-run", action="store_true")
    s.set_defaults(func=ops.cmd_pools_sync)

    p = sub.add_parser("doctor", parents=common,
                       help="check Redis, ZooKeeper, Spark, Airflow and the DAGs' connections; say how to fix")
    p.add_argument("--check", action="append", choices=doctor.GROUPS, help="only these (repeatable)")
    p.add_argument("--spark-conn-id", default=SPARK_CONN_ID, metavar="ID")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds per service (default 5)")
    p.set_defaults(func=doctor.cmd_doctor)
    add_acl_cli(sub)
    topology.add_cli(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    name = " ".join(filter(None, [args.command, getattr(args, "state_command", None),
                                  getattr(args, "pools_command", None), getattr(args, "topology_command", None)]))
    try:
        return int(args.func(args))
    except TxdagError as exc:
        print(f"txdag {name}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        reason = airflow_failure(exc)
        if reason is None:
            raise
        print(f"txdag {name}: {reason}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"txdag {name}: interrupted", file=sys.stderr)
        return 130


def airflow_failure(exc: Exception) -> str | None:
    """What to tell about a failed request to Airflow's REST API mid-command (None: not such a failure)."""
    requests = sys.modules.get("requests")  # not imported (or not installed: no airflow extra): not such a failure
    if requests is None:
        return None
    from txdag.airflow.api import AirflowAPIError

    if isinstance(exc, AirflowAPIError):
        return f"Airflow's REST API answered {exc}"
    if isinstance(exc, requests.RequestException):
        return f"Airflow's REST API stopped answering ({exc}); check it (txdag doctor --check airflow) and rerun"
    return None


if __name__ == "__main__":
    sys.exit(main())

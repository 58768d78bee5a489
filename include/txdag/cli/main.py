"""The ``txdag`` command: inspect a topology's transactions and state, replay, seed demo data, sync pools, doctor.

Hosts and passwords come from the same Airflow connections the DAGs use (``redis_default``,
``zookeeper_default``, ``spark_default``), read through Airflow's secrets (environment variables or the metadata
database), so run it where the ``airflow`` CLI works (``eval "$(bash scripts/airflow.sh env)"`` first in a
checkout; errors name the fix that applies where it runs, see :mod:`txdag.hints`). Topologies are read from the DAG
folder (``--dags``, ``TXDAG_DAGS_FOLDER``, ``AIRFLOW__CORE__DAGS_FOLDER`` or ``./dags``). Every command takes
``--json``. Exit codes (:mod:`txdag.cli.exits`): 0 done, 1 failed, 2 usage, 3 a service unavailable, 4 refused,
5 configuration; the one line on stderr says what to do. ``txdag --version``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence

from txdag.cli import exits
from txdag.cli.acl import add_cli as add_acl_cli
from txdag.cli.common import (
    ReaderSafe,
    conn_id_arg,
    dags_arg,
    int_at_least,
    results_to,
    seconds_arg,
    shorten,
    topology_arg,
    txid_arg,
)
from txdag.cli.pyfiles import add_cli as add_pyfiles_cli
from txdag.cli.warm import add_cli as add_warm_cli
from txdag.defaults import REDIS_CONN_ID, SPARK_CONN_ID, ZOOKEEPER_CONN_ID
from txdag.errors import TxdagError

MAX_SEED = 1_000_000  # sample data is built in memory before it is appended
DESCRIPTION = "Inspect a txdag topology's transactions and state, replay txids, seed demo data, sync pools, doctor."


def _options() -> argparse.ArgumentParser:
    """Options every subcommand takes (after its name): --json, the DAG folder, the connections."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON for scripts instead of tables")
    common.add_argument("--dags", metavar="DIR", type=dags_arg, help="the DAG folder holding the topologies (default: "
                        "$TXDAG_DAGS_FOLDER, $AIRFLOW__CORE__DAGS_FOLDER or ./dags)")
    common.add_argument("--redis-conn-id", metavar="ID", type=conn_id_arg,
                        help=f"Redis connection (default: the topology's, or {REDIS_CONN_ID})")
    common.add_argument("--zookeeper-conn-id", metavar="ID", type=conn_id_arg,
                        help=f"ZooKeeper connection (default: the topology's, or {ZOOKEEPER_CONN_ID})")
    return common


def version() -> str:
    """The installed distribution's version (the package's own when it is imported from sources alone)."""
    try:
        return importlib.metadata.version("txdag")
    except importlib.metadata.PackageNotFoundError:
        from txdag import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    from txdag.cli import doctor, holes, inspect, kvstate, ops, state, topology

    common = [_options()]
    parser = argparse.ArgumentParser(prog="txdag", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("status", parents=common, help="committed txid, txids in flight, failures, rejections")
    p.add_argument("topology", nargs="?", type=topology_arg,
                   help="one topology (default: every one in the DAG folder or ZooKeeper)")
    p.set_defaults(func=inspect.cmd_status)

    p = sub.add_parser("show", parents=common, help="one txid's record: batch, attempt, phase, run, history")
    p.add_argument("topology", type=topology_arg)
    p.add_argument("txid", type=txid_arg)
    p.set_defaults(func=inspect.cmd_show)

    p = sub.add_parser("rejections", parents=common, help="the source entries a topology rejected, and why")
    p.add_argument("topology", type=topology_arg)
    p.add_argument("--limit", type=int_at_least(0), default=50,
                   help="the newest N (default 50; 0 for the count alone)")
    p.set_defaults(func=inspect.cmd_rejections)

    p = sub.add_parser("replay", parents=common, help="replay txid N and every later one (clears their runs)")
    p.add_argument("topology", type=topology_arg)
    p.add_argument("--from", dest="from_txid", type=txid_arg, required=True, metavar="N")
    p.add_argument("--dry-run", action="store_true", help="list the runs without clearing them")
    p.set_defaults(func=ops.cmd_replay)

    p = sub.add_parser("retry", parents=common, help="retry txid N's dead task now, not after Airflow's "
                       "heartbeat timeout (the old attempt is fenced)")
    p.add_argument("topology", type=topology_arg)
    p.add_argument("txid", type=txid_arg)
    p.add_argument("--dry-run", action="store_true", help="say what would be done, change nothing")
    p.set_defaults(func=ops.cmd_retry)

    p = sub.add_parser("reset", parents=common, help="start a topology over on purpose: delete its records and "
                       "the keys it wrote (not its source)")
    p.add_argument("topology", type=topology_arg)
    p.add_argument("--confirm", action="store_true", help="do it (without: say what would be deleted)")
    p.set_defaults(func=ops.cmd_reset)

    p = sub.add_parser("state", help="read committed state values; dump or migrate a KeyValueState")
    state_sub = p.add_subparsers(dest="state_command", required=True, metavar="get|top|dump|migrate")
    g = state_sub.add_parser("get", parents=common, help="values of keys (hash fields as stored, e.g. @bob:#tag)")
    g.add_argument("topology", type=topology_arg)
    g.add_argument("state", help="the state's name (or its Redis namespace)")
    g.add_argument("keys", nargs="*", metavar="KEY", help="none for a global state")
    g.set_defaults(func=state.cmd_get)
    t = state_sub.add_parser("top", parents=common, help="the keys with the largest values")
    t.add_argument("topology", type=topology_arg)
    t.add_argument("state")
    t.add_argument("-n", type=int_at_least(1), default=10, help="how many (default 10)")
    t.set_defaults(func=state.cmd_top)
    kvstate.add_cli(state_sub, common)

    p = sub.add_parser("seed", parents=common, help="append demo data for a shipped topology")
    p.add_argument("topology", choices=[*ops.ALIASES, *ops.SAMPLES],
                   help="tweets (tweets_analytics), words (word_count), global (global_count)")
    p.add_argument("--count", type=int_at_least(1, maximum=MAX_SEED), default=500,
                   help=f"how many (default 500, at most {MAX_SEED:,} per run)")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="random seed of the sample generator")
    p.set_defaults(func=ops.cmd_seed)

    p = sub.add_parser("pools", help="the topologies' 1-slot Airflow pools")
    pools_sub = p.add_subparsers(dest="pools_command", required=True, metavar="sync")
    s = pools_sub.add_parser("sync", parents=common, help="create missing pools, set every one back to 1 slot")
    s.add_argument("topologies", nargs="*", type=topology_arg, metavar="TOPOLOGY",
                   help="default: every one in the DAG folder")
    s.add_argument("--dry-run", action="store_true")
    s.set_defaults(func=ops.cmd_pools_sync)

    p = sub.add_parser("doctor", parents=common,
                       help="check Redis, ZooKeeper, Spark, Airflow and the DAGs' connections; say how to fix")
    p.add_argument("--check", action="append", choices=doctor.GROUPS, help="only these (repeatable)")
    p.add_argument("--spark-conn-id", default=SPARK_CONN_ID, metavar="ID", type=conn_id_arg)
    p.add_argument("--timeout", type=seconds_arg, default=5.0, help="seconds per service (default 5)")
    p.set_defaults(func=doctor.cmd_doctor)
    add_acl_cli(sub)
    add_pyfiles_cli(sub)
    add_warm_cli(sub, common)
    topology.add_cli(sub, common)
    holes.add_cli(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    name = " ".join(filter(None, [args.command, getattr(args, "state_command", None),
                                  getattr(args, "pools_command", None), getattr(args, "topology_command", None)]))
    try:
        with results_to(ReaderSafe(sys.stdout)):  # type: ignore[arg-type]  # a TextIO as far as it is written to
            return int(args.func(args))
    except KeyboardInterrupt:
        print(f"txdag {name}: interrupted", file=sys.stderr)
        return exits.INTERRUPTED
    except Exception as exc:
        code, reason = answer(exc)
        if code == exits.INTERNAL and os.environ.get(exits.TRACEBACK_ENV):
            raise
        print(f"txdag {name}: {reason}", file=sys.stderr)
        return code


def answer(exc: Exception) -> tuple[int, str]:
    """The exit code and the one line to print for an error that ended a command. No traceback: a mistake or a
    service problem has its message; anything else is a bug, said as such."""
    if isinstance(exc, TxdagError):
        return exits.code_of(exc), str(exc)
    for explain in (airflow_failure, zookeeper_failure, redis_failure):
        found = explain(exc)
        if found is not None:
            return found
    return exits.INTERNAL, (f"unexpected {type(exc).__name__}: {exc} (a bug in txdag: rerun with "
                            f"{exits.TRACEBACK_ENV}=1 for the traceback, and report it)")


def airflow_failure(exc: Exception) -> tuple[int, str] | None:
    """What to tell about a failed request to Airflow's REST API mid-command (None: not such a failure)."""
    requests = sys.modules.get("requests")  # not imported (or not installed: no airflow extra): not such a failure
    if requests is None:
        return None
    from txdag.airflow.api import AirflowAPIError

    if isinstance(exc, AirflowAPIError):
        code = exits.UNAVAILABLE if exc.status >= 500 else exits.CONFIG if exc.status in (401, 403) else \
            exits.REFUSED
        return code, f"Airflow's REST API answered {shorten(str(exc))}"
    if isinstance(exc, requests.RequestException):
        return exits.UNAVAILABLE, (f"Airflow's REST API stopped answering ({shorten(str(exc))}); check it "
                                   "(txdag doctor --check airflow) and rerun")
    return None


def zookeeper_failure(exc: Exception) -> tuple[int, str] | None:
    """A kazoo error no command turned into its own message (None: not one)."""
    if "kazoo" not in sys.modules:  # not even imported: not such an error
        return None
    from txdag.zk.client import as_txdag_error

    error = as_txdag_error(exc)
    return None if error is None else (exits.code_of(error), str(error))


def redis_failure(exc: Exception) -> tuple[int, str] | None:
    """A redis-py error no command turned into its own message (None: not one)."""
    redis = sys.modules.get("redis")
    if redis is None or not isinstance(exc, redis.RedisError):
        return None
    from txdag.redisio import how_to_start_redis, is_refusal, not_redis

    if isinstance(exc, redis.exceptions.InvalidResponse):
        return exits.CONFIG, str(not_redis("the Redis connection's address", exc))
    if is_refusal(exc):
        return exits.CONFIG, (f"Redis refused txdag's login or command ({exc}): check the login and password of the "
                              "Airflow Redis connection, and its ACL (txdag acl redis)")
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return exits.UNAVAILABLE, f"Redis stopped answering ({exc}); {how_to_start_redis()}, then rerun"
    return exits.CONFIG, (f"Redis refused a command ({exc}): a key txdag uses holds something else, as if another "
                          "program wrote it; look at it (redis-cli TYPE KEY) and give txdag keys of its own")


if __name__ == "__main__":
    sys.exit(main())

"""``txdag state dump|migrate``: inspect a KeyValueState namespace, and convert it to other serializers in place.

The Redis server comes from a state provider and its JSON config, as a Storm topology's
``topology.state.provider`` / ``topology.state.provider.config`` give it (``--provider redis --config '{...}'`` or
``--config-file``), or else from an Airflow Redis connection like the other commands (``--redis-conn-id``,
default ``redis_default``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from txdag.cli import exits
from txdag.cli.common import CliError, conn_id, emit, fields, int_at_least, redis_for, table
from txdag.defaults import REDIS_CONN_ID
from txdag.errors import AccessDenied
from txdag.redisio import describe, user_of
from txdag.state.kv import KVNamespace, get_serializer, make_client, migrate, parse_provider_config, status
from txdag.state.kv.config import PROVIDERS, STORM_PROVIDER
from txdag.state.kv.protocol import NamespaceStatus, kv_errors
from txdag.state.kv.serializers import SerializationError, serializer_names

SCAN_COUNT = 1000
KEY_REFUSED = "no permissions to access one of the keys"  # Redis's ACL refusal of a key (not of a command)


def add_cli(state_sub: Any, common: list[argparse.ArgumentParser]) -> None:
    """``dump`` and ``migrate`` under ``txdag state``."""
    provider = argparse.ArgumentParser(add_help=False)
    provider.add_argument("namespace", help="the KeyValueState's namespace (default naming: TOPOLOGY:STEP)")
    provider.add_argument("--provider", choices=[*PROVIDERS, STORM_PROVIDER], metavar="NAME",
                          help="state provider (seed 002): redis, redis_cluster or Storm's RedisKeyValueStateProvider "
                          f"class; without it, the Airflow Redis connection --redis-conn-id (default {REDIS_CONN_ID})")
    how = provider.add_mutually_exclusive_group()
    how.add_argument("--config", metavar="JSON", help="the provider's JSON config (txdag's or Storm's shape; a "
                     "password on a command line shows in ps and the shell history: prefer --config-file)")
    how.add_argument("--config-file", metavar="PATH", help="a file holding the provider's JSON config")

    d = state_sub.add_parser("dump", parents=[*common, provider], help="a KeyValueState namespace: committed "
                             "values, committed and prepared txids, staged attempts")
    d.add_argument("--limit", type=int_at_least(0), default=50, help="values to show (default 50)")
    d.set_defaults(func=cmd_dump)

    names = ", ".join(serializer_names())
    m = state_sub.add_parser("migrate", parents=[*common, provider], help="convert a KeyValueState namespace to "
                             "other serializers in place (resumable)")
    m.add_argument("--key-serializer", default="json", help=f"new key serializer ({names}; default json)")
    m.add_argument("--value-serializer", default="json", help="new value serializer (default json)")
    m.add_argument("--from-key-serializer", default="", help="only for a namespace without txdag's record: the "
                   "key serializer that wrote it")
    m.add_argument("--from-value-serializer", default="", help="likewise, its value serializer")
    m.add_argument("--chunk", type=int_at_least(1), default=500, help="fields converted per step (default 500)")
    m.add_argument("--max-chunks", type=int_at_least(1), help="stop after this many steps (resume by running it again)")
    m.set_defaults(func=cmd_migrate)


def client_of(args: argparse.Namespace) -> Any:
    """The client of ``--provider``/``--config``, or of the Airflow Redis connection."""
    if args.provider is None:
        if args.config or args.config_file:
            raise CliError("--config/--config-file need --provider (redis or redis_cluster)", exits.USAGE)
        return redis_for(conn_id(args, "redis"), timeout=10)
    text = args.config
    if args.config_file:
        try:
            text = Path(args.config_file).read_text()
        except OSError as exc:
            raise CliError(f"cannot read --config-file {args.config_file}: {exc.strerror}", exits.USAGE) from None
    return make_client(parse_provider_config(args.provider, text or "{}"))


def cmd_dump(args: argparse.Namespace) -> int:
    client = client_of(args)
    st = existing(args, client)
    data = {**report(st, describe(client)), "values": values(client, st, args.limit)}
    emit(args, data, dump_text)
    return 0


def existing(args: argparse.Namespace, client: Any) -> NamespaceStatus:
    """The status of the KeyValueState ``args.namespace``, which must exist: a mistyped namespace is an error, not
    an empty state (migrate would create it)."""
    probe = KVNamespace(args.namespace)
    try:
        st = status(client, probe)
    except AccessDenied as exc:
        if KEY_REFUSED not in str(exc.__cause__):
            raise
        raise CliError(f"no KeyValueState {args.namespace!r} that Redis user {user_of(client)!r} at "
                       f"{describe(client)} may read: a topology's user reads only the KeyValueStates of its "
                       f"topologies' steps (txdag:kv:{{TOPOLOGY:STEP}}); check the namespace (TOPOLOGY:STEP), or give "
                       "a connection whose user may read it (--redis-conn-id, or --provider and its config)") from None
    if st.version is None and st.committed_keys == 0:
        raise CliError(f"no KeyValueState {args.namespace!r} in Redis at {describe(client)} (no {probe.meta} and no "
                       f"{probe.committed}): check the namespace (TOPOLOGY:STEP) and the Redis server")
    return st


def report(st: NamespaceStatus, where: str) -> dict[str, Any]:
    prepared = None if st.prepared_txid is None else {
        "txid": st.prepared_txid, "attempt": st.prepared_attempt, "keys": st.prepared_keys}
    return {
        "namespace": st.namespace, "redis": where, "format_version": st.version,
        "key_serializer": st.key_serializer, "value_serializer": st.value_serializer,
        "committed_txid": st.committed_txid or None, "prepared": prepared, "total_keys": st.committed_keys,
        "staged": [{"txid": a.tx.txid, "attempt": a.tx.attempt, "sealed": a.sealed is not None, "keys": a.keys}
                   for a in st.staged],
        "migrating": None if st.migrating is None else {"to": st.migrating, "converted": st.moved},
    }


def values(client: Any, st: NamespaceStatus, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` committed values, decoded with the namespace's own serializers (HSCAN, never HGETALL)."""
    if limit == 0:
        return []
    keys = get_serializer(st.key_serializer or "json", for_keys=True)
    vals = get_serializer(st.value_serializer or "json")
    spec, rows = KVNamespace(st.namespace), []
    with kv_errors(client, "dumping", spec):
        for field, raw in client.hscan_iter(spec.committed, count=SCAN_COUNT):
            rows.append(_row(keys, vals, field, raw))
            if len(rows) >= limit:
                break
    return rows


def _row(keys: Any, vals: Any, field: bytes, raw: bytes) -> dict[str, Any]:
    try:
        return {"key": plain(keys.decode(field)), "value": plain(vals.decode(raw))}
    except SerializationError as exc:
        return {"key": repr(field), "value": None, "error": str(exc)}


def plain(obj: Any) -> Any:
    """JSON-friendly: tuples as lists, bytes as their repr."""
    if isinstance(obj, tuple | list):
        return [plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    return repr(obj) if isinstance(obj, bytes) else obj


def dump_text(d: dict[str, Any]) -> str:
    prepared = d["prepared"]
    staged = "; ".join(f"txid {a['txid']} attempt {a['attempt']} ({'sealed' if a['sealed'] else 'open'}, "
                       f"{a['keys']} keys)" for a in d["staged"]) or None
    head = fields([
        ("namespace", f"{d['namespace']} (Redis {d['redis']})"),
        ("format version", d["format_version"]),
        ("serializers", f"{d['key_serializer']} (keys), {d['value_serializer']} (values)"),
        ("committed txid", d["committed_txid"]),
        ("prepared", None if prepared is None else
         f"txid {prepared['txid']} attempt {prepared['attempt']} ({prepared['keys']} keys), not committed"),
        ("staged attempts", staged),
        ("migrating", None if d["migrating"] is None else
         f"to {d['migrating']['to']}, {d['migrating']['converted']} converted: finish with txdag state migrate"),
        ("keys", f"{d['total_keys']} (showing {len(d['values'])})"),
    ])
    if not d["values"]:
        return head
    rows = [{"key": r["key"], "value": r["value"] if "error" not in r else f"<{r['error']}>"} for r in d["values"]]
    return f"{head}\n\n{table(rows, ['key', 'value'])}"


def cmd_migrate(args: argparse.Namespace) -> int:
    client = client_of(args)
    existing(args, client)

    def progress(done: int, total: int, key: str) -> None:
        print(f"[{done}/{total}] {args.namespace}: converted values of {key}", file=sys.stderr, flush=True)

    result = migrate(client, args.namespace, args.key_serializer, args.value_serializer,
                     from_key_serializer=args.from_key_serializer, from_value_serializer=args.from_value_serializer,
                     chunk=args.chunk, max_chunks=args.max_chunks, progress=progress)
    data = {"namespace": result.namespace, "from": result.source, "to": result.target, "outcome": result.outcome,
            "converted": result.moved, "converted_in_all_runs": result.total_moved, "remaining": result.remaining}
    emit(args, data, migrate_text)
    return 1 if result.outcome == "interrupted" else 0


def migrate_text(d: dict[str, Any]) -> str:
    ns = d["namespace"]
    if d["outcome"] == "nothing to do":
        return f"namespace {ns} already uses serializers {d['to']} (key,value): nothing to do"
    if d["outcome"] == "interrupted":
        return (f"namespace {ns}: stopped after --max-chunks with {d['remaining']} values left to convert from "
                f"{d['from']} to {d['to']} ({d['converted']} converted by this run); run the same command again to "
                f"finish (the namespace cannot be used until then)")
    return (f"migrated namespace {ns} from {d['from']} to {d['to']} (key,value serializers): "
            f"{d['converted_in_all_runs']} values converted ({d['converted']} by this run)")

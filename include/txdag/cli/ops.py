"""``txdag replay``, ``retry``, ``reset``, ``seed`` and ``pools sync``: the commands that change something,
each showing its progress as it goes (clearing runs, appending sample data, creating pools)."""

from __future__ import annotations

import argparse
import getpass
import os
import socket
import sys
import time
from typing import Any

from txdag import hints
from txdag.cli import exits
from txdag.cli.common import (
    CliError,
    Progress,
    clients,
    conn_id,
    connection,
    dags_folder,
    emit,
    redis_for,
    result_stream,
    shorten,
    store_of,
    table,
    topologies,
    topology,
)
from txdag.txid.report import replay_targets

SAMPLES: dict[str, tuple[str, str | tuple[str, ...]]] = {  # shipped topology -> (sample kind, key prefix or streams)
    "tweets_analytics": ("tweets", ""),
    "trending_hashtags": ("tweets", ""),  # the same tweets as tweets_analytics
    "global_count": ("sentences", "global_count:"),
    "word_count": ("streams", ("sentences:0", "sentences:1")),
}
ALIASES = {"tweets": "tweets_analytics", "words": "word_count", "global": "global_count"}
CHUNK = 1000
POOL_SLOTS = 1


def airflow_api(timeout: float = 30.0) -> Any:
    """The REST API client of the configured Airflow (``timeout``: seconds per request), or a CliError saying how to
    point at one: a server that does not answer is unavailable (exit 3), a login or an address to fix is
    configuration (exit 5)."""
    import requests

    from txdag.airflow.api import AirflowAPIError, api_from_env

    url = hints.airflow_url()
    head = f"cannot use Airflow's REST API at {url}"
    fix = "set TXDAG_AIRFLOW_URL, TXDAG_AIRFLOW_USER and TXDAG_AIRFLOW_PASSWORD for your instance"
    try:
        return api_from_env(timeout)
    except AirflowAPIError as exc:
        if exc.status in (401, 403) or (exc.path == "/auth/token" and exc.status in (400, 422)):  # a malformed login
            raise CliError(f"{head}: it refused the login ({shorten(str(exc))}): {fix}", exits.CONFIG) from None
        raise CliError(f"{head}: that server is not Airflow's API server (it answered {shorten(str(exc), 120)}): "
                       f"{fix}", exits.CONFIG) from None
    except (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema, requests.exceptions.InvalidSchema):
        raise CliError(f"{head}: TXDAG_AIRFLOW_URL {url!r} is not a URL: give the API server's, e.g. "
                       "http://HOST:8080", exits.CONFIG) from None
    except requests.RequestException as exc:
        raise CliError(f"{head}: it does not answer ({type(exc).__name__}); {hints.how_to_start('airflow')}, or "
                       f"{fix}", exits.UNAVAILABLE) from None
    except RuntimeError as exc:
        raise CliError(f"{head}: {exc}", exits.CONFIG) from None


def cmd_replay(args: argparse.Namespace) -> int:
    """Storm's re-emission from txid N, for runs of any kind: clears (all tasks of) the run of every kept txid
    >= N, in txid order, through Airflow's REST API. Works where *Clear* with *Future* cannot (runs without a
    logical date, or logical dates that do not grow with the txid)."""
    defined = topologies(args)
    with clients() as using:
        store = store_of(using, conn_id(args, "zookeeper", defined.get(args.topology)), args.topology, defined)
        records = replay_targets(store, args.from_txid)
        done = clear_runs(args, records, store=store)
    emit(args, done, replay_text)
    return 0


def clear_runs(args: argparse.Namespace, records: list[Any], api: Any = None, *, store: Any) -> dict[str, Any]:
    """Clear the runs of ``records`` (a replay's targets) in txid order through Airflow's REST API (``api``, else
    logged in now), or only list them with ``args.dry_run``; progress goes to stdout (stderr with --json). A real
    replay holds the topology's replay lock in ``store`` (txdag.txid.replays): one replay of a topology at a time,
    and none of runs a replay already set going again."""
    if args.dry_run or not records:
        return _clear_runs(args, records, None)
    from txdag.txid.replays import guarded_replay

    api = api or airflow_api()
    by = f"txdag replay {args.topology} --from {records[0].txid} by {getpass.getuser()}@{socket.gethostname()} " \
         f"pid {os.getpid()}"
    return guarded_replay(store, records, by, lambda run_id: (api.run(args.topology, run_id) or {}).get("state"),
                          lambda: _clear_runs(args, records, api))


def _clear_runs(args: argparse.Namespace, records: list[Any], api: Any) -> dict[str, Any]:
    progress = Progress(len(records), sys.stderr if args.json else result_stream())
    cleared = []
    for record in records:
        if api is not None:
            api.clear_run(args.topology, record.run_id)
        verb = "would clear" if args.dry_run else "clearing"
        progress.step(f"txid {record.txid}: {verb} run {record.run_id} (attempt {record.attempt}, "
                      f"{record.status.value})")
        cleared.append({"txid": record.txid, "run_id": record.run_id, "attempt": record.attempt,
                        "phase": record.status.value})
    return {"topology": args.topology, "dry_run": args.dry_run, "from_txid": records[0].txid if records else None,
            "cleared": cleared}


def replay_text(d: dict[str, Any]) -> str:
    return (f"{'would clear' if d['dry_run'] else 'cleared'} {len(d['cleared'])} run(s) of topology {d['topology']}, "
            f"from txid {d['from_txid']}")


LIVE_STATES = ("running", "restarting")  # what Airflow holds for a task it still thinks is alive
TASK_ORDER = ("coordinate", "process", "commit")  # a txdag run's tasks, upstream first
FAILED_STATES = ("failed", "upstream_failed")
STALE_WINDOW, STALE_POLL = 2.0, 0.5  # seconds: a few of the scheduler's loops (clear_stale_upstream_failed)


def cmd_retry(args: argparse.Namespace) -> int:
    """Retry txid N's dead task now instead of after Airflow's heartbeat timeout: the task instance Airflow still
    holds as running is marked failed (no callback runs: the txid is not failed), then cleared with its downstream
    tasks, so the scheduler starts its next try at once. A txid in flight whose run failed in Airflow (its last try
    was killed, and no callback recorded it) has its failed task cleared: it goes on where it stopped. Safe if the
    task was alive after all: a retried process task claims a new attempt (the old one is fenced: its staging,
    claim and commit are refused), and a commit writes each txid once."""
    from txdag.zk.records import TxStatus

    defined = topologies(args)
    with clients() as using:
        store = store_of(using, conn_id(args, "zookeeper", defined.get(args.topology)), args.topology, defined)
        found = store.read_txid(args.txid)
    if found is None:
        raise CliError(f"topology {args.topology!r} has no record of txid {args.txid}: see `txdag status "
                       f"{args.topology}` for the txids in flight")
    record = found[0]
    if record.status in (TxStatus.COMMITTED, TxStatus.FAILED):
        fix = (f"txdag replay {args.topology} --from {args.txid}" if record.status is TxStatus.FAILED
               else "nothing to do")
        raise CliError(f"topology {args.topology!r}: txid {args.txid} is {record.status.value}, so no task of it "
                       f"is running: {fix}", exits.REFUSED)
    api = airflow_api()
    tasks = api.task_instances(args.topology, record.run_id)
    live = [ti for ti in tasks if ti["state"] in LIVE_STATES]
    # Its run failed in Airflow while ZooKeeper has it in flight (its last try was killed: no callback ran; or only
    # process was cleared, and commit stayed upstream_failed): the first such task goes on where it stopped, as
    # clearing it in the UI does.
    failed = sorted((ti for ti in tasks if ti["state"] in FAILED_STATES and ti["task_id"] in TASK_ORDER),
                    key=lambda ti: TASK_ORDER.index(ti["task_id"]))[:1]
    if failed and not live and api.run(args.topology, record.run_id)["state"] != "failed":
        failed = []  # its failure is still being handled (its callback runs before the run is failed)
    if not live and not failed:
        states = ", ".join(f"{ti['task_id']} {ti['state']}" for ti in tasks)
        raise CliError(f"topology {args.topology!r} txid {args.txid} (attempt {record.attempt}, run "
                       f"{record.run_id}): Airflow holds none of its tasks as running or failed ({states}), so there "
                       f"is no dead try to retry: it waits on something else (see `txdag status {args.topology}`)",
                       exits.REFUSED)
    for ti in [] if args.dry_run else live:
        api.set_task_state(args.topology, record.run_id, ti["task_id"], "failed")
    for ti in [] if args.dry_run else live or failed:
        api.clear(args.topology, record.run_id, task_ids=[ti["task_id"]], include_downstream=True)
        clear_stale_upstream_failed(api, args.topology, record.run_id, ti["task_id"])
    data = {"topology": args.topology, "txid": args.txid, "attempt": record.attempt, "run_id": record.run_id,
            "dry_run": args.dry_run,
            "retried": [{"task_id": ti["task_id"], "try_number": ti["try_number"], "state": ti["state"],
                         "hostname": ti.get("hostname"), "pid": ti.get("pid")} for ti in live or failed]}
    emit(args, data, retry_text)
    return 0


def clear_stale_upstream_failed(api: Any, dag_id: str, run_id: str, task_id: str) -> None:
    """After a task is cleared, a scheduler loop that read it as failed before the clear may still mark a task
    downstream of it upstream_failed (Airflow 3.3; seen in e2e 27 ms after the clear), and the run would fail when
    the new try succeeds. For STALE_WINDOW seconds, such a task is cleared again; ``task_id`` itself never is (its new
    try may be running), and once its new try has failed, upstream_failed below it is right."""
    later = TASK_ORDER[TASK_ORDER.index(task_id) + 1:] if task_id in TASK_ORDER else ()
    deadline = time.monotonic() + STALE_WINDOW
    while later and time.monotonic() < deadline:
        time.sleep(STALE_POLL)
        states = {ti["task_id"]: ti["state"] for ti in api.task_instances(dag_id, run_id)}
        if states.get(task_id) in FAILED_STATES:
            return
        stale = [t for t in later if states.get(t) == "upstream_failed"]
        if stale:
            api.clear(dag_id, run_id, task_ids=stale, include_downstream=False)


def retry_text(d: dict[str, Any]) -> str:
    head = f"topology {d['topology']} txid {d['txid']} (attempt {d['attempt']}, run {d['run_id']})"
    if d["dry_run"]:
        running = ", ".join(f"{t['task_id']} try {t['try_number']} ({t['state']})" for t in d["retried"])
        mark = "" if all(t["state"] in FAILED_STATES for t in d["retried"]) else "mark it failed in Airflow and "
        return (f"{head}: would {mark}clear {running} with its downstream tasks (nothing changed: without "
                "--dry-run it does)")
    tries = "; ".join(f"{t['task_id']} try {t['try_number']} ({t['state']}, pid {t['pid']} on {t['hostname']}) "
                      f"{'cleared' if t['state'] in FAILED_STATES else 'marked failed and cleared'}"
                      for t in d["retried"])
    return (f"{head}: {tries}; the scheduler starts its next try now. A retried process task processes a new "
            f"attempt; anything the old try still writes is refused")


def cmd_seed(args: argparse.Namespace) -> int:
    """Append sample data for a shipped topology to the source it reads, in chunks, with progress."""
    from txdag.spouts.samples import sample_sentences, sample_tweets

    name = ALIASES.get(args.topology, args.topology)
    kind, where = SAMPLES[name]
    client = redis_for(conn_id(args, "redis"), timeout=10)
    if kind == "streams":
        per, extra = divmod(args.count, len(where))  # the first streams take the remainder: --count in all
        batches = [(s, sample_sentences(per + (i < extra), seed=args.seed + i)) for i, s in enumerate(where)]
    else:
        make = sample_tweets if kind == "tweets" else sample_sentences
        assert isinstance(where, str), f"{name}: a {kind} sample goes to one key prefix, got {where!r}"
        batches = [(where, make(args.count, seed=args.seed))]
    out = sys.stderr if args.json else result_stream()
    progress = Progress(sum(len(items) for _, items in batches), out)
    appended = [append(client, kind, target, items, progress) for target, items in batches]
    data = {"topology": name, "kind": kind, "count": sum(a["count"] for a in appended), "appended": appended}
    emit(args, data, seed_text)
    return 0


def append(client: Any, kind: str, target: str, items: list[str], progress: Progress) -> dict[str, Any]:
    from txdag.spouts import StreamPartition, append_entries, append_tweets

    ids: list[Any] = []
    for start in range(0, len(items), CHUNK):
        chunk = items[start:start + CHUNK]
        if kind == "streams":
            ids += append_entries(StreamPartition(target, client, target), chunk)
        else:
            ids += append_tweets(client, chunk, prefix=target)
        label = f"stream {target}" if kind == "streams" else f"keys {target or 'without prefix'}"
        progress.step(f"{len(ids)} {'tweets' if kind == 'tweets' else 'sentences'} appended to {label}", len(chunk))
    first, last = (ids[0], ids[-1]) if ids else (None, None)
    if kind != "streams" and ids:
        first, last = f"{target}{first}", f"{target}{last}"
    return {"target": target, "count": len(ids), "first": first, "last": last}


def seed_text(d: dict[str, Any]) -> str:
    rows = [{**a, "target": a["target"] or "(no prefix)"} for a in d["appended"]]
    noun = "tweets" if d["kind"] == "tweets" else "sentences"
    return f"appended {d['count']} {noun} for topology {d['topology']}\n" + \
        table(rows, ["target", "count", "first", "last"], ["stream or prefix", "count", "first", "last"])


def cmd_reset(args: argparse.Namespace) -> int:
    """Start a topology over on purpose: delete its txid records in ZooKeeper and every key it writes in Redis
    (states, commit marker, staging, windows, new values, key-value states, rejections); its source is kept and
    read again from its start. The way out that a store or source that went backwards names. The keys are named
    from the layouts (txdag.cli.resetkeys), so the topology's own Redis user (``txdag acl redis``, no SCAN) can run
    it as printed."""
    from txdag.cli import resetkeys
    from txdag.cli.acl import owned_patterns

    definition = topology(args, args.topology)
    stores = store_states(definition)
    with clients() as using:
        store = using.store(args.topology, conn_id(args, "zookeeper", definition))
        redis = using.redis(conn_id(args, "redis", definition))
        record = store.read_topology()[0] if store.client.exists(store.path) else None
        kept = store.read_txids(kept_txids(store)) if record else {}
        attempts = {txid: rec.attempt for txid, (rec, _) in kept.items()}
        named = resetkeys.named_keys(redis, definition, record.last_txid if record else 0, attempts)
        keys = list(dict.fromkeys([*named, *sorted(resetkeys.scanned_keys(redis, owned_patterns(definition)))]))
        ours = [(factory, names) for factory, names in stores if hasattr(factory, "forget")]
        found = [factory.forget(args.topology, names, connection(factory.conn_id), False)  # a refusal: before any
                 for factory, names in ours]                                                # delete
        redis_keys = resetkeys.count_existing(redis, keys)
        if args.confirm:  # ZooKeeper first: a database that fails next leaves a txid 1 its row halts, not a lost row
            if record is not None:
                store.forget()
            found = [factory.forget(args.topology, names, connection(factory.conn_id), True)
                     for factory, names in ours]
            resetkeys.delete(redis, keys)
        plan = {"topology": args.topology, "zookeeper": store.path if record else None,
                "committed_txid": record.committed_txid if record else None, "redis_keys": redis_keys,
                "tables": [t for tables, _, _ in found for t in tables],
                "store_txids": {repr(f): held for (f, _), (_, held, _) in zip(ours, found) if held is not None},
                "tables_of_others": [t for _, _, others in found for t in others],
                "stores_kept": [f"{name} in {factory!r}" for factory, names in stores
                                if not hasattr(factory, "forget") for name in names],
                "confirmed": args.confirm}
    emit(args, plan, reset_summary)
    return 0 if args.confirm else 1


def kept_txids(store: Any) -> list[int]:
    """The txids whose znodes are kept (none when the topology's txids znode is gone)."""
    from txdag.zk.store import ZnodeMissing

    try:
        return list(store.list_txids())
    except ZnodeMissing:
        return []


def store_states(definition: Any) -> list[tuple[Any, list[str]]]:
    """The states kept in a store of their own (not in Redis), by store (equal stores are one; a store of the
    user's need not be hashable)."""
    found: list[tuple[Any, list[str]]] = []
    for state in definition.states:
        if state.store is not None:
            names = next((names for factory, names in found if factory == state.store), None)
            if names is None:
                found.append((state.store, [state.name]))
            else:
                names.append(state.name)
    return found


def reset_summary(d: dict[str, Any]) -> str:
    records = (f"its records at {d['zookeeper']} (committed up to txid {d['committed_txid']})" if d["zookeeper"]
               else "no records in ZooKeeper")
    done = ("the next run starts at txid 1, from the source's start" if d["confirmed"]
            else "nothing deleted: add --confirm to do it")
    verb = "reset" if d["confirmed"] else "would reset"
    keys = f"{d['redis_keys']} Redis key(s) it wrote"
    tables = (f", {len(d['tables'])} table(s) of its states ({', '.join(d['tables'])})" if d["tables"] else "")
    rows = "".join(f", its row of txdag_commits at txid {txid} in {where}" for where, txid in d["store_txids"].items())
    kept = (f"; kept, as txdag cannot empty a store of yours: {', '.join(d['stores_kept'])} (empty them before the "
            f"next run, docs/stores.md)" if d["stores_kept"] else "")
    if d["tables_of_others"]:
        kept += (f"; left alone, as another topology's or state's (their names meet in one table name): "
                 f"{', '.join(d['tables_of_others'])}")
    return f"{verb} topology {d['topology']}: {records}{tables}{rows} and {keys}; its source is kept{kept}; {done}"


def cmd_pools_sync(args: argparse.Namespace) -> int:
    """Create the topologies' 1-slot pools that are missing and set back to 1 slot the ones that are not."""
    defined = topologies(args)
    names = args.topologies or sorted(defined)
    unknown = [n for n in names if n not in defined]
    if unknown or not names:
        raise CliError(f"no topology {', '.join(unknown) or ''} in the DAG folder {dags_folder(args)} (found: "
                       f"{', '.join(sorted(defined)) or 'none'}): give the DAG folder with --dags or TXDAG_DAGS_FOLDER")
    api = airflow_api()
    from txdag.airflow.pools import POOL_DESCRIPTION  # imports Airflow: after the checks that need none

    progress = Progress(len(names), sys.stderr if args.json else result_stream())
    rows = []
    for name in names:
        pool = defined[name].pool
        current = api.pool(pool)
        if current is None:
            action = "created"
        elif current["slots"] != POOL_SLOTS or current.get("include_deferred"):
            action = "updated"
        else:
            action = "unchanged"
        if not args.dry_run and action == "created":
            api.create_pool(pool, POOL_SLOTS, POOL_DESCRIPTION)
        elif not args.dry_run and action == "updated":
            api.update_pool(pool, POOL_SLOTS, current.get("description") or POOL_DESCRIPTION)
        rows.append({"topology": name, "pool": pool, "action": ("would be " if args.dry_run else "") + action,
                     "slots_before": None if current is None else current["slots"], "slots": POOL_SLOTS})
        progress.step(f"pool {pool}: {rows[-1]['action']}")
    emit(args, {"pools": rows, "dry_run": args.dry_run},
         lambda d: table(d["pools"], ["topology", "pool", "action", "slots_before", "slots"],
                         ["topology", "pool", "action", "slots before", "slots"]))
    return 0

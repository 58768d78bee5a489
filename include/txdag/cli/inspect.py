"""``txdag status`` and ``txdag show``: what ZooKeeper holds about a topology's txids, for an operator deciding
whether to wait, replay or fix something."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from txdag import hints
from txdag.cli import exits
from txdag.cli.common import CliError, clients, conn_id, dags_folder, emit, fields, shorten, store_of, table, topologies
from txdag.cli.doctor import halted
from txdag.cli.topology import two_files_lines, two_files_of
from txdag.errors import ConfigError, FormatVersionError
from txdag.txid.failure import headline, ways_out
from txdag.txid.report import batch_of, failures, in_flight, read_snapshot, topology_status, txid_row
from txdag.zk.records import TopologyRecord, TxStatus

AIRFLOW_TIMEOUT = 3.0  # seconds per request: an Airflow that does not answer slows status by little
__all__ = ["batch_of", "failures", "cmd_rejections", "cmd_show", "cmd_status", "status_text", "show_text"]


def rejection_count(args: argparse.Namespace, name: str, definition: Any, using: Any, codes: list[int]) -> int | None:
    """Rejected source entries of the topology; None when Redis cannot tell: the rest of the status comes from
    ZooKeeper and is still shown, the line on stderr says why, and ``codes`` gets the exit code it calls for."""
    from txdag.commit.rejections import rejections_key
    from txdag.errors import ServiceUnavailable
    from txdag.redisio import redis_errors

    try:
        client = using.redis(conn_id(args, "redis", definition))
        with redis_errors(client, "counting its rejections", topology=name):  # names the topology, its acl line
            return int(client.hlen(rejections_key(name)))
    except (ConfigError, ServiceUnavailable) as exc:
        print(f"txdag status: rejections of topology {name!r} unknown: {exc}", file=sys.stderr)
        codes.append(exits.code_of(exc))
        return None


def airflow_runs(name: str, flying: list[str]) -> tuple[dict[str, Any], str | None]:
    """The DAG's queued and running runs and the runs of the txids in flight (``flying``) (``runs``: {run_id:
    state}), ``max_active_runs`` and ``paused`` from Airflow's REST API, or why they cannot be read: the rest of the
    status comes from ZooKeeper and is still shown, with the exit code it calls for."""
    import requests

    from txdag.airflow.api import AirflowAPIError
    from txdag.cli.ops import airflow_api

    try:
        api = airflow_api(timeout=AIRFLOW_TIMEOUT)
        dag = api.dag(name)
        if dag is None:
            return {}, f"Airflow's API server knows no DAG {name!r}: its DAG processor has not parsed it (yet)"
        states = {r["dag_run_id"]: r["state"] for r in api.runs(name, state=["queued", "running"])}
        for run_id in sorted(set(flying) - set(states)):  # failed while ZooKeeper has its txid in flight?
            try:
                states[run_id] = api.run(name, run_id)["state"]
            except AirflowAPIError as exc:
                if exc.status != 404:  # a run deleted from Airflow: its state is unknown, said by its absence
                    raise
    except CliError as exc:
        return {}, str(exc)
    except AirflowAPIError as exc:
        return {}, f"Airflow's REST API refused: {shorten(str(exc), 200)}"
    except requests.RequestException as exc:
        return {}, f"Airflow's REST API did not answer ({type(exc).__name__}); {hints.how_to_start('airflow')}"
    return {"runs": states, "max_active_runs": dag.get("max_active_runs"), "paused": dag.get("is_paused")}, None


def cmd_status(args: argparse.Namespace) -> int:
    """Per topology: last committed txid, txids in flight, failures with their cascade, rejections. Exits 4 when a
    topology is halted, 3 (5) when its Redis is unreachable (refuses the login), 5 when several DAG files define
    it (which one Airflow loads, the recorded owner, which to keep), after printing what it could read; with
    several, the highest. With a topology, its DAG's queued and running runs come from Airflow's REST API (a run
    queued behind max_active_runs); an Airflow that cannot be read is said on stderr and changes no exit code."""
    defined = topologies(args)
    zookeeper = conn_id(args, "zookeeper", defined.get(args.topology))
    codes: list[int] = []
    with clients(redis_timeout=5) as using:
        in_zk = set(using.topology_ids(zookeeper))
        names = [args.topology] if args.topology else sorted(set(defined) | in_zk)
        report: list[dict[str, Any]] = []
        for name in names:
            if args.topology is None and name not in in_zk:  # every key of a row that ran: scripts read them all
                report.append({**topology_status(TopologyRecord(0, 0), [], name, None), "airflow_error": None,
                               "halted": None, "two_files": None, "never_ran": True})
                continue
            try:
                topo, records = read_snapshot(store_of(using, zookeeper, name, defined))
            except (ConfigError, FormatVersionError) as exc:  # one bad znode must not hide the other topologies
                if args.topology:
                    raise
                print(f"txdag status: warning: skipped topology {name!r}: {exc}", file=sys.stderr)
                continue
            flying = [r.run_id for r in in_flight(records)]
            seen, airflow_error = airflow_runs(name, flying) if args.topology else ({}, None)
            if airflow_error:
                print(f"txdag status: Airflow's run states of topology {name!r} unknown: {airflow_error}",
                      file=sys.stderr)
            row = topology_status(topo, records, name, rejection_count(args, name, defined.get(name), using, codes),
                                  **seen)
            row["airflow_error"] = airflow_error
            report.append({**row, "never_ran": False,
                           "halted": halted(defined[name], args) if name in defined else None,
                           "two_files": two_files_of(args, name, defined[name], store_of(using, zookeeper, name,
                                                                                          defined))
                           if name in defined else None})
            codes += [exits.REFUSED] if report[-1]["halted"] else []
            codes += [exits.CONFIG] if report[-1]["two_files"] else []
    emit(args, report[0] if args.topology else report, status_text)
    return max(codes, default=exits.OK)


def status_text(report: dict | list) -> str:
    """What an operator reads first comes first: a halt, then each failed txid with its ways out, then the
    figures and the txids in flight. Each part is a small function returning its lines (none: left out)."""
    if isinstance(report, list):
        return all_status_text(report)
    r = report
    parts = [two_files_lines(r.get("two_files")), halt_lines(r),
             *(failure_lines(r["topology"], f) for f in r["failed"]), stalled_lines(r), run_slots_lines(r),
             [summary_line(r)],
             in_flight_lines(r)]
    return "\n\n".join("\n".join(lines) for lines in parts if lines)


def all_status_text(report: list[dict[str, Any]]) -> str:
    """Every topology: the halts and the failed txids (one block each, named by topology), then the table."""
    if not report:
        return "no topologies in the DAG folder or in ZooKeeper"
    rows = [{**r, "in_flight": len(r["in_flight"]), "failed": sum(1 + len(f["cascade"]) for f in r["failed"]),
             "committed_txid": "never ran" if r.get("never_ran") else r["committed_txid"],
             "halted": "HALTED" if r.get("halted") else ""} for r in report]
    cols = ["topology", "committed_txid", "last_txid", "in_flight", "failed", "rejections", "halted"]
    halts = [two_files_lines(r["two_files"]) for r in report if r.get("two_files")]
    halts += [[f"{r['topology']} HALTED: {r['halted']}"] for r in report if r.get("halted")]
    failed = [failure_lines(r["topology"], f, named=True) for r in report for f in r["failed"]]
    stalls = [stalled_lines(r, named=True) for r in report if r.get("stalled")]
    heads = ["topology", "committed", "last txid", "in flight", "failed", "rejected", ""]
    return "\n\n".join("\n".join(lines) for lines in [*halts, *failed, *stalls, [table(rows, cols, heads)]])


def halt_lines(r: dict[str, Any]) -> list[str]:
    return [f"HALTED: {r['halted']}"] if r.get("halted") else []


def failure_lines(topology: str, f: dict[str, Any], named: bool = False) -> list[str]:
    """A failed txid: its txid, attempt, run and error's headline, the txids failed behind it, the ways out."""
    who = f"{topology}: " if named else ""
    lines = [f"{who}txid {f['txid']} FAILED (attempt {f['attempt']}, run {f['run_id']}): {f['headline']}"]
    if f["cascade"]:
        lines.append(f"  failed behind it: txid {', '.join(map(str, f['cascade']))}")
    return lines + ways_out_lines(f["ways_out"])


def ways_out_lines(ways: list[dict[str, str]]) -> list[str]:
    if len(ways) == 1:
        return [f"  way out: {ways[0]['when']}: {ways[0]['command']}"]
    return ["  ways out:", *(f"    {w['when']}: {w['command']}" for w in ways)]


def stalled_lines(r: dict[str, Any], named: bool = False) -> list[str]:
    """The head of the line stuck in one phase: what it waits on, since when, and ``txdag retry``."""
    who = f"{r['topology']} " if named else ""
    return [f"{who}STALLED: {advice}" for advice in r.get("stalled") or []]


def run_slots_lines(r: dict[str, Any]) -> list[str]:
    """Runs queued in Airflow, and behind which runs (``txdag.txid.slots``)."""
    return [f"QUEUED: {r['run_slots']['text']}"] if r.get("run_slots") else []


def summary_line(r: dict[str, Any]) -> str:
    rejected = r["rejections"] if r["rejections"] is not None else "?"
    return (f"topology {r['topology']}: committed up to txid {r['committed_txid']}, last txid {r['last_txid']}, "
            f"{len(r['in_flight'])} in flight, {rejected} rejected entries")


def in_flight_lines(r: dict[str, Any]) -> list[str]:
    if not r["in_flight"]:
        return []
    return ["in flight:", table(r["in_flight"], ["txid", "attempt", "phase", "waits_on", "for", "run_id"],
                                ["txid", "attempt", "phase", "waits on", "for", "run"])]


def cmd_show(args: argparse.Namespace) -> int:
    """One txid's record: batch, attempt, phase, run, failure and history."""
    defined = topologies(args)
    with clients() as using:
        store = store_of(using, conn_id(args, "zookeeper", defined.get(args.topology)), args.topology, defined)
        found = store.read_txid(args.txid)
        if found is None:
            topo, _ = store.read_topology()
            kept = store.list_txids()
            where = (f"it is not allocated yet (last txid {topo.last_txid})" if args.txid > topo.last_txid else
                     f"it was rotated out of ZooKeeper (keep_txids; kept: {kept[0]}..{kept[-1]})" if kept else
                     "no txid is kept")
            raise CliError(f"topology {args.topology!r} has no record of txid {args.txid}: {where}")
        record = found[0]
        committed = store.read_topology()[0].committed_txid
    root = record.failed_by or record.txid
    data = {"topology": args.topology, **txid_row(record, committed), "commit_begun": record.commit_begun,
            "ways_out": ways_out(args.topology, root, record.error) if record.status is TxStatus.FAILED else [],
            "history": [{"attempt": h.attempt, "status": h.status.value, "at": h.at, "error": h.error}
                        for h in record.history]}
    emit(args, data, show_text)
    return 0


def show_text(d: dict[str, Any]) -> str:
    """A failed txid leads with its headline and ways out; the whole error comes last, in its own section."""
    head = fields([("topology", d["topology"]), ("txid", d["txid"]), ("attempt", d["attempt"]),
                   ("phase", d["phase"]), ("run", d["run_id"]), ("batch", d["batch"]),
                   ("batch size", d["batch_size"]), ("updated", d["updated_at"]), ("failed by", d["failed_by"]),
                   ("error", d.get("headline"))])
    history = [{**h, "error": headline(h["error"]) if h["error"] else None} for h in d["history"]]
    parts = [show_failure_lines(d), [head], ["history:", table(history, ["attempt", "status", "at", "error"])]]
    if d["error"] and d["error"].strip() != d.get("headline"):
        parts.append(["full error:", d["error"]])
    return "\n\n".join("\n".join(lines) for lines in parts if lines)


def show_failure_lines(d: dict[str, Any]) -> list[str]:
    if d["phase"] != "failed":
        return []
    behind = f" behind txid {d['failed_by']}" if d["failed_by"] not in (None, d["txid"]) else ""
    return [f"txid {d['txid']} FAILED{behind} (attempt {d['attempt']}, run {d['run_id']}): {d['headline']}",
            *ways_out_lines(d["ways_out"])]


def cmd_rejections(args: argparse.Namespace) -> int:
    """The source entries the topology rejected (``txdag:rejected:{topology}``), newest first, with the reason."""
    from txdag.commit.rejections import read_rejections, rejections_key

    defined = topologies(args)
    if args.topology not in defined and not args.redis_conn_id:
        raise CliError(f"topology {args.topology!r} is not defined in the DAG folder {dags_folder(args)} (it defines "
                       f"{', '.join(sorted(defined)) or 'none'}), so its Redis connection is unknown: check the name, "
                       "give the DAG folder with --dags, or the connection with --redis-conn-id")
    with clients(redis_timeout=10) as using:
        client = using.redis(conn_id(args, "redis", defined.get(args.topology)))
        total, rows = read_rejections(client, args.topology, args.limit)
    data = {"topology": args.topology, "key": rejections_key(args.topology), "total": total, "rejections": rows}
    emit(args, data, rejections_text)
    return 0


def rejections_text(d: dict[str, Any]) -> str:
    head = f"topology {d['topology']}: {d['total']} rejected entries (Redis hash {d['key']})"
    rows = d["rejections"]
    if not rows:
        return head
    shown = f", the newest {len(rows)}" if len(rows) < d["total"] else ""
    columns = ["id", "txid", "attempt"] + (["partition"] if any(r["partition"] for r in rows) else [])
    columns += ["at", "reason"]
    return f"{head}{shown}:\n{table(rows, columns, [c if c != 'at' else 'when' for c in columns])}"

"""``txdag topology owner|accept``: which definition owns a topology, and changing it on purpose.

A topology's ZooKeeper record keeps the definition that owns it (its DAG file and fingerprint,
``txdag.protocol.ownership``); a coordinate task whose definition differs is refused, naming what changed.
``accept`` records the DAG folder's definition as the owner, so that the changed topology runs again.
"""

from __future__ import annotations

import argparse
from typing import Any

from txdag.cli.common import CliError, clients, conn_id, dags_folder, emit, fields, topology, topology_arg


def add_cli(sub: Any, common: list[argparse.ArgumentParser]) -> None:
    """``txdag topology owner|accept TOPOLOGY`` on the txdag command's subparsers."""
    p = sub.add_parser("topology", help="the definition that owns a topology; accept a change made on purpose")
    topo_sub = p.add_subparsers(dest="topology_command", required=True, metavar="owner|accept")
    o = topo_sub.add_parser("owner", parents=common, help="the definition recorded as the owner, and how the DAG "
                            "folder's differs from it")
    o.add_argument("topology", type=topology_arg)
    o.set_defaults(func=cmd_owner)
    a = topo_sub.add_parser("accept", parents=common, help="record the DAG folder's definition as the owner (after "
                            "changing the topology on purpose)")
    a.add_argument("topology", type=topology_arg)
    a.add_argument("--dry-run", action="store_true", help="show what would be accepted without recording it")
    a.set_defaults(func=cmd_accept)


def folder_owner(args: argparse.Namespace, name: str) -> tuple[Any, Any, list[str]]:
    """The DAG folder's definition of ``name`` as an Owner (the first file's, as Airflow loads it), and the files
    that define it (more than one: the later ones fail to import)."""
    from txdag.airflow.rendering import defining_in
    from txdag.topology.owner import Owner

    definition = topology(args, name)
    files = defining_in(dags_folder(args), name)
    return definition, Owner.of(definition, files[0] if files else None), [str(f) for f in files]


def owner_report(args: argparse.Namespace, store: Any, owner: Any, files: list[str]) -> dict[str, Any]:
    """What ``owner`` prints: the recorded owner (none: the topology never ran, or has none yet), the DAG folder's
    definition, and the changes between them."""
    from txdag.topology.owner import as_now, changes, same_definition

    ran = store.client.exists(store.path) is not None
    got = store.read_owner() if ran else None
    recorded = got[0] if got else None
    return {
        "topology": args.topology, "ran": ran,
        "owner": None if recorded is None else {"dag_file": recorded.dag_file, "fingerprint": recorded.fingerprint,
                                                "how": recorded.how, "since": recorded.since},
        "dag_folder": {"dag_file": owner.dag_file, "fingerprint": owner.fingerprint},
        "changes": [] if recorded is None else changes(as_now(recorded.definition), owner.definition),
        "same": recorded is not None and same_definition(recorded.definition, recorded.fingerprint, owner),
        "defined_by": files,
    }


def two_files_of(args: argparse.Namespace, name: str, definition: Any, store: Any) -> dict[str, Any] | None:
    """When several DAG files of the DAG folder define ``name``: which one Airflow loads, the recorded owner, and
    which to keep (txdag.topology.owner.two_files); else None."""
    from txdag.airflow.rendering import defining_in
    from txdag.topology.owner import AIRFLOW_SAYS, PATH_ORDER, dag_file_label, two_files

    files = [dag_file_label(f, definition.project_dir) or str(f) for f in defining_in(dags_folder(args), name)]
    if len(files) < 2:
        return None
    fileloc = airflow_fileloc(name)
    said = dag_file_label(fileloc, definition.project_dir) if fileloc else None
    loaded, seen = (said, AIRFLOW_SAYS) if said in files else (files[0], PATH_ORDER)
    got = store.read_owner() if store.client.exists(store.path) else None
    return two_files(name, loaded, [f for f in files if f != loaded], got[0].dag_file if got else None, seen)


def airflow_fileloc(dag_id: str) -> str | None:
    """The file Airflow loaded ``dag_id`` from (``GET /api/v2/dags/{dag_id}``'s ``fileloc``), or None when its API
    cannot say (not configured, not answering, the DAG not parsed yet): then the first file in path order is the
    one Airflow loads, since the parse-time check fails the others."""
    import requests

    from txdag.airflow.api import AirflowAPIError, api_from_env

    try:
        dag = api_from_env(timeout=5).dag(dag_id)
    except (AirflowAPIError, RuntimeError, requests.RequestException, ValueError, KeyError):
        return None
    return dag.get("fileloc") if isinstance(dag, dict) else None


def two_files_lines(found: dict[str, Any] | None) -> list[str]:
    """How ``status`` and ``topology owner`` lead with a topology defined by several DAG files."""
    if not found:
        return []
    return [f"TWO DAG FILES: {found['message']}. Keep one:", *(f"  {way}" for way in found["ways_out"])]


def cmd_owner(args: argparse.Namespace) -> int:
    definition = topology(args, args.topology)
    with clients() as using:
        store = using.store(args.topology, conn_id(args, "zookeeper", definition))  # before Airflow is imported
        _, owner, files = folder_owner(args, args.topology)  # (defining_in): a shell without it gets its error first
        report = owner_report(args, store, owner, files)
        report["two_files"] = two_files_of(args, args.topology, definition, store)
    emit(args, report, owner_text)
    return 0


def owner_text(r: dict[str, Any]) -> str:
    owner, folder = r["owner"], r["dag_folder"]
    here = f"{folder['dag_file'] or 'DAG file unknown'} (fingerprint {folder['fingerprint']})"
    if owner is None:
        why = "it has not run yet" if not r["ran"] else "none recorded yet"
        return fields([("topology", r["topology"]), ("owner", f"- ({why}: its next coordinate adopts the definition "
                                                              "it runs)"), ("DAG folder", here), *_copies(r)])
    verdict = "the same definition" if r["same"] else "differs: " + "; ".join(r["changes"] or ["changed"])
    lines = [("topology", r["topology"]),
             ("owner", f"{owner['dag_file'] or 'DAG file unknown'} (fingerprint {owner['fingerprint']}, "
                       f"{owner['how']} {owner['since']})"),
             ("DAG folder", f"{here}: {verdict}")]
    if not r["same"]:
        lines.append(("", f"coordinate tasks of this definition are refused; txdag topology accept {r['topology']} "
                          "records it if the change is on purpose"))
    return fields(lines + _copies(r))


def _copies(r: dict[str, Any]) -> list[tuple[str, str]]:
    found = r.get("two_files")
    if not found:
        return []
    return [("loaded by Airflow", f"{found['loaded']} ({found['seen']}: its definition runs)"),
            ("also defined by", f"{', '.join(found['others'])} (fails to import)"),
            ("", two_files_lines(found)[0]), *(("", way) for way in found["ways_out"])]


def cmd_accept(args: argparse.Namespace) -> int:
    """Record the DAG folder's definition as the topology's owner; the refused runs consumed no txid."""
    from txdag.protocol.ownership import accept

    definition, owner, files = folder_owner(args, args.topology)
    if len(files) > 1:
        raise CliError(f"topology {args.topology!r} is defined by {len(files)} DAG files ({', '.join(files)}): a "
                       "topology has one DAG file; delete the copy, or give it its own topology_id, then run this "
                       "again")
    with clients() as using:
        store = using.store(args.topology, conn_id(args, "zookeeper", definition))
        report = owner_report(args, store, owner, files)
        moved = report["owner"] is not None and report["owner"]["dag_file"] != owner.dag_file
        if not report["ran"]:
            report["action"] = "nothing to accept"
        elif report["same"] and not moved:
            report["action"] = "unchanged"
        elif args.dry_run:
            report["action"] = "would accept"
        else:
            accept(store, owner)
            report["action"] = "accepted"
    emit(args, report, accept_text)
    return 0


def accept_text(r: dict[str, Any]) -> str:
    name, folder, action = r["topology"], r["dag_folder"], r["action"]
    what = f"{folder['dag_file'] or 'DAG file unknown'} (fingerprint {folder['fingerprint']})"
    if action == "nothing to accept":
        return (f"topology {name} has not run yet: nothing to accept (its first coordinate adopts the definition "
                f"it runs)")
    if action == "unchanged":
        return f"topology {name} is owned by {what} already: nothing to accept"
    was = r["owner"]
    change = "; ".join(r["changes"]) or (f"DAG file {was['dag_file']} -> {folder['dag_file']}" if was else "")
    text = f"{'would accept' if action == 'would accept' else 'accepted'} {what} as the owner of topology {name}"
    text += f" (was {was['fingerprint']}: {change})" if was else ""
    if action == "accepted":
        text += ("\ntxids in flight go on with it (their waiting process and commit tasks, at their next check); the "
                 "refused runs consumed no txid: clear them, or let the next scheduled run start")
    return text

"""``txdag accept-missing TOPOLOGY TXID``: accept a hole in the source on purpose, so that a failed txid goes on.

The ids of the txid's batch missing in the source now are recorded in its metadata in ZooKeeper
(``txdag.txid.holes``); every replay of the txid then reads its batch without them and records each as a rejected
entry of the txid (``txdag rejections``). Like ``txdag reset``, it only says what it would do until given
``--confirm``; ``--replay`` then replays the txid and every later one (``txdag replay``). Refused where it would
break the guarantee: a committed txid, a txid not failed, a source whose batch is not a list of ids.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from txdag.cli import exits
from txdag.cli.common import (
    CliError,
    clients,
    conn_id,
    emit,
    result_stream,
    store_of,
    topology,
    topology_arg,
    txid_arg,
)

# Why a source kind cannot have a hole accepted (the tweets source can): what the refusal says, with the ways out.
REFUSALS = {
    "streams": "a Redis Streams batch is an id range per partition, and entries lost from it cannot be listed one "
               "by one, so a replay could not read the same batch without them",
}


def add_cli(sub: Any, common: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("accept-missing", parents=common, help="accept the entries missing from a failed txid's batch "
                       "as rejected entries, so that the topology goes on (tweets source)")
    p.add_argument("topology", type=topology_arg)
    p.add_argument("txid", type=txid_arg, help="the failed txid (txdag status TOPOLOGY leads with it)")
    p.add_argument("--confirm", action="store_true", help="record it (without: say which ids would be accepted)")
    p.add_argument("--replay", action="store_true", help="then replay the txid and every later one (txdag replay)")
    p.set_defaults(func=cmd_accept_missing)


def cmd_accept_missing(args: argparse.Namespace) -> int:
    from txdag.cli.ops import airflow_api, clear_runs, replay_text
    from txdag.txid.holes import accept_missing
    from txdag.txid.report import replay_targets

    definition = topology(args, args.topology)
    why = REFUSALS.get(definition.source.type)
    if why is not None:
        raise CliError(f"topology {args.topology!r} reads a {definition.source.type} source: {why}. Ways out: restore "
                       f"the entries, then `txdag replay {args.topology} --from {args.txid}`; or start over with "
                       f"`txdag reset {args.topology} --confirm`", exits.REFUSED)
    at = datetime.now(UTC).isoformat(timespec="seconds")
    replaying = args.confirm and args.replay
    api = airflow_api() if replaying else None  # a login to fix is refused before anything is recorded
    with clients() as using:
        store = store_of(using, conn_id(args, "zookeeper", definition), args.topology, {args.topology})
        found = accept_missing(store, using.spout(definition), args.txid, at, record=args.confirm)
        targets = replay_targets(store, found.replay_from) if replaying else []
        data: dict[str, Any] = {"topology": args.topology, "txid": found.txid, "attempt": found.attempt,
                                "run_id": found.run_id, "missing": found.missing, "at": at,
                                "confirmed": found.recorded, "replay_from": found.replay_from,
                                "replay_requested": args.replay, "replay": None}
        if not args.json:
            emit(args, data, accept_text)
        if replaying:  # under the replay lock, with ZooKeeper still open (txdag.txid.replays)
            args.dry_run = False
            data["replay"] = clear_runs(args, targets, api, store=store)
    if args.json:
        emit(args, data, accept_text)
    elif replaying:
        print(replay_text(data["replay"]), file=result_stream())
    return 0 if found.recorded else 1


def accept_text(d: dict[str, Any]) -> str:
    ids = ", ".join(map(str, d["missing"][:20])) + (f" and {len(d['missing']) - 20} more" if len(d["missing"]) > 20
                                                     else "")
    what = f"{len(d['missing'])} id(s) of txid {d['txid']}'s batch missing in the source ({ids})"
    if not d["confirmed"]:
        return (f"would accept {what} as rejected entries of txid {d['txid']} of topology {d['topology']}; nothing "
                "recorded: add --confirm to do it")
    first, name = d["replay_from"], d["topology"]
    behind = "" if first == d["txid"] else (f" (the lowest failed txid: txid {first} failed before txid {d['txid']}; "
                                            f"fix its cause first, see `txdag show {name} {first}`)")
    then = f"replaying txid {first} and every later txid{behind}:" if d["replay_requested"] else \
        f"next: txdag replay {name} --from {first}{behind}"
    return (f"accepted {what} as missing at {d['at']}: every replay of txid {d['txid']} reads its batch without "
            f"them and records each as a rejected entry (txdag rejections {d['topology']})\n{then}")

"""One jepsen run: start the harness's own stack (recov.runner.start: Redis, ZooKeeper, PostgreSQL, Airflow on the
ports given), then each schedule in turn; whatever happens, resume what a pause left stopped and stop what was started.

A schedule: read the base (the committed txid, the tweets it covers, the states), start the recorder, the workload
and the nemesis; once the schedule's time is up and every fault has healed, stop appending, drain (trigger until the
committed txids cover every tweet, replaying a stuck pipeline through the REST API after ``drain`` s, as the
recovery benchmark does), let the runs finish, take the final readings and check the history.
"""

from __future__ import annotations

import json
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

from recov.lab import Lab, Topology, patiently
from recov.runner import start
from recov.trial import _repair, _settle
from tput import dags
from tput.services import BenchError, Ports, Stack, listening

from jepsen import checker, interrupts
from jepsen.nemesis import Nemesis
from jepsen.network import Network, attach
from jepsen.recorder import FORMAT_VERSION, Recorder, snapshot
from jepsen.schedule import LINK_NODES, make_schedule, overlapping
from jepsen.workload import Workload, covered


def variant(args: Namespace) -> dags.Variant:
    return dags.Variant("jepsen", args.redis_db, args.batch, 2, args.spark, dags.shipped().commit_poke_interval)


def link_nodes(args: Namespace) -> tuple[str, ...]:
    """The nodes a cut's link is drawn from: Spark Connect's server only when the variant runs one."""
    return LINK_NODES + (("connect",) if variant(args).mode == "connect" else ())


def run(args: Namespace, out: Path) -> dict[str, Any]:
    stack = Stack(Ports.from_env(), out / "logs")
    stack.airflow_home = Path(args.airflow_home)
    network: Network | None = attach(stack) if getattr(args, "network", False) else None
    summary: dict[str, Any] = {"schedules": [], "faults": {}, "violations": 0, "failing_seeds": []}
    lab, nemeses = None, []
    tweets: dict[int, str] = {}
    try:
        refuse_taken(stack)
        lab = start(stack, [variant(args)], args.flush)
        topo = Topology(variant(args))
        for i in range(args.schedules):
            faults = make_schedule(args.seed + i, args.duration, args.kinds, link_nodes(args))
            nemesis = Nemesis(stack, faults, args.seed + i, network)
            nemeses.append(nemesis)
            result = run_schedule(lab, topo, nemesis, args, args.seed + i, tweets, out)
            summary["schedules"].append(result)
            for kind, n in result["faults"].items():
                summary["faults"][kind] = summary["faults"].get(kind, 0) + n
            summary["violations"] += len(result["violations"])
            if result["violations"]:
                summary["failing_seeds"].append(args.seed + i)
            if "did not help" in result["stuck"]:
                print(f"jepsen: the pipeline stays stuck after schedule {args.seed + i}: no more schedules")
                break
    finally:
        interrupts.shield()  # a second signal must not cut short the resuming and the stopping below
        for nemesis in nemeses:
            if resumed := nemesis.heal_all():
                print(f"jepsen: SIGCONT to {resumed}, still stopped")
        if lab is not None:
            lab.close()
        try:
            stack.clean_up([args.redis_db], keep_data=False)
        except Exception as exc:  # noqa: BLE001 - the services' stop comes next all the same
            print(f"jepsen: clean-up: {exc}")
        for problem in stack.stop():
            print(f"jepsen: could not stop {problem}")
    return summary


def refuse_taken(stack: Stack) -> None:
    """The harness pauses and kills only servers it started: one already listening on its ports (an earlier run
    killed before its clean-up, another run) would be used, and left out of the faults."""
    h, p = stack.hosts, stack.ports
    taken = [f"{name} {host}:{port}" for name, host, port in [("Redis", h.redis, p.redis), ("ZooKeeper", h.zk, p.zk),
             ("PostgreSQL", h.pg, p.pg), ("Airflow", h.airflow, p.airflow),
             ("Spark Connect", h.spark_connect, p.spark_connect)] if listening(port, host)]
    if taken:
        raise BenchError(f"already listening: {', '.join(taken)}. Another jepsen run, or one killed before its "
                         "clean-up: stop its servers (their scripts' stop, with the same TXDAG_*_PORT), or give this "
                         "run other ports (TXDAG_REDIS_PORT, TXDAG_ZK_PORT, ...)")


def run_schedule(lab: Lab, topo: Topology, nemesis: Nemesis, args: Namespace, seed: int, tweets: dict[int, str],
                 out: Path) -> dict[str, Any]:
    began = time.time()
    print(f"jepsen: schedule seed {seed}: {len(nemesis.faults)} faults ({overlapping(nemesis.faults)} overlapping): "
          + ", ".join(f"{f.kind}@{f.at:g}s" + (f"/{f.hold:g}s" if f.hold else "") for f in nemesis.faults), flush=True)
    base = read_base(lab, topo)
    committed, covers = base["committed"], base["covered"]
    recorder, workload = Recorder(lab, topo), Workload(lab, topo, args.batch, seed * 1000, tweets)
    recorder.start()
    workload.start()
    try:
        nemesis.run(began)
        nemesis.join()
        time.sleep(max(0.0, began + args.duration - time.time()))
        workload.appending.clear()
        healed_at = max((f["healed"] for f in nemesis.injected if not f.get("skipped")), default=None)
        stuck = drain(lab, topo, workload, args.drain)
        workload.stop()
        states = _settle(lab, topo, workload.runs)
        recorder.stop()
    except BaseException:  # an interrupt: quiet them (not waited for) before the clean-up stops the servers
        workload.stop(wait=False)
        recorder.stop(wait=False)
        raise
    recorder.read_zk(since=committed)
    with lab.redis(topo) as client:
        final_t0 = time.time()
        final = patiently("reading the states", lambda: snapshot(client, topo.variant.prefix))
        final_at = [final_t0, time.time()]
    history = {"v": FORMAT_VERSION, "seed": seed, "duration": args.duration, "bound": args.bound,
               "schedule": [f.to_json() for f in nemesis.faults], "injected": sorted(nemesis.injected,
               key=lambda f: f["at"]), "base": base,
               "tweets": {"first": covers + 1, "texts": [tweets[i] for i in sorted(tweets) if i > covers]},
               "txids": {k: v for k, v in recorder.txids.items() if int(k) > committed},
               "committed": recorder.committed, "samples": recorder.samples, "final": final, "final_at": final_at,
               "healed_at": healed_at, "began": began, "ended": time.time(), "stuck": stuck, "run_states": states,
               "recorder_errors": recorder.errors}
    try:
        violations = checker.check(history)
    except Exception:
        (out / f"seed-{seed}.json").write_text(json.dumps(history))  # a checker's bug: keep what it failed on
        raise
    result = {"seed": seed, "seconds": round(time.time() - began), "faults": _count(nemesis.injected),
              "skipped": [f["kind"] for f in nemesis.injected if f.get("skipped")],
              "not_ours": [f"{f['kind']}: {f['note']}" for f in nemesis.injected if f.get("not_ours")],
              "txids": len(history["txids"]), "samples": len(recorder.samples),
              "recovery_s": checker.recovery_seconds(history), "stuck": stuck,
              "violations": [v.to_json() for v in violations]}
    print(f"jepsen: schedule seed {seed}: {result['seconds']} s, {result['txids']} txids, {result['samples']} "
          f"samples, recovered {result['recovery_s']} s after the last heal, {len(violations)} violations"
          + (f" (stuck: {stuck})" if stuck else ""), flush=True)
    for v in violations[:10]:
        print(f"jepsen:   VIOLATION {v.kind}: {v.message[:400]}", flush=True)
    if violations:
        path = out / f"seed-{seed}.json"
        path.write_text(json.dumps(history))
        print(f"jepsen:   history in {path}; replay with --seed {seed} --schedules 1 --duration {args.duration:g}")
    return result


def read_base(lab: Lab, topo: Topology) -> dict[str, Any]:
    """The committed txid, the tweets it covers and the states, as of one commit: read again until the committed
    txid is the same before and after the states and no field holds a later txid (a run of the previous schedule
    may still be committing)."""
    for _ in range(120):
        committed, covers = patiently("reading the base", lambda: covered(lab, topo))
        with lab.redis(topo) as client:
            states = patiently("reading the states", lambda: snapshot(client, topo.variant.prefix))
        again = patiently("reading the base", lambda: covered(lab, topo))[0]
        if again == committed and all(x <= committed for fields in states.values() for _, x in fields.values()):
            return {"committed": committed, "covered": covers, "states": states}
        time.sleep(1)
    raise BenchError(f"{topo.dag}: the committed txid did not hold still for one reading of the states in 2 min")


def drain(lab: Lab, topo: Topology, workload: Workload, timeout: float) -> str:
    """Waits until the committed txids cover every tweet appended; past ``timeout`` s replays from the first
    uncommitted txid (recov.trial's repair, as an operator would) and waits as long again, so that the states are
    checked once drained (the liveness check says the pipeline needed the replay). Returns "" or what it had to do."""
    if drained(lab, topo, workload, timeout):
        return ""
    store = lab.store(topo)
    topology = store.read_topology()[0]
    txids = list(range(topology.committed_txid + 1, topology.last_txid + 1))
    try:
        repaired = "drain timed out: " + _repair(lab, topo, txids, timeout)
    except BenchError as exc:
        return f"drain timed out, a replay did not help: {exc}"
    if not drained(lab, topo, workload, timeout):
        return f"{repaired}; it did not help: the commits do not cover every tweet {timeout:g} s after it"
    return repaired


def drained(lab: Lab, topo: Topology, workload: Workload, timeout: float) -> bool:
    """Whether the committed txids cover every tweet appended within ``timeout`` s (the workload triggers the
    runs)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if patiently("reading the committed txid", lambda: covered(lab, topo))[1] >= max(workload.tweets, default=0):
            return True
        time.sleep(2)
    return False


def _count(injected: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in injected:
        if not f.get("skipped"):
            counts[f["kind"]] = counts.get(f["kind"], 0) + 1
    return counts

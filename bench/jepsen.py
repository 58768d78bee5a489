"""txdag's fault harness, Jepsen-style (issue 36 item 5: pauses, kills and network cuts).

    .venv/bin/python bench/jepsen.py --quick                       # 2 schedules of 180 s
    .venv/bin/python bench/jepsen.py --schedules 50 --seed 1000    # the long run
    .venv/bin/python bench/jepsen.py --seed 1003 --schedules 1 --duration 240   # replay a failing schedule
    .venv/bin/python bench/jepsen.py --check bench/results/jepsen-.../seed-1003.json  # check a kept history again
    .venv/bin/python bench/jepsen.py --quick --faults cut,kill-task   # only these kinds; --no-network: no cuts

A copy of dags/tweets_analytics.py (no schedule, two txids in flight, --spark connect or submit) runs through the real
Airflow path (scripts/airflow.sh: LocalExecutor, PostgreSQL) on servers of the harness's own. Per schedule (seed S+i),
while a producer appends tweets and triggers runs through the REST API, the faults drawn from the seed
(jepsen/schedule.py) overlap: SIGSTOP then SIGCONT after 1-60 s of the Redis server, the ZooKeeper server, the
scheduler, the triggerer and the Spark Connect server; SIGKILL of a task process, of a task's executor worker with the
task's tree, of the scheduler's or the triggerer's session (airflow.sh crash; restarted 1-60 s later), of the Connect
server (started again at once) or, in submit mode, of a task's Spark driver; with the network (the default; root and
`ip netns`), cuts of the link between two of Redis, ZooKeeper, Airflow (and Spark Connect when it runs), both ways or
one way, healed after 1-60 s. Each of those runs in a network namespace of its own on 127.81.0.x, the harness in
txj-harness (jepsen/network.py): this process builds them, runs itself again inside txj-harness, and deletes them
after. A recorder keeps every txid's record from ZooKeeper, the committed txid over time, and the states with their
per-field txids sampled over time; the checker (jepsen/checker.py) verifies the states against the ground truth, the
commit order, no double commit, no stale write visible in any sample, and a commit within --bound s after the last
fault healed. A failing schedule's history goes to --out as seed-S.json.

Ports: TXDAG_REDIS_PORT, TXDAG_ZK_PORT, TXDAG_PG_PORT, TXDAG_AIRFLOW_PORT, TXDAG_SPARK_CONNECT_PORT (defaults 6481,
2281, 5481, 8881, 15481: not the project's usual ones, since it SIGSTOPs them). It pauses only servers it started.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
PORTS = {"TXDAG_REDIS_PORT": "6481", "TXDAG_ZK_PORT": "2281", "TXDAG_PG_PORT": "5481", "TXDAG_AIRFLOW_PORT": "8881",
         "TXDAG_SPARK_CONNECT_PORT": "15481", "TXDAG_KAFKA_PORT": "9481"}
INSIDE = "TXDAG_JEPSEN_NETNS"  # set for the harness run again inside its namespace
SHARED = {"6391", "2191", "5491", "8791", "8792", "9391"}  # the project's usual ports: other work's servers


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="\n".join(__doc__.splitlines()[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--schedules", type=int, default=10, help="schedules to run (default 10)")
    p.add_argument("--seed", type=int, default=None, help="the first schedule's seed; schedule i has seed+i "
                   "(default: from the clock, printed)")
    p.add_argument("--duration", type=float, default=300.0, help="seconds of faults and load per schedule (300)")
    p.add_argument("--quick", action="store_true", help="2 schedules of 180 s, batches of 50 (unless given)")
    p.add_argument("--spark", choices=("connect", "submit"), default="connect", help="the topology's spark_mode: "
                   "connect (a Spark Connect server of the harness's own, paused and killed too; default) or submit "
                   "(each task's own spark-submit driver, killed too)")
    p.add_argument("--batch", type=int, default=100, help="tweets appended per run triggered (100)")
    p.add_argument("--bound", type=float, default=240.0, help="seconds after the last fault healed by which a commit "
                   "must come (240)")
    p.add_argument("--drain", type=float, default=600.0, help="seconds after a schedule for the commits to cover "
                   "every tweet before a replay through the REST API (600)")
    p.add_argument("--redis-db", type=int, default=1, help="the Redis database of the topology (1)")
    p.add_argument("--flush", action="store_true", help="empty that database first if it holds keys")
    p.add_argument("--check", default=None, metavar="HISTORY_JSON", help="run nothing: check a kept history again "
                   "(after a change to the checker) and print its violations")
    p.add_argument("--no-network", dest="network", action="store_false", help="no network namespaces and no cuts: "
                   "every server on 127.0.0.1, as before (needs no root)")
    p.add_argument("--faults", default=None, metavar="KIND,...", help="the fault kinds to draw from (default: "
                   "every pause and kill that hits something in the --spark mode, and cut unless --no-network): "
                   "pause-redis, pause-zookeeper, pause-scheduler, pause-triggerer, pause-connect, kill-driver, "
                   "kill-task, kill-worker, kill-connect, kill-scheduler, kill-triggerer, cut")
    p.add_argument("--out", default=None, help="output folder (default bench/results/jepsen-<timestamp>/)")
    args = p.parse_args(argv)
    if args.check:  # runs nothing: the run's options do not matter
        return args
    given = argv if argv is not None else sys.argv
    if args.quick:
        args.schedules = 2 if "--schedules" not in given else args.schedules
        args.duration = 180.0 if "--duration" not in given else args.duration
        args.batch = 50 if "--batch" not in given else args.batch
    from jepsen.schedule import CUT, KINDS, LINK_NODES, kinds_for, make_schedule

    args.kinds = tuple(args.faults.split(",")) if args.faults else kinds_for(args.spark, args.network)
    if unknown := set(args.kinds) - {*KINDS, CUT}:
        p.error(f"unknown fault kinds {sorted(unknown)}: use some of {', '.join(KINDS)}, {CUT}")
    if CUT in args.kinds and not args.network:
        p.error("cuts need the network namespaces: leave out --no-network, or cut from --faults")
    for name in ("schedules", "batch", "bound", "drain"):
        if getattr(args, name) <= 0:
            p.error(f"--{name} must be above 0, got {getattr(args, name):g}")
    if args.redis_db < 0:
        p.error(f"--redis-db must be 0 or above, got {args.redis_db}")
    args.seed = args.seed if args.seed is not None else int(time.time()) % 100000
    try:  # found here, not once the whole stack has started
        make_schedule(args.seed, args.duration, args.kinds, LINK_NODES)
    except ValueError as exc:
        p.error(f"--duration {args.duration:g}: {exc}")
    started = datetime.now(UTC)
    args.out = args.out or str(BENCH / "results" / f"jepsen-{started:%Y%m%d-%H%M%S}")
    for name, port in PORTS.items():
        os.environ.setdefault(name, port)
    taken = sorted(n for n in PORTS if os.environ[n] in SHARED)
    if taken:
        p.error(f"{', '.join(taken)} name the project's usual ports, whose servers other work uses: the harness "
                "SIGSTOPs its servers, give it ports of its own")
    args.airflow_home = str(BENCH.parent / ".run" / f"airflow-jepsen-{os.environ['TXDAG_AIRFLOW_PORT']}")
    return args


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(BENCH))
    args = parse_args(argv)
    if args.check:
        return check_again(Path(args.check))
    if args.network:
        from jepsen import network

        if os.environ.get(INSIDE) != network.netns("harness"):
            return in_namespaces(args, sys.argv[1:] if argv is None else argv)
        if network.current() != network.netns("harness"):
            raise SystemExit(f"jepsen: {INSIDE} is set but this process is not in {network.netns('harness')}")
    from jepsen import interrupts
    from jepsen.runner import run
    from tput.services import BenchError

    interrupts.arm()  # the runner's finally resumes and stops what it started
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    print(f"jepsen: seed {args.seed}, {args.schedules} schedules of {args.duration:g} s, out {out}", flush=True)
    try:
        summary = run(args, out)
    except BenchError as exc:
        print(f"jepsen: {exc}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt as exc:  # the runner's finally has stopped what it started
        print(f"jepsen: interrupted ({exc}) after {round(time.monotonic() - t0)} s: what it started is stopped; "
              "each schedule it finished is printed above", file=sys.stderr, flush=True)
        return 130
    summary["seconds"] = round(time.monotonic() - t0)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"jepsen: {len(summary['schedules'])} schedules run, faults {summary['faults']}, "
          f"{summary['violations']} violations" + (f" (seeds {summary['failing_seeds']})" if summary['violations']
          else "") + f", {summary['seconds']} s", flush=True)
    return 1 if summary["violations"] else 0


def in_namespaces(args: argparse.Namespace, argv: list[str]) -> int:
    """Holds and builds the namespaces, runs this harness again inside txj-harness (same seed and output folder; it
    holds the lock too, so that the namespaces stay held while it lives), forwards a SIGTERM or Ctrl-C to it (its
    finally stops the servers), says how it ended, then deletes the namespaces."""
    from jepsen import interrupts, network

    try:
        network.preflight()
        lock = network.claim()
    except network.NetworkError as exc:
        print(f"jepsen: {exc}", file=sys.stderr)
        return 2
    with lock:
        net, child = network.Network(), None
        interrupts.arm()
        try:
            net.create()
            print(f"jepsen: network namespaces up ({', '.join(f'{n} {network.address(n)}' for n in network.NODES)})",
                  flush=True)
            cmd = [*network.exec_prefix("harness"), sys.executable, str(Path(__file__).resolve()), *argv,
                   "--seed", str(args.seed), "--out", args.out]
            child = subprocess.Popen(cmd, env={**os.environ, **network.host_env(), INSIDE: network.netns("harness")},
                                     pass_fds=(lock.fileno(),))  # `ip netns exec` execs: the harness holds it
            network.note_holder(lock, f"harness pid {child.pid}")
            while True:
                try:
                    code = child.wait()
                    break
                except KeyboardInterrupt:
                    if child.poll() is None:
                        child.send_signal(signal.SIGTERM)
            return ended(code, child.pid, args.out)
        except network.NetworkError as exc:
            print(f"jepsen: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as exc:  # before the harness ran, or while this said how it ended
            print(f"jepsen: interrupted ({exc})", file=sys.stderr, flush=True)
            return 130
        finally:
            interrupts.shield()
            try:
                if left := net.stop_leftovers():
                    print(f"jepsen: SIGKILL to what the run did not stop in the namespaces: {left}", flush=True)
            except network.NetworkError as exc:
                print(f"jepsen: could not list what is left in the namespaces ({exc}); deleting them", flush=True)
            net.teardown()
            print("jepsen: network namespaces deleted", flush=True)


def ended(code: int, pid: int, out: str) -> int:
    """The inner harness's exit code; a signal that ended it is said (it could print nothing of it)."""
    if code < 0:
        print(f"jepsen: the harness in txj-harness (pid {pid}) was ended by {signal.Signals(-code).name}: the "
              f"schedule it was running is lost; those it finished are printed above (a failing one's history in "
              f"{out}); its servers are stopped below", flush=True)
        return 128 - code
    return code


def check_again(path: Path) -> int:
    from jepsen import checker
    from jepsen.recorder import FORMAT_VERSION

    try:
        history = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        print(f"jepsen: cannot read the history {path}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(history, dict) or history.get("v") != FORMAT_VERSION:
        print(f"jepsen: {path} is not a history this harness keeps (format v{FORMAT_VERSION}: a failing "
              "schedule's seed-S.json in the run's --out folder)", file=sys.stderr)
        return 2
    violations = checker.check(history)
    for v in violations:
        print(f"jepsen: VIOLATION {v.kind}: {v.message[:400]}")
    print(f"jepsen: seed {history['seed']}: {len(violations)} violations, recovered "
          f"{checker.recovery_seconds(history)} s after the last heal")
    return 1 if violations else 0


if __name__ == "__main__":
    raise SystemExit(main())

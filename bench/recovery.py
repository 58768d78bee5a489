"""txdag's recovery benchmark (issue 20): one fault at a time, seconds until the pipeline moves again.

    .venv/bin/python bench/recovery.py                        # every fault and phase (~40-60 min on 2 cores)
    .venv/bin/python bench/recovery.py --quick                # the process phase only, smaller batches
    .venv/bin/python bench/recovery.py --quick --settings airflow-defaults   # the same with Airflow's timeouts
    .venv/bin/python bench/recovery.py --faults driver,paused,scheduler --phases process
    .venv/bin/python bench/recovery.py --healthy 100000 --faults none    # only the healthy drain

A copy of dags/tweets_analytics.py (the shipped defaults; no schedule) runs through the real Airflow path of the
README (scripts/airflow.sh: LocalExecutor, PostgreSQL; spark-submit, and a warm Spark Connect server for the
Connect-server fault). Each trial appends two batches of tweets, triggers two runs through the REST API (two txids
in flight), waits until the first txid is in the phase asked (process: its Spark job running; commit: its commit
task running), injects one fault, and measures the seconds from the fault to the commit of that txid (in flight)
and of the next one, from the txids' commit times in ZooKeeper. Then it checks the counts in Redis against the
ground truth of every tweet loaded (txdag.analytics.tweets), the txid order, and the staging or claim keys left
behind by a stale attempt. A trial first runs without a fault, per Spark mode: the normal time the bound adds 30 s to.

Faults (--faults, comma-separated; phases: process, commit):
  driver          SIGKILL the Spark driver of the process task (spark-submit's JVM)
  task            SIGKILL the task process (the LocalExecutor worker's child running the operator)
  worker          SIGKILL the executor worker running the task's supervisor, with the task and its Spark driver
  scheduler       SIGKILL the scheduler's session (its executor and tasks); airflow.sh restart after --restart-after s
  triggerer, dag-processor, api-server   SIGKILL the component; airflow.sh restart after --restart-after s
  zookeeper       services.sh stop zk + start zk          redis     services.sh restart-redis
  postgres        postgres.sh stop + start (Airflow's metadata database)
  paused          SIGSTOP the process task's tree; after Airflow gave up on it and its retry committed, SIGCONT it:
                  the stale attempt must change nothing
  paused-early    the same, resumed as soon as the retry re-emitted the txid: the stale job ends while it runs
  connect-server  SIGKILL the Spark Connect server (warm mode); spark-connect.sh start

It starts Redis, ZooKeeper, PostgreSQL, Airflow (and Spark Connect) through scripts/ on the TXDAG_*_PORT ports,
reuses a server already answering, and stops only what it started. Prints a table, writes results.json and
chart.png to --out (default bench/results/recovery-<timestamp>/). Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
FAULT_NAMES = ("driver", "task", "worker", "scheduler", "triggerer", "dag-processor", "api-server", "zookeeper",
               "redis", "postgres", "paused", "paused-early", "connect-server")
QUICK_FAULTS = ("driver", "task", "scheduler", "zookeeper", "redis", "paused")
# Airflow 3.3's own defaults of the settings scripts/airflow.sh changes for recovery: --settings airflow-defaults
# puts them back (as AIRFLOW__SECTION__KEY, which win over airflow.cfg), to measure "before" on the same machine.
AIRFLOW_DEFAULTS = {"AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "300",
                    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "10",
                    "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "30",
                    "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "300",
                    "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "30"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="\n".join(__doc__.splitlines()[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--faults", default=",".join(FAULT_NAMES), help="comma-separated faults (default all); 'none' "
                   "runs only the no-fault trial")
    p.add_argument("--phases", default="process,commit", help="phases to hit, where a fault applies (default both)")
    p.add_argument("--quick", action="store_true", help=f"faults {','.join(QUICK_FAULTS)}, the process phase only, "
                   "batches of 50 (unless given)")
    p.add_argument("--batch", type=int, default=100, help="tweets per txid (default 100, the shipped topology's)")
    p.add_argument("--restart-after", type=float, default=10.0, help="seconds before a crashed Airflow component is "
                   "started again (default 10)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds after a fault for both txids to commit by "
                   "themselves before the trial replays them by hand (default 900)")
    p.add_argument("--healthy", type=int, default=0, metavar="TWEETS", help="also drain this many tweets without a "
                   "fault and count the tasks lost to a false timeout")
    p.add_argument("--healthy-batch", type=int, default=5000, help="the healthy drain's tweets per txid (5,000)")
    p.add_argument("--healthy-mode", choices=("submit", "connect"), default="submit", help="its Spark mode")
    p.add_argument("--airflow-env", action="append", default=[], metavar="KEY=VALUE",
                   help="extra environment of the Airflow components, e.g. AIRFLOW__SCHEDULER__...=...")
    p.add_argument("--settings", choices=("shipped", "airflow-defaults"), default="shipped", help="Airflow's "
                   "recovery settings: scripts/airflow.sh's (default) or Airflow's own defaults (the 'before')")
    p.add_argument("--label", default="", help="a name for this run in the table and chart (default: after for the "
                   "shipped settings, before for Airflow's defaults)")
    p.add_argument("--compare", default=None, metavar="RESULTS_JSON", help="an earlier run's results.json to show "
                   "beside this one")
    p.add_argument("--from-results", default=None, metavar="RESULTS_JSON", help="run nothing: print the table of an "
                   "earlier run (beside --compare's) and draw its chart again")
    p.add_argument("--chart", default=None, metavar="PNG", help="where the chart goes (default <out>/chart.png; "
                   "the note's is docs/recovery.png)")
    p.add_argument("--airflow-home", default=None, help="default $AIRFLOW_HOME, else .run/airflow-recovery-<port>")
    p.add_argument("--redis-db", type=int, default=1, help="first of the 3 Redis databases used (default 1..3)")
    p.add_argument("--flush", action="store_true", help="empty those databases first if they hold keys")
    p.add_argument("--keep-data", action="store_true", help="leave the Redis databases as the run left them")
    p.add_argument("--out", default=None, help="output folder (default bench/results/recovery-<timestamp>/)")
    args = p.parse_args(argv)
    given = argv if argv is not None else sys.argv
    if args.quick:
        args.faults = ",".join(QUICK_FAULTS) if "--faults" not in given else args.faults
        args.phases = "process" if "--phases" not in given else args.phases
        args.batch = 50 if "--batch" not in given else args.batch
    if args.settings == "airflow-defaults":
        args.airflow_env = [f"{k}={v}" for k, v in AIRFLOW_DEFAULTS.items()] + args.airflow_env
    args.label = args.label or ("before" if args.settings == "airflow-defaults" else "after")
    args.faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    args.phases = [x.strip() for x in args.phases.split(",") if x.strip()]
    unknown = set(args.faults) - set(FAULT_NAMES) - {"none"}
    if unknown:
        p.error(f"unknown fault(s) {sorted(unknown)}; use {','.join(FAULT_NAMES)}")
    if set(args.phases) - {"process", "commit"}:
        p.error("--phases takes process and/or commit")
    started = datetime.now(UTC)
    args.started = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    args.command = " ".join(given if argv is None else ["bench/recovery.py", *argv])
    port = os.environ.get("TXDAG_AIRFLOW_PORT", "8791")
    args.airflow_home = args.airflow_home or os.environ.get("AIRFLOW_HOME") or str(
        BENCH.parent / ".run" / f"airflow-recovery-{port}")
    args.out = args.out or str(BENCH / "results" / f"recovery-{started:%Y%m%d-%H%M%S}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(BENCH))
    from recov.runner import run

    out = Path(args.out)
    if args.from_results:
        from recov import report

        results = json.loads(Path(args.from_results).read_text())
        before = json.loads(Path(args.compare).read_text()) if args.compare else None
        report.print_table(results, before)
        report.write_chart(results, out, before, Path(args.chart) if args.chart else None)
        return 0
    (out / "logs").mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    code = run(args, out)
    print(f"recovery: {time.monotonic() - started:.0f} s in all; results in {out}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())

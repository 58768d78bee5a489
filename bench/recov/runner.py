"""One recovery benchmark run: start the stack, a no-fault trial per Spark mode, then each fault and phase asked for,
then (optionally) a healthy drain; always stop what was started; print the table, write results.json and chart.png
(also after a failure, with the trials done)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from argparse import Namespace
from pathlib import Path
from typing import Any

from tput import dags
from tput import report as tput_report
from tput.memory import machine_load
from tput.services import REPO, BenchError, Ports, Stack

from recov import report
from recov.faults import FAULTS
from recov.healthy import healthy_run
from recov.lab import Lab, Topology
from recov.trial import Plan, run_trial
from txdag.defaults import REDIS_CONN_ID, SPARK_CONNECT_CONN_ID, ZOOKEEPER_CONN_ID

SETTINGS = [("scheduler", "task_instance_heartbeat_timeout"),
            ("scheduler", "task_instance_heartbeat_timeout_detection_interval"),
            ("scheduler", "orphaned_tasks_check_interval"), ("scheduler", "scheduler_health_check_threshold"),
            ("scheduler", "scheduler_heartbeat_sec"), ("workers", "min_heartbeat_interval"),
            ("workers", "max_failed_heartbeats"), ("triggerer", "triggerer_health_check_threshold"),
            ("core", "parallelism")]


def trials(args: Namespace) -> list[tuple[str, str]]:
    """(fault, phase) pairs to run, in the order of FAULTS."""
    chosen = [f for f in FAULTS if f in args.faults]
    return [(f, p) for f in chosen for p in FAULTS[f].phases if p in args.phases]


def variants(args: Namespace) -> dict[str, dags.Variant]:
    poke = dags.shipped().commit_poke_interval
    v = {m: dags.Variant(f"recovery_{m}", args.redis_db + i, args.batch, 2, m, poke)
         for i, m in enumerate(("submit", "connect"))}
    v["healthy"] = dags.Variant("recovery_healthy", args.redis_db + 2, args.healthy_batch, 2, args.healthy_mode, poke)
    return v


def effective_settings(stack: Stack) -> dict[str, str]:
    """What the running Airflow uses for the settings that decide recovery (its config and environment)."""
    code = ("import json; from airflow.configuration import conf; print(json.dumps({f'{s}.{k}': conf.get(s, k) "
            f"for s, k in {SETTINGS!r}}}))")
    env = {**stack.airflow_env, "AIRFLOW_HOME": str(stack.airflow_home)}
    done = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-c", code], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else {"error": done.stderr[-500:]}


def topology_defaults() -> dict[str, Any]:
    t = dags.shipped()
    return {"retries": t.retries, "retry_delay_s": t.retry_delay.total_seconds(),
            "commit_poke_interval": t.commit_poke_interval}


def run(args: Namespace, out: Path) -> int:
    plan = Plan(args.batch, args.restart_after, args.timeout)
    todo = trials(args)
    roles = variants(args)
    modes = ["submit"] + (["connect"] if any(FAULTS[f].mode == "connect" for f, _ in todo) else [])
    chosen = [roles[m] for m in modes] + ([roles["healthy"]] if args.healthy else [])
    stack = Stack(Ports.from_env(), out / "logs", dict(kv.split("=", 1) for kv in args.airflow_env))
    stack.airflow_home = Path(args.airflow_home)
    results: dict[str, Any] = {"started": args.started, "label": args.label, "command": args.command,
                               "plan": vars(plan), "topology_defaults": topology_defaults(),
                               "load_start": machine_load(), "trials": []}
    code, lab = 0, None
    try:
        lab = start(stack, chosen, args.flush)
        results["airflow_settings"] = effective_settings(stack)
        print(f"recovery: Airflow settings {results['airflow_settings']}", flush=True)
        topos = {m: Topology(roles[m]) for m in modes}
        for mode in modes:
            results["trials"].append(run_trial(lab, topos[mode], None, "process", plan))
        broken: dict[str, str] = {}  # mode -> why its topology cannot go on (a trial that even a replay left stuck)
        for fault, phase in todo:
            mode = FAULTS[fault].mode
            if mode in broken:
                print(f"recovery: skipping {fault} during {phase}: {broken[mode]}", flush=True)
                continue
            try:
                results["trials"].append(run_trial(lab, topos[mode], FAULTS[fault], phase, plan))
            except BenchError as exc:
                broken[mode] = f"{fault} during {phase} left {topos[mode].dag} stuck: {exc}"
                results.setdefault("stuck", []).append(broken[mode])
                print(f"recovery: {broken[mode]}", flush=True)
            tput_report.write_json(results, out)  # as it goes: a long run stopped half-way keeps its trials
        if args.healthy:
            results["healthy"] = healthy_run(lab, Topology(roles["healthy"]), args.healthy, args.timeout * 4)
    except Exception as exc:  # noqa: BLE001 - report what was measured, stop the services, exit 1
        code = 1
        tput_report.record_failure(results, out, exc, "recovery")
    finally:
        results["load_end"] = machine_load()
        if lab is not None:
            lab.close()
        try:
            stack.clean_up([v.db for v in chosen], args.keep_data)
        except Exception as exc:  # noqa: BLE001
            print(f"recovery: clean-up: {exc}")
        for problem in stack.stop():
            print(f"recovery: could not stop {problem}")
    before = json.loads(Path(args.compare).read_text()) if args.compare else None
    print()
    results["table"] = report.print_table(results, before)
    if "healthy" in results:
        print(f"healthy run: {results['healthy']['summary']}")
    tput_report.write_json(results, out)
    report.write_chart(results, out, before, Path(args.chart) if args.chart else None)
    return code


def start(stack: Stack, chosen: list[dags.Variant], flush: bool) -> Lab:
    """Redis and ZooKeeper, empty databases, the DAG folder, the Redis user, Spark Connect (warm topologies) and
    Airflow; a Lab logged in to it."""
    stack.start_services()
    for v in chosen:
        with stack.admin(v.db) as client:
            if client.dbsize() and not flush:
                raise BenchError(f"Redis {stack.hosts.redis}:{stack.ports.redis} database {v.db} holds keys: pass "
                                 f"--flush to empty it, or --redis-db N for others")
            client.flushdb()
    shutil.rmtree(stack.airflow_home, ignore_errors=True)
    folder = stack.airflow_home / "dags"
    dags.write_folder(folder, chosen)
    from txdag.topology.topology import load_definitions

    stack.create_redis_user(list(load_definitions(folder)[0].values()))
    connections = {v.conn_id: stack.redis_connection(v.db) for v in chosen}
    connections.update({REDIS_CONN_ID: stack.redis_connection(0), ZOOKEEPER_CONN_ID: stack.zookeeper_connection(),
                        SPARK_CONNECT_CONN_ID: stack.spark_connect_connection()})
    if any(v.mode == "connect" for v in chosen):
        stack.start_spark_connect()
    print(f"recovery: starting Airflow (scripts/airflow.sh, AIRFLOW_HOME={stack.airflow_home})", flush=True)
    stack.start_airflow(folder, connections)
    lab = Lab(stack)
    for v in chosen:
        lab.api.wait_dag_parsed(v.topology_id, timeout=180)
        lab.api.unpause(v.topology_id)
    return lab

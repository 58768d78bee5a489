"""Every command a user is told about answers ``--help``: exit 0, a help naming the command, and nothing else.

The commands: the ``txdag`` console script of .venv and every subcommand and sub-subcommand of
``txdag.cli.main.build_parser()`` (walked, so a new one is covered without editing this file),
``python -m txdag.cli.main``, the two demos (``python scripts/demo_local.py``, ``python scripts/demo_airflow.py``),
each bench/ script, and each scripts/*.sh (demo.sh and test.sh included).

A help touches no service: every command runs with the addresses of Redis, ZooKeeper, PostgreSQL, Airflow's API
and Spark Connect (TXDAG_*_PORT, TXDAG_REDIS_URL, AIRFLOW_CONN_*, ...) pointing at ports of its own on which this
test listens without ever answering, and a connection that reaches one of them fails the command's test (a
closed port would only make a connecting help fail if it did not swallow the error). A script's help must also
install, start and create nothing: it runs from a copy of scripts/ in an empty directory (no .venv, no .run),
where the other scripts are stubs that record being called, with stubs of apt-get, sudo, redis-server,
redis-cli, java, pg_ctl, docker, pip, airflow, ... first on PATH; afterwards that directory must be unchanged.
So a script's help works on a fresh checkout, before scripts/setup.sh has built .venv.

The commands run in parallel threads (a module fixture); each test then checks one command's outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import PIPE, Popen, TimeoutExpired

import pytest

from txdag.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
TXDAG = ROOT / ".venv" / "bin" / "txdag"  # the console script `pip install -e .` wrote (pyproject [project.scripts])
PYTHON = sys.executable  # the .venv's python running the tests
TIMEOUT = 120
SERVICES = ("redis", "zookeeper", "postgres", "airflow", "spark_connect")
# Commands scripts might run; on PATH as stubs while a script answers --help.
STUBBED_COMMANDS = ("apt-get", "apt", "sudo", "dpkg", "redis-server", "redis-cli", "java", "zkServer.sh", "pg_ctl",
                    "initdb", "postgres", "psql", "runuser", "docker", "pip", "pip3", "python", "python3",
                    "python3.11", "airflow", "txdag", "spark-submit", "curl", "wget", "nc")
# bench/soak_worker.py is not a command: bench/soak.py starts it with positional JSON arguments (no argparse).
BENCH_NOT_COMMANDS = {"soak_worker.py": "a worker process of bench/soak.py, not a command"}


def subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every subcommand path under ``parser``, depth first (aliases once)."""
    found: list[tuple[str, ...]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    found += [(*path, name), *subcommands(sub, (*path, name))]
    return found


@dataclass(frozen=True)
class EntryPoint:
    id: str
    argv: tuple[str, ...]
    names: str  # the help's text must contain this
    script: str | None = None  # scripts/<name>.sh: run in a sandbox copy of scripts/


def entry_points() -> list[EntryPoint]:
    points = [EntryPoint("txdag --help", (str(TXDAG), "--help"), "usage: txdag")]
    points += [EntryPoint(f"txdag {' '.join(p)} --help", (str(TXDAG), *p, "--help"), f"usage: txdag {' '.join(p)}")
               for p in subcommands(build_parser())]
    points += [
        EntryPoint("python -m txdag.cli.main --help", (PYTHON, "-m", "txdag.cli.main", "--help"), "usage: txdag"),
    ]
    points += [EntryPoint(f"python scripts/{name} --help", (PYTHON, str(ROOT / "scripts" / name), "--help"), "demo")
               for name in ("demo_local.py", "demo_airflow.py")]
    points += [EntryPoint(f"python bench/{p.name} --help", (PYTHON, str(p), "--help"), f"usage: {p.name}")
               for p in sorted((ROOT / "bench").glob("*.py")) if p.name not in BENCH_NOT_COMMANDS]
    points += [EntryPoint(f"bash scripts/{p.name} --help", ("bash", f"scripts/{p.name}", "--help"),
                          f"scripts/{p.name}", script=p.name)
               for p in sorted((ROOT / "scripts").glob("*.sh"))]
    return points


ENTRY_POINTS = entry_points()


@dataclass
class Outcome:
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    connections: list[str] = field(default_factory=list)  # services whose address something connected to
    stub_calls: list[str] = field(default_factory=list)  # stubbed scripts and commands that ran
    changed: list[str] = field(default_factory=list)  # files created or changed in the sandbox


def listeners() -> dict[str, socket.socket]:
    """A listening socket per service on a free loopback port; nothing ever accepts on it during the run."""
    out = {}
    for name in SERVICES:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        s.setblocking(False)
        out[name] = s
    return out


def service_env(ports: dict[str, int], home: Path) -> dict[str, str]:
    redis, zk, pg, api, sc = (ports[n] for n in SERVICES)
    return {
        "TXDAG_REDIS_PORT": str(redis), "TXDAG_ZK_PORT": str(zk), "TXDAG_PG_PORT": str(pg),
        "TXDAG_AIRFLOW_PORT": str(api), "TXDAG_SPARK_CONNECT_PORT": str(sc),
        "TXDAG_REDIS_URL": f"redis://127.0.0.1:{redis}/0", "TXDAG_ZK_HOSTS": f"127.0.0.1:{zk}",
        "TXDAG_TEST_REDIS_URL": f"redis://127.0.0.1:{redis}/0", "TXDAG_TEST_ZK_HOSTS": f"127.0.0.1:{zk}",
        "AIRFLOW_CONN_REDIS_DEFAULT": f"redis://127.0.0.1:{redis}/0",
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": json.dumps({"conn_type": "zookeeper", "host": "127.0.0.1", "port": zk}),
        "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT": json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1",
                                                          "port": sc}),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://airflow:x@127.0.0.1:{pg}/airflow",
        "TXDAG_AIRFLOW_URL": f"http://127.0.0.1:{api}", "AIRFLOW_HOME": str(home / "airflow-home"),
    }


def make_sandbox(base: Path, script: str) -> tuple[Path, Path, Path]:
    """``base/repo/scripts/<script>`` and scripts/lib/ (copies), the other scripts as stubs, a PATH of stubs; and the
    stub log."""
    log = base / "stub-calls.log"
    repo, stubs = base / "repo", base / "stub-bin"
    (repo / "scripts").mkdir(parents=True)
    (repo / "home").mkdir()
    stubs.mkdir()

    def stub(path: Path, name: str) -> None:
        path.write_text(f'#!/bin/sh\nprintf "%s\\n" "{name} $*" >>"{log}"\nexit 97\n')
        path.chmod(0o755)

    for other in (ROOT / "scripts").glob("*.sh"):
        if other.name == script:
            shutil.copy2(other, repo / "scripts" / script)
        else:
            stub(repo / "scripts" / other.name, f"scripts/{other.name}")
    shutil.copytree(ROOT / "scripts" / "lib", repo / "scripts" / "lib")  # what the scripts source, not stubbed
    for command in STUBBED_COMMANDS:
        stub(stubs / command, command)
    return repo, stubs, log


def tree(path: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in path.rglob("*")}


def run(point: EntryPoint, base: Path) -> Outcome:
    base.mkdir(parents=True)
    socks = listeners()
    env = {**os.environ, **service_env({n: s.getsockname()[1] for n, s in socks.items()}, base)}
    cwd, log, before = base, None, {}
    if point.script is not None:
        cwd, stubs, log = make_sandbox(base, point.script)
        env.update(PATH=f"{stubs}{os.pathsep}/usr/bin{os.pathsep}/bin", HOME=str(cwd / "home"),
                   TXDAG_PG_BIN=str(stubs), TXDAG_PYTHON=str(stubs / "python3.11"))
        before = tree(cwd)
    started = time.monotonic()
    process = Popen(point.argv, cwd=cwd, env=env, stdin=PIPE, stdout=PIPE, stderr=PIPE, text=True,
                    start_new_session=True)
    try:
        out, err = process.communicate("", timeout=TIMEOUT)
    except TimeoutExpired:
        os.killpg(process.pid, 9)
        out, err = process.communicate()
        err += f"\n(killed after {TIMEOUT} s)"
    outcome = Outcome(process.returncode, out, err, time.monotonic() - started)
    for name, s in socks.items():
        readable, _, _ = select.select([s], [], [], 0)
        if readable:
            outcome.connections.append(f"{name} (127.0.0.1:{s.getsockname()[1]})")
        s.close()
    if log is not None:
        outcome.stub_calls = log.read_text().splitlines() if log.exists() else []
        after = tree(cwd)
        outcome.changed = sorted(k for k in after.keys() | before.keys() if after.get(k) != before.get(k))
    return outcome


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    if not TXDAG.exists():
        pytest.fail(f"{TXDAG} is missing: run `bash scripts/setup.sh`", pytrace=False)
    base = tmp_path_factory.mktemp("entry-points")
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {p.id: pool.submit(run, p, base / f"cmd{i}") for i, p in enumerate(ENTRY_POINTS)}
        results = {k: f.result() for k, f in futures.items()}
    slowest = max(results.items(), key=lambda kv: kv[1].seconds)
    print(f"\n{len(results)} --help commands in {time.monotonic() - started:.1f} s "
          f"(slowest: {slowest[0]}, {slowest[1].seconds:.1f} s)")
    return results


@pytest.mark.parametrize("point", ENTRY_POINTS, ids=lambda p: p.id)
def test_help(point: EntryPoint, outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes[point.id]
    shown = f"$ {' '.join(point.argv)}\n--- stdout\n{outcome.stdout[-2000:]}--- stderr\n{outcome.stderr[-3000:]}"
    assert outcome.connections == [], f"{point.id} connected to {outcome.connections}\n{shown}"
    assert outcome.stub_calls == [], (f"{point.id} ran {outcome.stub_calls}: a help must not install or start "
                                      f"anything (answer -h/--help before anything else runs)\n{shown}")
    assert outcome.changed == [], f"{point.id} created or changed {outcome.changed}\n{shown}"
    assert outcome.returncode == 0, f"{point.id} exited {outcome.returncode}\n{shown}"
    assert point.names in outcome.stdout, f"{point.id}: the help on stdout does not name {point.names!r}\n{shown}"


def test_the_walk_covers_the_cli() -> None:
    """The subcommand walk sees nested commands (a change to argparse's internals would make it see none)."""
    paths = set(subcommands(build_parser()))
    assert {("status",), ("state",), ("state", "get"), ("state", "migrate"), ("pools", "sync"), ("acl",)} <= paths
    ids = {p.id for p in ENTRY_POINTS}
    assert {"bash scripts/demo.sh --help", "python bench/throughput.py --help"} <= ids

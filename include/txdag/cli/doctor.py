"""``txdag doctor``: are Redis, ZooKeeper, Spark and Airflow reachable with the configured connections, and is
every connection the topologies of the DAG folder name defined? Each check that fails says how to fix it, so a new
machine can be set up by following the output."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from txdag import hints
from txdag.cli.common import (
    DEFAULT_REDIS_CONN,
    DEFAULT_ZK_CONN,
    clients,
    connection,
    dags_folder,
    emit,
    load_folder,
    logs_to_stderr,
    redis_settings,
    shorten,
    table,
    zookeeper_settings,
)
from txdag.cli.common import conn_id as conn_of
from txdag.errors import StoreWentBackwards, TxdagError, start_over

GROUPS = ("redis", "zookeeper", "spark", "airflow", "connections", "stores")


def short(exc: Exception) -> str:
    """An error's what-happened part; the how-to-fix part goes in the check's fix."""
    text = str(exc)
    for sep in ("): set ", "; "):
        if sep in text:
            return text.split(sep)[0] + (")" if sep.startswith(")") else "")
    return text


@dataclass
class Check:
    check: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""


def check_redis(args: argparse.Namespace) -> list[Check]:
    import redis

    conn = args.redis_conn_id or DEFAULT_REDIS_CONN  # the stores check reads each topology's own
    name = f"redis ({conn})"
    try:
        settings = redis_settings(conn, args.timeout)
    except TxdagError as exc:
        return [Check(name, "fail", short(exc), f"set AIRFLOW_CONN_{conn.upper()}='redis://HOST:PORT/DB' "
                      "or add the connection in Admin > Connections")]
    address = settings.url.rsplit("@", 1)[-1]
    client = settings.connect()
    try:
        client.ping()
        version = _redis_version(client)
    except redis.AuthenticationError as exc:
        return [Check(name, "fail", f"{address}: {exc}", f"fix the login/password of connection {conn}")]
    except redis.RedisError as exc:
        return [Check(name, "fail", f"{address} does not answer ({type(exc).__name__}: {exc})",
                      f"{hints.how_to_start('redis')}, or fix the host/port of connection {conn}")]
    finally:
        client.close()
    return [Check(name, "ok", f"{address} answers (Redis {version})")]


def _redis_version(client: Any) -> str:
    """The server's version, or a note when the user may not run INFO (a topology's user of `txdag acl redis`)."""
    import redis

    try:
        return str(client.info("server").get("redis_version", "?"))
    except redis.exceptions.NoPermissionError:
        return "version hidden: this user may not run INFO"


def check_zookeeper(args: argparse.Namespace) -> list[Check]:
    from txdag.zk.client import close_zk
    from txdag.zk.store import topology_ids

    conn = args.zookeeper_conn_id or DEFAULT_ZK_CONN
    name = f"zookeeper ({conn})"
    try:
        settings = zookeeper_settings(conn, args.timeout)
    except TxdagError as exc:
        return [Check(name, "fail", short(exc), f"set AIRFLOW_CONN_{conn.upper()}="
                      "'{\"conn_type\": \"zookeeper\", \"host\": \"HOST\", \"port\": 2181}' or add it in the UI")]
    try:
        client = settings.connect()
    except TxdagError as exc:
        return [Check(name, "fail", short(exc),
                      f"{hints.how_to_start('zookeeper')}, or fix the hosts of connection {conn}")]
    try:
        count = len(topology_ids(client, settings.root))
    except TxdagError as exc:
        return [Check(name, "fail", short(exc), f"check connection {conn}: its hosts, "
                                                "login/password and extra root")]
    finally:
        close_zk(client)
    return [Check(name, "ok", f"{settings.hosts} answers; {count} topologies under {settings.root}")]


def check_spark(args: argparse.Namespace) -> list[Check]:
    return [check_java(), check_spark_submit(), check_pyspark(), check_spark_conn(args), check_local_ip()]


def check_java() -> Check:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        return Check("java", "fail", "no java on PATH" + (f" nor in JAVA_HOME={home}" if home else ""),
                     "install Java 17 (apt-get install openjdk-17-jre-headless) or set JAVA_HOME")
    done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    version = (done.stderr or done.stdout).splitlines()[0] if (done.stderr or done.stdout) else "?"
    if done.returncode != 0:
        return Check("java", "fail", f"{java} -version exited {done.returncode}", "reinstall Java 17")
    return Check("java", "ok", f"{java}: {version}")


def check_spark_submit() -> Check:
    found = shutil.which("spark-submit") or shutil.which("spark-submit", path=str(Path(sys.executable).parent))
    if not found:
        return Check("spark-submit", "fail", "spark-submit is not on PATH",
                     "put the virtualenv's bin first on PATH (.venv/bin holds pyspark's spark-submit)")
    return Check("spark-submit", "ok", found)


def check_pyspark() -> Check:
    if importlib.util.find_spec("pyspark") is None:
        return Check("pyspark", "fail", "pyspark is not importable", "pip install -e '.[airflow,dev]' in the venv")
    versions = {}
    for dist in ("pyspark", "pyspark-client"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    if len(set(versions.values())) > 1:
        return Check("pyspark", "fail", f"versions differ: {versions}",
                     "pin pyspark and pyspark-client to the same version (pyproject.toml) and reinstall")
    return Check("pyspark", "ok", ", ".join(f"{d} {v}" for d, v in versions.items()))


def check_spark_conn(args: argparse.Namespace) -> Check:
    name = f"spark ({args.spark_conn_id})"
    try:
        conn = connection(args.spark_conn_id)
    except TxdagError as exc:
        return Check(name, "fail", short(exc), f"set AIRFLOW_CONN_{args.spark_conn_id.upper()}="
                     "'{\"conn_type\": \"spark\", \"host\": \"local[*]\"}' or your master")
    return Check(name, "ok", f"master {conn.host}{f':{conn.port}' if conn.port else ''}")


def check_local_ip() -> Check:
    value = os.environ.get("SPARK_LOCAL_IP")
    if not value:
        return Check("SPARK_LOCAL_IP", "warn", "not set: Spark picks an address itself and may warn or bind one "
                     "other machines cannot reach", "export SPARK_LOCAL_IP=127.0.0.1 on one machine, or the "
                     "address the Spark cluster reaches this host at")
    return Check("SPARK_LOCAL_IP", "ok", value)


def check_airflow(args: argparse.Namespace) -> list[Check]:
    from txdag.airflow.api import api_from_env

    try:
        api = api_from_env()
        health = api.health()
    except Exception as exc:  # connection refused, wrong password, no password file: all say the same fix
        return [Check("airflow api", "fail", f"{type(exc).__name__}: {str(exc)[:300]}",
                      f"{hints.how_to_start('airflow')}, or set TXDAG_AIRFLOW_URL, TXDAG_AIRFLOW_USER "
                      "and TXDAG_AIRFLOW_PASSWORD (or AIRFLOW_HOME) for your instance")]
    bad = {k: v.get("status") for k, v in health.items() if isinstance(v, dict) and v.get("status") != "healthy"}
    if bad:
        fix = f"some components are down: {hints.how_to_start('airflow')}, and see their logs"
        if "triggerer" in bad:  # deferred tasks wait for a triggerer that never comes: say which of txdag's
            fix += ("; without a triggerer, txdag's waiting tasks stay deferred (a commit waiting for txid - 1, a "
                    "process waiting for its key-value predecessor, a coordinate waiting for a place among "
                    "max_active_transactions): start one with `airflow triggerer`")
        return [Check("airflow api", "warn", f"{api.base_url} answers; not healthy: {bad}", fix)]
    return [Check("airflow api", "ok", f"{api.base_url} answers; {', '.join(health)} healthy")]


def check_connections(args: argparse.Namespace) -> list[Check]:
    """Every connection a topology of the DAG folder names is defined, with the type it needs. Rendering a DAG
    looks up none (Airflow's rule for top-level DAG code), so this is where a missing one shows before a run."""
    folder = dags_folder(args)
    found, errors = load_folder(folder)
    twice = two_file_checks(args, found) if errors else {}  # a second file of a topology fails to import
    checks: list[Check] = []
    for path, error in errors.items():
        check = twice.get(str(Path(path).resolve())) or Check(f"dag file {Path(path).name}", "fail", error,
                                                              f"fix {path}: the error says what to change")
        if check not in checks:
            checks.append(check)
    if not found:
        return checks + [Check("connections", "warn", f"no topology in the DAG folder {folder}",
                               "give the DAG folder with --dags or TXDAG_DAGS_FOLDER")]
    users: dict[tuple[str, str], list[str]] = {}
    for topology in found.values():
        for conn_id, kind in topology.conn_ids().items():
            users.setdefault((conn_id, kind), []).append(topology.topology_id)
    for (conn_id, kind), names in sorted(users.items()):
        name, used = f"connection {conn_id}", f"used by {', '.join(sorted(names))}"
        try:
            conn = connection(conn_id)
        except TxdagError as exc:
            checks.append(Check(name, "fail", f"{short(exc)}; {used}", hints.how_to_add_connection(conn_id, kind)))
            continue
        if conn.conn_type != kind:
            checks.append(Check(name, "warn", f"type {conn.conn_type!r}, the topologies need {kind!r}; {used}",
                                f"make {conn_id} a {kind} connection, e.g. {hints.connection_example(kind)}"))
        else:
            checks.append(Check(name, "ok", f"{kind}, {used}"))
    return checks


def two_file_checks(args: argparse.Namespace, found: dict[str, Any]) -> dict[str, Check]:
    """A topology defined by several DAG files: one check, by each of its files, that names the file Airflow
    loads, the recorded owner and which to keep (what `txdag status` says), instead of "fix" the failing copy."""
    import airflow.configuration  # noqa: F401  Airflow logs to stdout once imported: the result's, keep it clean

    from txdag.airflow.rendering import defining_in
    from txdag.cli.topology import two_files_of

    logs_to_stderr()
    by_file: dict[str, Check] = {}
    for name, definition in found.items():
        files = defining_in(dags_folder(args), name)
        if len(files) < 2:
            continue
        try:
            with clients(zookeeper_timeout=getattr(args, "timeout", 5.0)) as using:
                store = using.store(name, conn_of(args, "zookeeper", definition))
                report = two_files_of(args, name, definition, store)
        except TxdagError as exc:
            report = {"message": f"topology {name!r} is defined by {len(files)} DAG files "
                                 f"({', '.join(map(str, files))}); the recorded owner is unknown ({short(exc)})",
                      "ways_out": ["start ZooKeeper and run `txdag status` for which file to keep"]}
        if report is None:
            continue
        check = Check(f"dag files of {name}", "fail", report["message"], "; or ".join(report["ways_out"]))
        by_file.update({str(Path(f).resolve()): check for f in files})
    return by_file


def check_stores(args: argparse.Namespace) -> list[Check]:
    """Each topology's state store and source still hold what ZooKeeper says was committed and emitted: the
    check its coordinate task makes before it emits (txdag.protocol.steps.check_states), made ahead of a run."""
    folder = dags_folder(args)
    found, failed = load_folder(folder)
    checks = []
    if "connections" not in (args.check or GROUPS):  # else that check reports the folder's files already
        checks = [Check(f"dag file {Path(path).name}", "fail", f"not loaded, so its topology is not checked: "
                        f"{shorten(error, 200)}", f"fix {path}: the error says what to change")
                  for path, error in sorted(failed.items())]
        if not found:
            checks.append(Check("stores", "warn", f"no topology in the DAG folder {folder}",
                                "give the DAG folder with --dags or TXDAG_DAGS_FOLDER"))
    for t in found.values():
        try:
            checks.append(_check_stores_of(t, args))
        except StoreWentBackwards as exc:
            what, _, _ = str(exc).partition(" txdag halts")
            checks.append(Check(f"stores of {t.topology_id}", "fail", what,
                                f"restore the data, or {start_over(t.topology_id)}"))
        except TxdagError as exc:  # a store or ZooKeeper that cannot be read: nothing was checked
            checks.append(Check(f"stores of {t.topology_id}", "fail", f"not checked: {short(exc)}",
                                f"start it, or fix connection {conn_of(args, 'redis', t)} or "
                                f"{conn_of(args, 'zookeeper', t)}; then run txdag doctor --check stores again"))
    return checks


def halted(t: Any, args: argparse.Namespace) -> str | None:
    """Why topology ``t`` is halted (a state store or its source behind ZooKeeper), None when it is not or when
    the stores cannot be read (the other checks, and the commands' own errors, say why)."""
    try:
        _check_stores_of(t, args)
    except StoreWentBackwards as exc:
        return str(exc)
    except TxdagError:
        return None
    return None


def _check_stores_of(t: Any, args: argparse.Namespace) -> Check:
    from txdag.commit.phase import check_store

    timeout = getattr(args, "timeout", 5.0)
    with clients(redis_timeout=timeout, zookeeper_timeout=timeout) as using:
        store = using.store(t.topology_id, conn_of(args, "zookeeper", t))
        if not store.client.exists(store.path):
            return Check(f"stores of {t.topology_id}", "ok", "no txid yet")
        topo = store.read_topology()[0]
        redis = using.redis(conn_of(args, "redis", t))
        marker = check_store(store, redis, t.commit_marker, t.topology_id)
        last = store.read_txid(topo.last_txid) if topo.last_txid else None
        held = f"the source holds txid {topo.last_txid}'s batch"
        if last is not None and last[0].metadata:
            spout = using.spout(t)
            try:
                if spout.lag(last[0].metadata) is None:  # raises when the source went backwards
                    held = f"its spout ({type(spout).__name__}) gives no lag: whether the source holds txid " \
                           f"{topo.last_txid}'s batch is not checked"
            finally:
                spout.close()
        return Check(f"stores of {t.topology_id}", "ok", f"committed txid {topo.committed_txid}, commit marker "
                     f"{marker}; {held}")


CHECKS: dict[str, Callable[[argparse.Namespace], list[Check]]] = {
    "redis": check_redis, "zookeeper": check_zookeeper, "spark": check_spark, "airflow": check_airflow,
    "connections": check_connections, "stores": check_stores,
}


def cmd_doctor(args: argparse.Namespace) -> int:
    results = [c for group in (args.check or GROUPS) for c in CHECKS[group](args)]
    failed = any(c.status == "fail" for c in results)
    emit(args, {"ok": not failed, "checks": [asdict(c) for c in results]}, doctor_text)
    return 1 if failed else 0


def doctor_text(d: dict) -> str:
    lines = [table(d["checks"], ["check", "status", "detail"])]
    fixes = [c for c in d["checks"] if c["status"] != "ok"]
    if fixes:
        lines += ["", "to fix:"] + [f"  {c['check']}: {c['fix']}" for c in fixes]
    warned = sum(c["status"] == "warn" for c in d["checks"])
    failed = sum(c["status"] == "fail" for c in d["checks"])
    lines += ["", (f"{failed} check(s) failed" if failed else "all checks passed")
              + (f", {warned} warning(s)" if warned else "")]
    return "\n".join(lines)

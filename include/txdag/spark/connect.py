"""Warm Spark: one TransactionAttempt's job run in the calling process against a Spark Connect server.

The same job file as under spark-submit (its ``process`` function; its ``if __name__ == "__main__"`` block does
not run), the same :func:`~txdag.spark.runner.run_job`: read the batch, process, check, stage and seal. Only the
session differs: a Spark Connect client of a long-running server instead of a new application per txid, which
saves the JVM start and the first job's warm-up (seconds per txid; see ../shared/AIRFLOW-FACTS.md).

The txids of a topology share one server-side session (a session id derived from the topology and the UTC day),
and a task leaves it open when it ends. A new session per txid would cost twice: the server starts Python workers
per session (seconds for each job's first executor-side step), and Spark 4.2 keeps those workers until the
server stops (SPARK-54055), a few dozen MB per txid.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import redis
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.connect.session import SparkSession as ConnectSession

from txdag import hints
from txdag.attempt import TransactionAttempt
from txdag.errors import ConfigError, ServiceUnavailable
from txdag.spark.runner import JobResult, Process, run_job
from txdag.state.kv import ProviderConfig
from txdag.topology.definition import JobSpec
from txdag.topology.jobfile import load_job_module

# pyspark.sql.functions build Connect columns only while this is set (pyspark's is_remote()); pyspark sets it for
# good on a Connect session, so it is set around the job and put back after.
CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"
PY_FILES_CONF = "spark.submit.pyFiles"  # spark-submit's --py-files as a conf: both modes read it
SESSION_USER = "txdag"  # the user of a shared session whose connection names none
SHARED_GENERATIONS = 8  # shared sessions a topology may start in a day before its txids fall back to their own
log = logging.getLogger(__name__)


def how_to_start() -> str:
    """The fix for a Spark Connect server that does not answer, for where txdag runs."""
    return f"{hints.how_to_start('spark_connect')}, or fix the host/port of the spark_connect connection"


def shared_session_url(url: str, topology: str, day: datetime | None = None, generation: int = 0,
                       shipped: str = "") -> str:
    """``url`` with the id of the session the topology's txids share on ``day`` (UTC, default today). ``generation``
    counts the ones the server closed that day (idle past its timeout: it refuses a closed id for good);
    ``shipped`` is the digest of the py-files the session gets (py_files_digest): other code, another session,
    since a session's Python workers keep the modules they imported (and the server refuses a file's name again
    with other content)."""
    stamp = (day or datetime.now(UTC)).strftime("%Y-%m-%d")
    salt = f":{shipped}" if shipped else ""
    digest = hashlib.sha256(f"txdag:{topology}:{stamp}:{generation}{salt}".encode()).digest()[:16]
    return session_url(url, str(uuid.UUID(bytes=digest, version=4)))


def session_url(url: str, session_id: str) -> str:
    """``url`` naming the session ``session_id`` (a URL that names one already is kept as it is)."""
    if ";session_id=" in url:
        return url
    base = url.rstrip("/")
    params = ";" if "/;" in base else "/;"  # after the connection's own (user_id, token, use_ssl)
    # The server keys a session by user and id; without a user_id the client sends its OS user, so the tasks and a
    # `txdag warm` run by someone else would name two sessions. One user unless the connection names its own.
    user = "" if "user_id=" in base else f"user_id={SESSION_USER};"
    return f"{base}{params}{user}session_id={session_id}"


def session_closed(exc: BaseException) -> bool:
    """The server closed (or forgot) the session this error names: a new id is needed, not a new server."""
    return "SESSION_CLOSED" in str(exc) or "SESSION_NOT_FOUND" in str(exc)


def load_process(job_path: str) -> Process:
    """The ``process`` function of a job file, imported under a name of its own (so its main block stays off)."""
    process = getattr(load_job_module(job_path), "process", None)
    if not callable(process):
        raise ConfigError(f"Spark job {job_path} defines no process(batch) function")
    return process


def server_address(url: str) -> str:
    """The sc://HOST:PORT of a Spark Connect URL, without its parameters (which may hold a token)."""
    return url.split(";", 1)[0].rstrip("/")


def connect_session(url: str) -> SparkSession:
    """A Spark Connect session, or ServiceUnavailable naming the server and how to start it."""
    address = server_address(url)
    parsed = urlsplit(address)
    try:  # the client retries a refused connection for minutes: look first
        socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 15002), timeout=10).close()
    except OSError as exc:
        raise ServiceUnavailable(f"Spark Connect server at {address} does not answer ({exc}); {how_to_start()}, "
                                 "then retry the task") from None
    spark = None
    try:
        spark = ConnectSession.builder.remote(url).create()
        spark.range(1).collect()  # the client connects lazily: fail here, clearly, not mid-job
    except PySparkException as exc:
        if spark is not None and session_closed(exc):
            spark.release_session_on_close = False  # nothing to release
            spark.stop()
            raise
        raise ServiceUnavailable(f"Spark Connect server at {address} does not answer ({type(exc).__name__}); "
                                 f"{how_to_start()}, then retry the task") from None
    return cast(SparkSession, spark)


def py_files(spark_conf: Mapping[str, str]) -> list[Path]:
    """The local files of the topology's ``spark.submit.pyFiles`` (what ``txdag pyfiles`` builds), which a Connect
    session gets as artifacts: its executors' Python need not have txdag."""
    paths = [p.strip() for p in spark_conf.get(PY_FILES_CONF, "").split(",") if p.strip()]
    found = [Path(p.removeprefix("file://")) for p in paths]
    missing = [raw for p, raw in zip(found, paths) if "://" in raw.removeprefix("file://") or not p.is_file()]
    if missing:
        raise ConfigError(f"spark_conf {PY_FILES_CONF}: {missing} not a file here; in connect mode the task uploads "
                          f"each to the session, so give paths the Airflow workers read (`txdag pyfiles` builds it)")
    return found


def py_files_digest(files: Sequence[Path]) -> str:
    """16 hex digits of the files' names and bytes ('' for none)."""
    if not files:
        return ""
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.name}\0".encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def shared_session(url: str, topology: str, files: Sequence[Path] = ()) -> SparkSession:
    """Today's shared session of ``topology``, left open on the server when the client stops: the lowest generation
    the server has not closed, with ``files`` added as py-files (again the same bytes: a no-op on the server). A URL
    that names a session already is used as it is."""
    shipped = py_files_digest(files)
    if ";session_id=" in url:
        spark = connect_session(url)
    else:
        for generation in range(SHARED_GENERATIONS):
            try:
                spark = connect_session(shared_session_url(url, topology, generation=generation, shipped=shipped))
                break
            except PySparkException as exc:
                if not session_closed(exc):
                    raise
        else:
            log.warning("topology %r: the Spark Connect server closed all %d of today's shared sessions (idle past "
                        "spark.connect.session.manager.defaultSessionTimeout); this txid runs in a session of its "
                        "own, whose Python workers stay until the server restarts (SPARK-54055)", topology,
                        SHARED_GENERATIONS)
            spark = connect_session(url)
            ship(spark, files)
            return spark
    cast(ConnectSession, spark).release_session_on_close = False
    ship(spark, files)
    return spark


def ship(spark: SparkSession, files: Sequence[Path]) -> None:
    """Add ``files`` to the session's executors' ``sys.path`` (Spark Connect artifacts)."""
    for path in files:
        cast(ConnectSession, spark).addArtifacts(str(path), pyfile=True)


def run_connected(spec: JobSpec, job_path: str, clients: Mapping[str, redis.Redis], url: str,
                  kv_configs: Mapping[str, ProviderConfig] | None = None,
                  spark_conf: Mapping[str, str] | None = None, *,
                  kafka_configs: Mapping[str, Mapping[str, Any]] | None = None,
                  on_session: Callable[[str], None] | None = None) -> JobResult:
    """Run the job for ``spec`` on the Spark Connect server at ``url``, in the topology's shared session, which
    gets the py-files of the topology's ``spark_conf`` first; ``on_session`` gets the URL of that session before
    the job's first operation (what interrupt_job needs)."""
    files = py_files(spark_conf or {})
    process = load_process(job_path)
    with connect_mode():
        started = time.perf_counter()
        spark = shared_session(url, spec.topology, files)
        connected = time.perf_counter() - started
        session_id = cast(ConnectSession, spark).session_id
        log.info("topology %r %s runs in Spark Connect session %s", spec.topology, spec.tx, session_id)
        cast(ConnectSession, spark).addTag(job_tag(spec.topology, spec.tx))
        if on_session is not None:
            on_session(session_url(url, session_id))
        try:
            return run_job(spec, process, clients, spark, kv_configs,
                           kafka_configs=kafka_configs).timed("connect", connected)
        finally:
            spark.stop()  # closes this client; the shared session stays open on the server


def job_tag(topology: str, tx: TransactionAttempt) -> str:
    """The tag of every Spark operation of ``tx``'s job in its topology's shared session."""
    return f"txdag:{topology}:{tx.txid}:{tx.attempt}"


def interrupt_job(url: str, tag: str) -> list[str]:
    """Interrupt the Spark operations tagged ``tag`` (job_tag) in the session ``url`` names (run_connected's
    ``on_session``): its task was killed, and the server would run them to their end for nobody, on the cores the
    topology's other txids share. Returns the ids of the operations interrupted. A kill arrives in a signal handler
    while the job runs: no probe, no job, no upload, and the process's Spark Connect mode is left alone."""
    spark = ConnectSession.builder.remote(url).create()
    spark.release_session_on_close = False  # the topology's txids go on in it
    try:
        return list(spark.interruptTag(tag))
    finally:
        spark.stop()


@contextmanager
def connect_mode() -> Iterator[None]:
    """pyspark.sql.functions build Connect columns inside; later classic sessions, and spark-submit children, of
    this process stay classic."""
    previous = os.environ.get(CONNECT_MODE)
    os.environ[CONNECT_MODE] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(CONNECT_MODE, None)
        else:
            os.environ[CONNECT_MODE] = previous

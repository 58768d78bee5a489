"""Named fault points, so test harnesses can kill a process at an exact place of an exact txid.

Exactly-once is tested by crashing (STYLE.md, point 10): a harness sets

    TXDAG_FAULTS=process:wordcount:3,commit:wordcount:5:2    point:topology:txid[:attempt[:times]], comma-separated
    TXDAG_FAULTS_ALLOWED=1                                    the safety catch

and the code calls ``crash_if_requested(point, topology, tx)`` at its fault points. A matching entry kills the
process with SIGKILL: no ``finally``, no ``atexit``, no flush of anyone's buffers, like a machine that dies.
Without ``TXDAG_FAULTS_ALLOWED=1`` the entries are ignored (with a warning), so a variable left behind in a
production environment cannot kill jobs. The points, in the order a txid passes them (``POINTS``):

    coordinate  the coordinator wrote the txid's metadata to ZooKeeper and still holds the topology lock
    process     the Spark job staged its numeric partials (or its first other output), not the rest, and did not
                seal (mid-batch)
    staged      the process task sealed the staging and marked the txid PROCESSED; commit has not started
    prepared    the commit prepared every key-value state of the txid and committed none (seed 002's restart
                between prepare and commit)
    applying    the commit added the first state's numeric partials and not the others' (on a Redis Cluster whose
                states are in several slots: one slot written, the rest not); the marker is not written
    commit      the commit wrote the states (with the txid) but did not record the commit in ZooKeeper
    committed   the commit is recorded in ZooKeeper; the staging is not cleaned up yet

An entry fires every time it matches (a retry of the same attempt, e.g. a commit, dies again), unless
``TXDAG_FAULTS_FIRED_DIR`` names a directory shared by the processes: then each (point, topology, txid,
attempt) fires once, or ``times`` times, recorded by creating a file there first (``point-topology-txid-attempt``,
then ``...#2`` and so on; harnesses use it for "crash, then recover", and ``times`` for "crash every try").
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from txdag.attempt import TransactionAttempt
from txdag.errors import ConfigError

FAULTS_VAR = "TXDAG_FAULTS"
ALLOWED_VAR = "TXDAG_FAULTS_ALLOWED"
FIRED_DIR_VAR = "TXDAG_FAULTS_FIRED_DIR"

POINTS = ("coordinate", "process", "staged", "prepared", "applying", "commit", "committed")

log = logging.getLogger(__name__)
_warned = False


@dataclass(frozen=True)
class Fault:
    """One requested crash: at ``point`` of ``topology``'s ``txid``, on ``attempt`` (None: any attempt)."""

    point: str
    topology: str
    txid: int
    attempt: int | None = None
    times: int = 1

    def matches(self, point: str, topology: str, tx: TransactionAttempt) -> bool:
        return (
            (self.point, self.topology, self.txid) == (point, topology, tx.txid)
            and self.attempt in (None, tx.attempt)
        )


def _positive(entry: str, what: str, text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise ConfigError(f"{FAULTS_VAR} entry {entry!r}: {what} must be an integer >= 1, got {text!r}")
    return int(text)


def parse_faults(text: str) -> tuple[Fault, ...]:
    """Parse ``point:topology:txid[:attempt[:times]],...``; a malformed entry is an error, not a silently missed
    crash."""
    faults = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        parts = entry.split(":")
        if len(parts) not in (3, 4, 5) or not parts[0] or not parts[1]:
            raise ConfigError(f"{FAULTS_VAR} entry {entry!r} is not point:topology:txid[:attempt[:times]] (e.g. "
                              "process:wordcount:3)")
        if parts[0] not in POINTS:
            raise ConfigError(f"{FAULTS_VAR} entry {entry!r}: unknown fault point {parts[0]!r}; the points are "
                              f"{', '.join(POINTS)}")
        attempt = _positive(entry, "attempt", parts[3]) if len(parts) >= 4 else None
        times = _positive(entry, "times", parts[4]) if len(parts) == 5 else 1
        faults.append(Fault(parts[0], parts[1], _positive(entry, "txid", parts[2]), attempt, times))
    return tuple(faults)


def requested_faults(environ: Mapping[str, str] | None = None) -> tuple[Fault, ...]:
    """The faults the environment asks for; none unless ``TXDAG_FAULTS_ALLOWED=1`` is set too."""
    global _warned
    env = os.environ if environ is None else environ
    text = env.get(FAULTS_VAR, "")
    if not text.strip():
        return ()
    if env.get(ALLOWED_VAR) != "1":
        if not _warned:
            log.warning("%s=%r is set but %s is not 1: ignoring it (fault injection is for test harnesses)",
                        FAULTS_VAR, text, ALLOWED_VAR)
            _warned = True
        return ()
    return parse_faults(text)


def crash_if_requested(
    point: str, topology: str, tx: TransactionAttempt, environ: Mapping[str, str] | None = None
) -> None:
    """SIGKILL this process when a requested fault matches; one ``TXDAG FAULT ...`` line on stderr first."""
    env = os.environ if environ is None else environ
    times = max((f.times for f in requested_faults(env) if f.matches(point, topology, tx)), default=0)
    if times and _may_fire(point, topology, tx, times, env):
        sys.stderr.write(f"TXDAG FAULT {point} topology={topology} txid={tx.txid} attempt={tx.attempt}\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def _may_fire(point: str, topology: str, tx: TransactionAttempt, times: int, env: Mapping[str, str]) -> bool:
    """True unless TXDAG_FAULTS_FIRED_DIR records that this fault fired ``times`` times already (O_EXCL: one
    process wins each firing)."""
    folder = env.get(FIRED_DIR_VAR)
    if not folder:
        return True
    name = f"{point}-{topology}-{tx.txid}-{tx.attempt}"
    for n in range(1, times + 1):
        try:
            os.close(os.open(os.path.join(folder, name if n == 1 else f"{name}#{n}"),
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        return True
    return False

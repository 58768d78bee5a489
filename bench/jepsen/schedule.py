"""A schedule of faults drawn from a seed: what is hit, when (seconds after the schedule starts) and for how long.

Pure and deterministic: ``make_schedule(seed, duration)`` is the same list on every machine, so a failing schedule's
seed replays its faults (the timing of the pipeline around them is the machine's). Faults of different kinds may
overlap; two of one kind never do (a second SIGSTOP of a stopped server would be healed by the first's SIGCONT).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

PAUSES = ("pause-redis", "pause-zookeeper", "pause-scheduler", "pause-triggerer", "pause-connect")
KILLS = ("kill-driver", "kill-task", "kill-connect")
KINDS = PAUSES + KILLS
CONNECT_ONLY = ("pause-connect", "kill-connect")  # the Spark Connect server runs the batches (spark_mode="connect")
SUBMIT_ONLY = ("kill-driver",)  # a task's own spark-submit driver (spark_mode="submit")
MIN_HOLD, MAX_HOLD = 1.0, 60.0  # seconds a paused process stays stopped
FIRST_AT = 10.0  # seconds of the schedule before its first fault: the pipeline is moving first


def kinds_for(spark_mode: str) -> tuple[str, ...]:
    """The faults that hit something in that Spark mode: no Connect server in submit mode, no driver of a task's
    own in connect mode."""
    if spark_mode not in ("submit", "connect"):
        raise ValueError(f"spark mode {spark_mode!r}: use submit or connect")
    absent = CONNECT_ONLY if spark_mode == "submit" else SUBMIT_ONLY
    return tuple(k for k in KINDS if k not in absent)


@dataclass(frozen=True)
class Fault:
    kind: str
    at: float  # seconds after the schedule's start
    hold: float  # seconds between SIGSTOP and SIGCONT; 0 for a kill

    @property
    def heals(self) -> float:
        return self.at + self.hold

    def to_json(self) -> dict:
        return asdict(self)


def make_schedule(seed: int, duration: float, kinds: tuple[str, ...] | None = None) -> list[Fault]:
    """Between 2 and one per 30 s of faults of ``kinds`` (default: the submit mode's), starting in [FIRST_AT,
    duration - MAX_HOLD) so that every pause has healed by ``duration``; sorted by start. Raises ValueError when
    ``duration`` leaves no room."""
    last_start = duration - MAX_HOLD
    if last_start <= FIRST_AT:
        raise ValueError(f"a schedule of {duration:g} s leaves no room for a fault: give at least "
                         f"{FIRST_AT + MAX_HOLD + 1:g} s")
    kinds = kinds_for("submit") if kinds is None else kinds
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds:
        raise ValueError(f"unknown fault kinds {sorted(unknown)}; use some of {', '.join(KINDS)}")
    rng = random.Random(seed)
    count = rng.randint(2, max(2, int(duration // 30)))
    faults: list[Fault] = []
    for _ in range(count):
        kind = rng.choice(kinds)
        hold = round(rng.uniform(MIN_HOLD, MAX_HOLD), 1) if kind in PAUSES else 0.0
        at = round(rng.uniform(FIRST_AT, last_start), 1)
        while busy := [f.heals for f in faults if f.kind == kind and f.at <= at + hold and at < f.heals + 0.99]:
            at = round(max(busy) + 1.0, 1)  # one of its kind holds then: start once it healed
        if at < last_start:
            faults.append(Fault(kind, at, hold))
    return sorted(faults, key=lambda f: (f.at, f.kind))


def overlapping(faults: list[Fault]) -> int:
    """How many faults start while another one still holds."""
    return sum(1 for i, f in enumerate(faults) if any(g.at <= f.at < g.heals for g in faults[:i]))

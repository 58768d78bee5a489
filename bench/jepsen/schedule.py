"""A schedule of faults drawn from a seed: what is hit, when (seconds after the schedule starts) and for how long.

Pure and deterministic: ``make_schedule(seed, duration)`` is the same list on every machine, so a failing schedule's
seed replays its faults (the timing of the pipeline around them is the machine's). Faults of different kinds may
overlap; two of one kind never do (a second SIGSTOP of a stopped server would be healed by the first's SIGCONT), nor
a crash of an Airflow component and a pause of it.

Network cuts (jepsen/network.py): the kind ``cut`` in ``kinds`` is drawn like the others, then its link and direction
from the same seed: ``cut-<a>-<b>`` cuts a and b both ways (a, b sorted), ``cut-<a>-><b>`` one way (a's packets to b
are dropped). Two cuts of one link (either direction) never overlap: a heal would undo the other's cut.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

PAUSES = ("pause-redis", "pause-zookeeper", "pause-scheduler", "pause-triggerer", "pause-connect")
KILLS = ("kill-driver", "kill-task", "kill-worker", "kill-connect")
CRASHES = ("kill-scheduler", "kill-triggerer")  # SIGKILL the component's session, started again ``hold`` s later
KINDS = PAUSES + KILLS + CRASHES
HELD = PAUSES + CRASHES  # the kinds with a hold of MIN_HOLD..MAX_HOLD (a cut has one too)
SAME_TARGET = {"kill-scheduler": "pause-scheduler", "kill-triggerer": "pause-triggerer"}  # never overlap those
CONNECT_ONLY = ("pause-connect", "kill-connect")  # the Spark Connect server runs the batches (spark_mode="connect")
SUBMIT_ONLY = ("kill-driver",)  # a task's own spark-submit driver (spark_mode="submit")
CUT = "cut"  # a network cut: the link and its direction are drawn from the seed
CUT_WEIGHT = 3  # a cut is drawn as often as three kinds of the others: the links are many, each cut one of them
LINK_NODES = ("redis", "zk", "airflow")  # and "connect" when a Spark Connect server runs
MIN_HOLD, MAX_HOLD = 1.0, 60.0  # seconds a paused process stays stopped
FIRST_AT = 10.0  # seconds of the schedule before its first fault: the pipeline is moving first


def kinds_for(spark_mode: str, network: bool = False) -> tuple[str, ...]:
    """The faults that hit something in that Spark mode: no Connect server in submit mode, no driver of a task's
    own in connect mode; with the network namespaces, cuts (``CUT_WEIGHT`` times, for ``rng.choice``)."""
    if spark_mode not in ("submit", "connect"):
        raise ValueError(f"spark mode {spark_mode!r}: use submit or connect")
    absent = CONNECT_ONLY if spark_mode == "submit" else SUBMIT_ONLY
    return tuple(k for k in KINDS if k not in absent) + ((CUT,) * CUT_WEIGHT if network else ())


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


def make_schedule(seed: int, duration: float, kinds: tuple[str, ...] | None = None,
                  nodes: tuple[str, ...] = LINK_NODES) -> list[Fault]:
    """Between 2 and one per 30 s of faults of ``kinds`` (default: the submit mode's, no cuts), starting in
    [FIRST_AT, duration - MAX_HOLD) so that every pause and cut has healed by ``duration``; sorted by start.
    ``nodes``: the ends a cut's link is drawn from. Raises ValueError when ``duration`` leaves no room."""
    last_start = duration - MAX_HOLD
    if last_start <= FIRST_AT:
        raise ValueError(f"a schedule of {duration:g} s leaves no room for a fault: give at least "
                         f"{FIRST_AT + MAX_HOLD + 1:g} s")
    kinds = kinds_for("submit") if kinds is None else kinds
    unknown = set(kinds) - {*KINDS, CUT}
    if unknown or not kinds:
        raise ValueError(f"unknown fault kinds {sorted(unknown)}; use some of {', '.join(KINDS)}, {CUT}")
    if CUT in kinds and len(set(nodes)) < 2:
        raise ValueError(f"a cut needs two nodes to draw a link from, got {list(nodes)}")
    rng = random.Random(seed)
    count = rng.randint(2, max(2, int(duration // 30)))
    faults: list[Fault] = []
    for _ in range(count):
        kind = rng.choice(kinds)
        if kind == CUT:
            a, b = rng.sample(sorted(set(nodes)), 2)
            kind = cut_kind(a, b, one_way=rng.random() < 0.5)
        hold = round(rng.uniform(MIN_HOLD, MAX_HOLD), 1) if kind in HELD or is_cut(kind) else 0.0
        at = round(rng.uniform(FIRST_AT, last_start), 1)
        while busy := [f.heals for f in faults if _holds(f.kind) == _holds(kind) and f.at <= at + hold
                       and at < f.heals + 0.99]:
            at = round(max(busy) + 1.0, 1)  # one of its kind holds then: start once it healed
        if at < last_start:
            faults.append(Fault(kind, at, hold))
    return sorted(faults, key=lambda f: (f.at, f.kind))


def overlapping(faults: list[Fault]) -> int:
    """How many faults start while another one still holds."""
    return sum(1 for i, f in enumerate(faults) if any(g.at <= f.at < g.heals for g in faults[:i]))


def cut_kind(a: str, b: str, one_way: bool) -> str:
    return f"cut-{a}->{b}" if one_way else "cut-{}-{}".format(*sorted((a, b)))


def is_cut(kind: str) -> bool:
    return kind.startswith("cut-")


def parse_cut(kind: str) -> tuple[str, str, bool]:
    """(a, b, one_way) of a cut's kind."""
    body = kind.removeprefix("cut-")
    if "->" in body:
        a, b = body.split("->")
        return a, b, True
    a, b = body.split("-")
    return a, b, False


def _holds(kind: str) -> str:
    """What a fault holds while it lasts: its kind (a crash of a component and a pause of it hold the same
    process), or for a cut its link (both directions)."""
    if not is_cut(kind):
        return SAME_TARGET.get(kind, kind)
    a, b, _ = parse_cut(kind)
    return "link-{}-{}".format(*sorted((a, b)))

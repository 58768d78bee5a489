"""When a topology's source starts its next txid by itself: a backlog that drains without a trigger from outside.

A topology with ``drain=Backlog(...)`` is scheduled on its source as well as on its ``schedule``: Airflow's
triggerer watches the source (``txdag.airflow.triggers.SourceBacklog``) and adds an event to the topology's source
asset, which starts one run, one txid. :class:`BacklogWatch` decides, poll by poll, when to: while at least
``entries`` source entries are in no batch yet, or fewer have waited ``wait`` since the watch saw them, and fewer
than ``max_active_transactions`` txids are in flight and runs active. It fires once more only after the run it
started has begun its txid: until then the entries it fired for still count as waiting, and a second event would
start a second run for the same batch, which would find nothing to read. A run that never comes (its DAG paused:
Airflow drops the event; a coordinate that failed, a run with nothing to read) is given up once the DAG has no
active run some seconds after the event, twice as long after each such run in a row. Airflow-free: pure logic over
what the trigger reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from txdag.errors import ConfigError

RUN_CREATED_SECONDS = 10.0  # an event's run exists by then (a scheduler loop or two): none active, it never came;
# doubled after each run in a row that never came (a DAG that cannot start one would get an event every 10 s)
SHORTEST_POLL = 0.1  # seconds between a trigger's polls at least: a shorter one would spin the triggerer
REARM_SECONDS = 120.0  # the last resort: a fired run that has not begun its txid by then is given up


@dataclass(frozen=True)
class Backlog:
    """A topology's source starts a txid while ``entries`` entries wait, or any has waited ``wait`` (the
    triggerer's view, counted from the poll that first saw it waiting); the triggerer looks every ``poll`` s."""

    entries: int = 1
    wait: timedelta = timedelta(seconds=60)
    poll: float = 5.0

    def __post_init__(self) -> None:
        if isinstance(self.entries, bool) or not isinstance(self.entries, int) or self.entries < 1:
            raise ConfigError(f"Backlog: entries must be an int >= 1 (how many waiting source entries start a txid), "
                              f"got {self.entries!r}")
        if not isinstance(self.wait, timedelta) or self.wait < timedelta(0):
            raise ConfigError(f"Backlog: wait must be a datetime.timedelta >= 0 (how long fewer entries wait), got "
                              f"{self.wait!r}")
        poll = self.poll
        if isinstance(poll, bool) or not isinstance(poll, int | float) or not SHORTEST_POLL <= poll < math.inf:
            raise ConfigError(f"Backlog: poll must be a finite number of seconds >= {SHORTEST_POLL} (each poll reads "
                              f"the source and ZooKeeper from Airflow's triggerer), got {self.poll!r}")


@dataclass
class BacklogWatch:
    """The trigger's memory between polls (``now`` is a monotonic clock's seconds)."""

    entries: int
    wait_seconds: float
    max_active: int
    waiting_since: float | None = None  # when the watch first saw entries waiting that no fired run has taken
    fired_at: float | None = None  # an event whose run has not begun its txid yet
    fired_after: int = 0  # the last txid when it fired
    missed: int = 0  # fired runs in a row that never came

    def observe(self, now: float, lag: int, last_txid: int, in_flight: int, active_runs: int,
                failed: bool = False) -> bool:
        """Whether to fire now: ``lag`` source entries in no batch, ``last_txid`` the newest txid begun,
        ``in_flight`` txids neither committed nor failed, ``active_runs`` the DAG's runs queued or running,
        ``failed``: a txid after the committed one failed (a new run would be refused until it is replayed)."""
        if self.fired_at is not None:
            waited = now - self.fired_at
            came = last_txid > self.fired_after
            created_within = min(RUN_CREATED_SECONDS * 2 ** self.missed, REARM_SECONDS)
            never = (active_runs == 0 and waited >= created_within) or waited >= REARM_SECONDS
            if not (came or never):
                return False
            self.fired_at = None
            if came:  # its run took a batch: what is left waits anew
                self.waiting_since, self.missed = None, 0
            else:
                self.missed += 1
        if lag <= 0:
            self.waiting_since = None
            return False
        if self.waiting_since is None:
            self.waiting_since = now
        if failed or max(in_flight, active_runs) >= self.max_active:
            return False
        if lag < self.entries and now - self.waiting_since < self.wait_seconds:
            return False
        self.fired_at, self.fired_after = now, last_txid
        return True


"""When a topology's source starts its next txid by itself: a backlog that drains without a trigger from outside.

A topology with ``drain=Backlog(...)`` is scheduled on its source as well as on its ``schedule``: Airflow's
triggerer watches the source (``txdag.airflow.triggers.SourceBacklog``) and adds an event to the topology's source
asset, which starts one run, one txid. :class:`BacklogWatch` decides, poll by poll, when to: while at least
``entries`` source entries are in no batch yet, or fewer have waited ``wait`` since the watch saw them, and fewer
than ``max_active_transactions`` txids are in flight. It fires once more only after the run it started has begun its
txid: Airflow creates an asset-triggered run at once, whatever the DAG's ``max_active_runs``, so firing on every
poll would pile up queued runs. Airflow-free: pure logic over what the trigger reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from txdag.errors import ConfigError
from txdag.txid.report import read_snapshot
from txdag.zk.records import IN_FLIGHT

REARM_SECONDS = 120.0  # a fired run that has not begun its txid by then (paused DAG, failed coordinate): fire again


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
        if isinstance(self.poll, bool) or not isinstance(self.poll, int | float) or self.poll <= 0:
            raise ConfigError(f"Backlog: poll must be a number of seconds > 0, got {self.poll!r}")


@dataclass
class BacklogWatch:
    """The trigger's memory between polls (``now`` is a monotonic clock's seconds)."""

    entries: int
    wait_seconds: float
    max_active: int
    waiting_since: float | None = None  # when the watch first saw entries waiting that no fired run has taken
    fired_at: float | None = None  # an event whose run has not begun its txid yet
    fired_after: int = 0  # the last txid when it fired

    def observe(self, now: float, lag: int, last_txid: int, in_flight: int) -> bool:
        """Whether to fire now: ``lag`` source entries in no batch, ``last_txid`` the newest txid begun,
        ``in_flight`` txids neither committed nor failed."""
        if self.fired_at is not None:
            if last_txid <= self.fired_after and now - self.fired_at < REARM_SECONDS:
                return False
            self.fired_at, self.waiting_since = None, None  # its run took a batch: what is left counts anew
        if lag <= 0:
            self.waiting_since = None
            return False
        if self.waiting_since is None:
            self.waiting_since = now
        if in_flight >= self.max_active:
            return False
        if lag < self.entries and now - self.waiting_since < self.wait_seconds:
            return False
        self.fired_at, self.fired_after = now, last_txid
        return True


def read_backlog(store: Any, spout: Any) -> tuple[int | None, int, int]:
    """What the watch observes: (source entries in no batch yet, or None where the spout cannot tell; the last
    txid begun; txids in flight). A topology that never ran has its whole source waiting."""
    if not store.client.exists(store.path):
        return spout.lag(None), 0, 0
    topo, records = read_snapshot(store)
    last = next((r for r in records if r.txid == topo.last_txid), None)
    in_flight = sum(r.status in IN_FLIGHT for r in records)
    return spout.lag(last.metadata if last else None), topo.last_txid, in_flight

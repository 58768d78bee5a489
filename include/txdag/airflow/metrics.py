"""txdag's metrics, exported two ways, as Airflow exports its own (names and labels: docs/operations.md).

- **Events, from the tasks**, through Airflow's own metrics (``[metrics]``: StatsD or OpenTelemetry, whichever the
  user's Airflow is configured for; nothing is sent when neither is on): ``txdag.<event>`` with a ``topology`` tag,
  and, while ``[metrics] legacy_names_on`` (Airflow's switch for names that carry their variables, which plain StatsD
  needs: it drops tags), ``txdag.<event>.<topology>`` too.
- **Figures, at a scrape**: ``GET /txdag/metrics`` of the plugin's app answers each topology's figures in
  Prometheus' text format, read at each scrape from ZooKeeper, the source and Airflow's database (what the
  transactions page shows), so a scrape never reports a figure older than itself.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator
from typing import Any

log = logging.getLogger(__name__)

# Events the tasks send: name -> (kind, what it counts). One home for the names; docs/operations.md lists them.
EVENTS = {
    "txids_committed": ("counter", "txids committed (a replay of a committed txid is not counted again)"),
    "commit_keys": ("counter", "keys written into the states by commits"),
    "commit_bytes": ("counter", "bytes of the staged outputs commits applied (each field and value as staged)"),
    "committed_txid": ("gauge", "the txid a commit just committed"),
    "txids_failed": ("counter", "txids failed for good (a failure and the later txids its cascade failed)"),
    "halts": ("counter", "steps that halted the topology (a store or source holds less than ZooKeeper says)"),
    "replays_automatic": ("counter", "txids txdag re-emitted itself (behind an opaque spout's changed batch)"),
}

# Figures served at a scrape: name -> (what it is, how it is read from a transactions view). A figure the view
# could not read (a lag unknown, a Redis that did not answer) is left out of that scrape, never shown as 0.
FIGURES: dict[str, tuple[str, Any]] = {
    "txdag_up": ("1 when the topology's records in ZooKeeper were read, 0 when they could not be, or not within the "
                 "scrape's time limit (the page says why)",
                 lambda v: 0 if v.get("error") else 1),
    "txdag_committed_txid": ("the last committed txid", lambda v: v.get("committed_txid")),
    "txdag_last_txid": ("the last txid allocated", lambda v: v.get("last_txid")),
    "txdag_txids_in_flight": ("txids allocated and neither committed nor failed",
                              lambda v: None if "in_flight" not in v else
                              sum(1 for row in v["in_flight"] if row.get("txid") is not None)),
    "txdag_txids_failed": ("txids failed and not replayed yet (with the txids their cascade failed), but those txdag "
                           "re-emits itself (behind an opaque spout's changed batch)",
                           lambda v: None if "failed" not in v else
                           sum(1 + len(f.get("cascade", ())) for f in v["failed"] if not f.get("automatic_replay"))),
    "txdag_txids_stalled": ("txids at the head of the line that stopped moving (the page's advice names them)",
                            lambda v: None if "stalled" not in v else len(v["stalled"])),
    "txdag_lag_entries": ("source entries in no batch yet", lambda v: v.get("lag")),
    "txdag_rejected_entries": ("source entries rejected so far (txdag rejections lists them)",
                               lambda v: v.get("rejected")),
    "txdag_paused": ("1 when the topology's DAG is paused", lambda v: None if v.get("paused") is None else
                     int(bool(v["paused"]))),
    "txdag_commits_per_minute": ("txids first committed per minute over the last 10 minutes",
                                 lambda v: v.get("commits_per_minute")),
}
# Prometheus' text format 0.0.4, which every Prometheus reads (the names need no escaping of the 1.0.0 format)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PHASES = "txdag_txid_phase_seconds"  # the newest committed txid's phases: process, wait, commit, total
# A scrape's time limit when the scraper sends none (Prometheus sends X-Prometheus-Scrape-Timeout-Seconds; its
# default scrape_timeout is 10 s), and the longest it takes whatever the scraper says
SCRAPE_SECONDS, LONGEST_SCRAPE = 8.0, 300.0


def send(event: str, topology: str, value: float = 1) -> None:
    """One event of ``EVENTS`` through Airflow's metrics, from a task (Airflow's task runner set the backend up).
    A metric never fails a task: a backend that raises is logged and the task goes on."""
    kind = EVENTS[event][0]
    try:
        from airflow.sdk.observability.stats import Stats

        for name, tags in named(event, topology, legacy_names()):
            if kind == "gauge":
                Stats.gauge(name, value, tags=tags)
            else:
                Stats.incr(name, count=int(value), tags=tags)
    except Exception as exc:  # the metrics backend's failure is not the txid's
        log.warning("topology=%s: metric txdag.%s not sent: %s: %s", topology, event, type(exc).__name__, exc)


def committed(topology: str, txid: int, applied: int, staged_bytes: int) -> None:
    """A commit task's events for the txid it committed, sent as soon as it is committed: its retry (the try died
    after the commit) finds it committed already and sends nothing, so the counters are at most once."""
    send("txids_committed", topology)
    send("commit_keys", topology, applied)
    send("commit_bytes", topology, staged_bytes)
    send("committed_txid", topology, txid)


def named(event: str, topology: str, legacy: bool) -> list[tuple[str, dict[str, str]]]:
    """The names (and tags) one event is sent under: the tagged name, and the legacy one that carries the topology."""
    tags = {"topology": topology}  # in a legacy name, a '.' of the topology is '__' (as Airflow writes a dag_id)
    return [(f"txdag.{event}", tags)] + ([(f"txdag.{event}.{topology.replace('.', '__')}", {})] if legacy else [])


def legacy_names() -> bool:
    from airflow.sdk.configuration import conf

    return conf.getboolean("metrics", "legacy_names_on", fallback=True)


def time_limit(scraper_timeout: str | None) -> float:
    """Seconds a scrape may spend reading: a second under the scraper's own timeout (Prometheus' header), so its
    answer arrives in time; ``SCRAPE_SECONDS`` without one."""
    try:
        given = float(scraper_timeout or "nan")
    except ValueError:
        given = math.nan
    return min(max(1.0, given - 1.0), LONGEST_SCRAPE) if math.isfinite(given) else SCRAPE_SECONDS


def exposition(views: Iterable[dict[str, Any]]) -> bytes:
    """The topologies' figures in Prometheus' text format (one gauge family per figure, labelled ``topology``)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.registry import Collector

    views = list(views)

    class Figures(Collector):
        def collect(self) -> Iterator[GaugeMetricFamily]:
            for name, (help_text, read) in FIGURES.items():
                family = GaugeMetricFamily(name, help_text, labels=["topology"])
                for view in views:
                    if (value := read(view)) is not None:
                        family.add_metric([view["topology"]], float(value))
                yield family
            phases = GaugeMetricFamily(PHASES, "the newest committed txid's seconds in each phase: process (emitted "
                                       "to processed), wait (for txid - 1), commit, total (first emission to "
                                       "committed)", labels=["topology", "phase"])
            for view in views:
                for phase, seconds in (view.get("phase_seconds") or {}).items():
                    phases.add_metric([view["topology"], phase], seconds)
            yield phases

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Figures())
    return generate_latest(registry)

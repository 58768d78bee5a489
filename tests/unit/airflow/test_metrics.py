"""txdag's metrics as a scraper and a StatsD server receive them: the figures of transactions views in Prometheus'
text format, and the names an event is sent under."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from txdag.airflow import metrics, transactions

RUNNING = {"topology": "t1", "committed_txid": 4, "last_txid": 6, "lag": 120, "rejected": 3, "paused": False,
           "in_flight": [{"txid": None, "phase": "coordinating"}, {"txid": 5}, {"txid": 6}],
           "failed": [], "stalled": [], "commits_per_minute": 1.5,
           "phase_seconds": {"process": 2.5, "wait": 0.0, "commit": 0.25, "total": 3.0}}
BROKEN = {"topology": "t2", "error": "ServiceUnavailable: ZooKeeper did not answer"}
FAILED = {"topology": "t3", "committed_txid": 1, "last_txid": 5, "lag": None, "rejected": None, "paused": True,
          "in_flight": [], "failed": [{"txid": 2, "cascade": [3, 4], "automatic_replay": False},
                                      {"txid": 5, "cascade": [], "automatic_replay": True}],  # txdag re-emits it
          "stalled": ["txid 2 ..."],
          "commits_per_minute": 0.0, "phase_seconds": {}}


def samples(views: list[dict]) -> dict[tuple[str, str, str], float]:
    text = metrics.exposition(views).decode()
    return {(s.name, s.labels["topology"], s.labels.get("phase", "")): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_each_figure_is_a_gauge_per_topology_and_an_unread_one_is_left_out() -> None:
    found = samples([RUNNING, BROKEN, FAILED])
    assert {k[0] for k in found} == set(metrics.FIGURES) | {metrics.PHASES}
    t1 = {name: v for (name, topology, phase), v in found.items() if topology == "t1" and not phase}
    assert t1 == {"txdag_up": 1, "txdag_committed_txid": 4, "txdag_last_txid": 6, "txdag_txids_in_flight": 2,
                  "txdag_txids_failed": 0, "txdag_txids_stalled": 0, "txdag_lag_entries": 120,
                  "txdag_rejected_entries": 3, "txdag_paused": 0, "txdag_commits_per_minute": 1.5}
    assert {p: v for (name, t, p), v in found.items() if t == "t1" and p} == RUNNING["phase_seconds"]
    assert {name: v for (name, t, _), v in found.items() if t == "t2"} == {"txdag_up": 0}  # nothing shown as 0
    t3 = {name: v for (name, t, _), v in found.items() if t == "t3"}
    assert (t3["txdag_txids_failed"], t3["txdag_txids_stalled"], t3["txdag_paused"]) == (3, 1, 1)
    assert "txdag_lag_entries" not in t3 and "txdag_rejected_entries" not in t3


def test_no_topology_is_still_every_family_declared() -> None:
    text = metrics.exposition([]).decode()
    assert {f.name for f in text_string_to_metric_families(text)} == set(metrics.FIGURES) | {metrics.PHASES}


def test_topologies_that_hang_are_down_within_the_time_limit_and_the_others_are_read_at_once() -> None:
    release = threading.Event()
    stuck = ["stuck", *(f"stuck{i}" for i in range(8))]  # more than a pool of 8 readers would hold

    def read(name: str) -> dict:
        if name in stuck:  # a read blocked on a stopped Redis
            release.wait(30)
        if name == "raises":
            raise ConnectionError("Redis at 127.0.0.1:6391 did not answer")
        time.sleep(0.3)  # each of the others takes a while: read one after another, 6 take 1.8 s
        return {**RUNNING, "topology": name}

    names = [*stuck, "raises", *(f"ok{i}" for i in range(6))]
    started = time.monotonic()
    views = transactions.views(names, 1.0, read)
    took = time.monotonic() - started
    release.set()
    assert 1.0 <= took < 10, took  # it did not wait for the hung reads
    assert [v["topology"] for v in views] == names  # in the order given
    assert all("did not answer within 1 s" in v["error"] for v in views[:9])
    assert views[9]["error"] == "ConnectionError: Redis at 127.0.0.1:6391 did not answer"
    assert all("error" not in v and v["committed_txid"] == 4 for v in views[10:])  # read, behind 9 hung ones
    found = samples(views)
    assert found[("txdag_up", "stuck", "")] == 0 and found[("txdag_up", "ok5", "")] == 1


def test_the_time_limit_is_a_second_under_the_scrapers_own() -> None:
    assert metrics.time_limit("10") == 9.0  # Prometheus' default scrape_timeout, from its header
    assert metrics.time_limit("1.5") == 1.0  # never under a second
    assert metrics.time_limit(None) == metrics.time_limit("") == metrics.time_limit("soon") == metrics.SCRAPE_SECONDS
    assert metrics.time_limit("nan") == metrics.time_limit("inf") == metrics.SCRAPE_SECONDS
    assert metrics.time_limit("1e300") == metrics.LONGEST_SCRAPE  # no wait that overflows


def test_an_event_goes_under_a_tagged_name_and_while_legacy_names_are_on_one_naming_the_topology() -> None:
    assert metrics.named("commit_keys", "t1", legacy=False) == [("txdag.commit_keys", {"topology": "t1"})]
    assert metrics.named("commit_keys", "t1", legacy=True) == [("txdag.commit_keys", {"topology": "t1"}),
                                                               ("txdag.commit_keys.t1", {})]
    assert metrics.named("halts", "a.b", legacy=True)[1] == ("txdag.halts.a__b", {})  # a dot: Airflow's '__'



@pytest.fixture
def statsd(monkeypatch) -> Iterator[Callable[[int], list[str]]]:
    """A UDP socket as a StatsD server, and Airflow's own StatsD client set up as its task runner sets it up from
    ``[metrics]``; yields: the next ``n`` lines received, sorted."""
    from airflow.sdk._shared.observability.metrics import stats
    from airflow.sdk.observability.metrics import stats_utils

    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(5)
    for option, value in {"STATSD_ON": "True", "STATSD_HOST": "127.0.0.1", "STATSD_PORT": str(server.getsockname()[1]),
                          "LEGACY_NAMES_ON": "True"}.items():
        monkeypatch.setenv(f"AIRFLOW__METRICS__{option}", value)
    stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=True)
    stats._backend = None  # the factory above, not a backend an earlier test made
    try:
        yield lambda n: sorted(server.recv(65535).decode() for _ in range(n))
    finally:
        server.close()
        stats._factory, stats._backend = None, None


def test_events_reach_a_statsd_server_through_airflows_statsd_client(statsd) -> None:
    metrics.send("commit_keys", "t1", 42)
    metrics.send("committed_txid", "t1", 7)
    assert statsd(4) == sorted(["airflow.txdag.commit_keys:42|c", "airflow.txdag.commit_keys.t1:42|c",
                                "airflow.txdag.committed_txid:7|g", "airflow.txdag.committed_txid.t1:7|g"])


@pytest.mark.usefixtures("airflow_home")
def test_the_commit_task_counts_its_commit_and_a_halt_but_not_a_replay_of_a_committed_txid(statsd) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from txdag.airflow.operators import commit_result, coordinate_refusal
    from txdag.attempt import TransactionAttempt
    from txdag.protocol import AlreadyCommitted, Committed, Halted

    task, t = SimpleNamespace(log=logging.getLogger("test.metrics")), SimpleNamespace(topology_id="t1")
    tx = TransactionAttempt(5, 1)
    commit_result(task, t, tx, AlreadyCommitted(tx, "txid 5 is committed"))  # sends nothing
    commit_result(task, t, tx, Committed(tx, applied=12))  # nothing either: the commit step sent them (committed)
    metrics.committed("t1", 5, 12, 345)
    assert statsd(8) == sorted(["airflow.txdag.txids_committed:1|c", "airflow.txdag.txids_committed.t1:1|c",
                                "airflow.txdag.commit_keys:12|c", "airflow.txdag.commit_keys.t1:12|c",
                                "airflow.txdag.commit_bytes:345|c", "airflow.txdag.commit_bytes.t1:345|c",
                                "airflow.txdag.committed_txid:5|g", "airflow.txdag.committed_txid.t1:5|g"])
    with pytest.raises(AirflowFailException):
        commit_result(task, t, tx, Halted("the state holds less than ZooKeeper says", tx))
    assert isinstance(coordinate_refusal(task, t, "run1", Halted("the source went backwards")), AirflowFailException)
    assert statsd(4) == sorted(["airflow.txdag.halts:1|c", "airflow.txdag.halts.t1:1|c"] * 2)


def test_a_metrics_backend_that_fails_does_not_fail_the_task(caplog) -> None:
    from airflow.sdk._shared.observability.metrics import stats

    def broken() -> None:
        raise RuntimeError("no backend")

    stats.initialize(factory=broken, export_legacy_names=False)  # type: ignore[arg-type]
    stats._backend = None
    try:
        metrics.send("txids_committed", "t1")
    finally:
        stats._factory, stats._backend = None, None
    assert "topology=t1: metric txdag.txids_committed not sent: RuntimeError: no backend" in caplog.text

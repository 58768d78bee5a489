"""The transactions page without a running Airflow: its HTML from a view, and its refusals before any service is
touched (no token, a forged token, an action without the CSRF header). The authorised paths are tested against
a real Airflow in tests/e2e/test_ui_page.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from txdag.airflow.page import app
from txdag.airflow.page_html import render_page
from txdag.commit.rejections import rejection_row
from txdag.txid.report import transactions_view
from txdag.zk.records import TopologyRecord, TxidRecord, TxStatus

SIMPLE = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"


@pytest.fixture
def client(monkeypatch, tmp_path) -> TestClient:
    monkeypatch.setenv("AIRFLOW__CORE__AUTH_MANAGER", SIMPLE)
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "unit-test-secret-" + "x" * 48)
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(tmp_path / "passwords.json"))
    from airflow.api_fastapi.app import create_auth_manager

    create_auth_manager()
    return TestClient(app)


def test_reads_without_a_token_are_401_and_say_how_to_log_in(client) -> None:
    for path in ("/api/topologies", "/api/topologies/tweets_analytics"):
        response = client.get(path)
        assert response.status_code == 401 and "log in to the Airflow UI" in response.json()["detail"]


def test_a_token_airflow_did_not_sign_is_refused(client) -> None:
    response = client.get("/api/topologies", headers={"Authorization": "Bearer not-a-jwt"})
    assert response.status_code == 403 and response.json()["detail"] == "Invalid JWT token"
    assert client.get("/api/topologies", cookies={"_token": "forged.jwt.token"}).status_code == 403


def test_actions_need_the_csrf_header_then_a_token(client) -> None:
    no_header = client.post("/api/topologies/t/pause", json={"paused": True}, cookies={"_token": "x"})
    assert no_header.status_code == 403 and "X-Txdag-Csrf" in no_header.json()["detail"]
    no_token = client.post("/api/topologies/t/replay", json={"from_txid": 3}, headers={"X-Txdag-Csrf": "1"})
    assert no_token.status_code == 401


def test_page_html_carries_the_figures_links_and_escapes_names() -> None:
    meta = {"v": 1, "from": 1, "quantity": 100}
    one = TxidRecord.new(1, "manual__<1>+x", meta, "2026-11-23T11:00:00.000+00:00")
    one = one.moved(TxStatus.FAILED, "2026-11-23T11:01:00.000+00:00", failed_by=1, error="<b>boom</b>")
    two = TxidRecord.new(2, "manual__2", {"v": 1, "from": 101, "quantity": 40}, "2026-11-23T11:00:00.000+00:00")
    two = two.moved(TxStatus.FAILED, "2026-11-23T11:01:00.000+00:00", failed_by=1, error="txid 1 failed")
    view = transactions_view("tweets", TopologyRecord(2, 0), [one, two], now=datetime(2026, 11, 23, 12, tzinfo=UTC),
                             runs={"manual__<1>+x": "failed", "scheduled__y": "running"}, lag=60, paused=True)
    html = render_page([view], None, {"tweets": True})
    for fragment in ('data-figure="committed">0<', 'data-figure="last">2<', 'data-figure="lag">60<',
                     'data-figure="failed">2<', 'data-figure="in-flight">1<', 'data-failed-txid="1" data-cascade="2"',
                     'data-phase="coordinating"', 'href="../dags/tweets/runs/manual__%3C1%3E%2Bx"',
                     "&lt;b&gt;boom&lt;/b&gt;", 'data-paused="true">Unpause<',
                     '<tr id="tweets-txid-2" data-row-txid="2">'):
        assert fragment in html, fragment
    assert "<b>boom" not in html
    assert 'data-action="pause"' not in render_page([view], None, {"tweets": False})  # a viewer gets no buttons


def test_a_tasks_transaction_link_points_at_its_txids_row_under_the_api_base_url(monkeypatch) -> None:
    from txdag.airflow.links import TxidLink, page_url

    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/")
    assert page_url("tweets.v2", 7) == "https://airflow.example.com/txdag/#tweets.v2-txid-7"
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "")
    assert page_url("tweets", 7) == "/txdag/#tweets-txid-7"
    assert (TxidLink().name, TxidLink().xcom_key) == ("Transaction", "_link_TxidLink")


def test_a_stalled_head_of_the_line_leads_with_what_it_waits_on_and_the_retry_command() -> None:
    meta = {"v": 1, "from": 1, "quantity": 100}
    stuck = TxidRecord.new(3, "manual__3", meta, "2026-11-23T11:55:00.000+00:00")  # processing for 5 min
    behind = TxidRecord.new(4, "manual__4", meta, "2026-11-23T11:59:00.000+00:00")
    behind = behind.moved(TxStatus.PROCESSED, "2026-11-23T11:59:50.000+00:00")
    now = datetime(2026, 11, 23, 12, tzinfo=UTC)
    view = transactions_view("tweets", TopologyRecord(4, 2), [stuck, behind], now=now,
                             runs={"manual__3": "running", "manual__4": "running"}, lag=0, paused=False)
    html = render_page([view], None, {"tweets": True})
    stalled = html.index("data-stalled>")
    assert "has waited on its process task for 5 min 00 s" in html[stalled:]
    assert "to retry it now: txdag retry tweets 3" in html[stalled:]
    assert stalled < html.index("data-in-flight>"), "the stalled txid comes before the in-flight table"
    assert "<td data-waits-on>its process task (attempt 1)</td><td>5 min 00 s</td>" in html
    assert "<td data-waits-on>txid 3 to commit first</td><td>10 s</td>" in html


def test_a_failed_txid_leads_the_section_with_its_headline_and_ways_out_the_spark_log_folded_away() -> None:
    error = ("process failed: Cannot execute: spark-submit ... " + "INFO noise " * 100 + "\ntxdag job failed: "
             "topology=t txid=1 attempt=2: BatchReadError: key 'k:25' is missing; `txdag accept-missing t 1 ...`")
    one = TxidRecord.new(1, "manual__1", {"v": 1, "from": 1, "quantity": 40}, "2026-11-23T11:00:00.000+00:00")
    one = one.moved(TxStatus.FAILED, "2026-11-23T11:01:00.000+00:00", failed_by=1, error=error)
    view = transactions_view("t", TopologyRecord(1, 0), [one], now=datetime(2026, 11, 23, 12, tzinfo=UTC))
    html = render_page([view], None, {"t": True})
    headline = "process failed: the Spark job failed: BatchReadError: key &#x27;k:25&#x27; is missing"
    assert f"<span data-headline>{headline}" in html
    assert html.index("data-headline") < html.index('data-figure="committed"') < html.index("<h3>In flight")
    assert html.count("<li data-way-out>") == 3 and "<code>txdag accept-missing t 1 --confirm --replay</code>" in html
    assert "INFO noise" in html.split("<details>")[1] and "INFO noise" not in html.split("<details>")[0]


def test_a_run_queued_behind_max_active_runs_is_named_above_the_figures_with_the_runs_holding_the_slots() -> None:
    meta = {"v": 1, "from": 1, "quantity": 100}
    head = TxidRecord.new(3, "manual__3", meta, "2026-11-23T11:50:00.000+00:00")  # cleared by a replay: queued
    behind = TxidRecord.new(4, "manual__4", meta, "2026-11-23T11:51:00.000+00:00")
    behind = behind.moved(TxStatus.PROCESSED, "2026-11-23T11:52:00.000+00:00")
    runs = {"manual__3": "queued", "manual__4": "running", "scheduled__<5>": "running"}
    view = transactions_view("tweets", TopologyRecord(4, 2), [head, behind], now=datetime(2026, 11, 23, 12, tzinfo=UTC),
                             runs=runs, lag=0, paused=False, max_active_runs=2)
    html = render_page([view], None, {"tweets": True})
    line = html[html.index("data-run-slots>"):]
    assert line.startswith("data-run-slots>run manual__3 (txid 3, being replayed) is queued behind max_active_runs "
                           "(2): the slots are held by run manual__4 (txid 4: waits on txid 3 to commit first) and "
                           "run scheduled__&lt;5&gt; (coordinating: no txid yet, waiting for a place among "
                           "max_active_transactions). It starts when a slot frees: run scheduled__&lt;5&gt; gives")
    assert html.index("data-run-slots") < html.index('data-figure="committed"')
    assert "data-stalled" not in html  # 10 min in one phase, but its run has not started: no task to retry


def test_a_rejection_record_written_by_someone_else_is_text_on_the_page() -> None:
    """The rejections hash is writable by the topology's Redis user: its txid and attempt fields are not trusted
    to be numbers, and reach the page as text (they were written into the HTML as they were)."""
    view = transactions_view("tweets", TopologyRecord(1, 1), [], now=datetime(2026, 11, 23, 12, tzinfo=UTC),
                             runs={}, lag=0, paused=False)
    hostile = {"txid": "<script>alert(1)</script>", "attempt": "<img src=x onerror=alert(2)>",
               "partition": "<i>p</i>", "reason": "<b>r</b>", "at": "<u>t</u>"}
    view["rejections"] = [rejection_row(b"<e>", json.dumps(hostile))]
    view["rejected"] = 1
    html = render_page([view], None, {"tweets": True})
    for raw in ("<script>alert", "<img", "<i>p", "<b>r", "<u>t", "<e>"):
        assert raw not in html, raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;img src=x onerror=alert(2)&gt;" in html

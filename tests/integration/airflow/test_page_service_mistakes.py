"""The transactions page's API against mistakes that reach ZooKeeper and Redis (real ones), without a running
Airflow: its app under a test client, as tests/unit/airflow/test_page_mistakes.py does. A replay of a topology
that never ran or beyond the last txid is a 409 that says what to do (never an internal hint), a service down a
503, a wrong password a 500 naming the connection to fix; the rejections are listed with their reason and time."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import redis
from access import ZK_AUTH
from fastapi.testclient import TestClient
from support.cli_project import set_connections
from support.mistakes import JWT_SECRET, check_answer, detail_of, page_token
from support.servers import Proxy

from txdag.airflow import transactions
from txdag.airflow.hooks import airflow_clients
from txdag.airflow.page import app
from txdag.airflow.page_html import render_page
from txdag.attempt import TransactionAttempt
from txdag.commit.rejections import record_rejections
from txdag.spouts.base import Rejection
from txdag.txid.report import read_snapshot, transactions_view
from txdag.zk.client import connect_zk
from txdag.zk.records import TopologyRecord, TxidRecord
from txdag.zk.store import TransactionStore

pytestmark = pytest.mark.usefixtures("airflow_home")
SIMPLE = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
DB = 11
DAG_FILE = """
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

ran = render(TransactionalTopology("{t}", source=TweetsSource(prefix="{t}:"), job="spark_jobs/job.py",
                                   states=[State("s", namespace="{t}:s")]), dag_file=__file__)
fresh = render(TransactionalTopology("{t}_new", source=TweetsSource(prefix="{t}_new:"), job="spark_jobs/job.py",
                                     states=[State("s", namespace="{t}_new:s")]), dag_file=__file__)
"""
CSRF = {"X-Txdag-Csrf": "1"}
NOW = "2026-11-24T12:00:00.000+00:00"


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def conns(monkeypatch, redis_url, zk_hosts, zk_root):
    return set_connections(monkeypatch, redis_url, zk_hosts, zk_root, DB, {"timeout": 2})


def set_conn(monkeypatch, conns, name: str, **changes) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{name.upper()}_DEFAULT", json.dumps({**conns[name], **changes}))


@pytest.fixture
def page(monkeypatch, tmp_path, conns, redis_url, zk_hosts, zk_root, prefix):
    """The page over a DAG folder of two topologies: ``<prefix>`` with five txids and one rejected entry, and
    ``<prefix>_new``, which never ran. Its caches start empty, its ZooKeeper sessions are closed afterwards."""
    monkeypatch.setenv("AIRFLOW__CORE__AUTH_MANAGER", SIMPLE)
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", JWT_SECRET)
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(tmp_path / "passwords.json"))
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", f"http://127.0.0.1:{unused_port()}")
    for folder in ("dags", "spark_jobs"):
        (tmp_path / folder).mkdir()
    (tmp_path / "spark_jobs" / "job.py").write_text("")
    (tmp_path / "dags" / "topologies.py").write_text(DAG_FILE.format(t=prefix))
    monkeypatch.setenv("AIRFLOW__TXDAG__DAGS_FOLDER", str(tmp_path / "dags"))
    monkeypatch.setattr(transactions, "_definitions", (0.0, {}, {}))
    monkeypatch.setattr(transactions, "_clients", airflow_clients())  # connections resolved afresh
    zk = connect_zk(zk_hosts, auth=ZK_AUTH)
    store = TransactionStore(zk, prefix, root=zk_root)
    store.ensure()
    for txid in range(1, 6):  # five txids of one tweet each, 1-3 committed
        topology, version = store.read_topology()
        store.allocate(TxidRecord.new(txid, f"run{txid}", {"v": 1, "from": txid, "quantity": 1}, NOW), topology,
                       version)
    store.update([], (TopologyRecord(5, 3), store.read_topology()[1]))
    client = redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + f"/{DB}")
    record_rejections(client, prefix, TransactionAttempt(2, 1), [Rejection("57", "key '57' is not valid UTF-8")])
    from airflow.api_fastapi.app import create_auth_manager

    test_client = TestClient(app)
    test_client.headers["Authorization"] = f"Bearer {page_token(create_auth_manager(), JWT_SECRET)}"
    yield test_client
    transactions._clients.close()
    client.delete(f"txdag:rejected:{{{prefix}}}")
    client.close()
    zk.stop()
    zk.close()


PAGE_MISTAKES = [  # what is wrong, the request, the status it must get, what the answer must say
    ("", "post", "/api/topologies/{t}_new/replay", {"from_txid": 1}, 409,
     ["topology '{t}_new' has not run yet (no txid in ZooKeeper): nothing to replay", "trigger its DAG first"]),
    ("", "post", "/api/topologies/{t}/replay", {"from_txid": 9}, 409,
     ["topology '{t}' has txids 1..5, so there is no txid 9 to replay from", "give one in 1..5"]),
    ("", "post", "/api/topologies/{t}/replay", {"from_txid": 4}, 503,
     ["Airflow's REST API did not answer", "check the API server's [api] base_url"]),
    ("zk down", "post", "/api/topologies/{t}/replay", {"from_txid": 4}, 503,
     ["ZooKeeper is not reachable at", "start it"]),
    ("zk wrong password", "post", "/api/topologies/{t}/replay", {"from_txid": 4}, 500,
     ["txdag is misconfigured on this Airflow", "ZooKeeper refused access", "(NoAuth)", "same user and password"]),
    ("redis down", "get", "/api/topologies/{t}/rejections", None, 503, ["Redis at 127.0.0.1:", "is unreachable"]),
    # a read that cannot read what it reports is an error status, never a 200 with an error inside (issue 37)
    ("zk down", "get", "/api/topologies", None, 503, ["ZooKeeper is not reachable at", "start it"]),
    ("zk down", "get", "/api/topologies/{t}", None, 503, ["ZooKeeper is not reachable at", "start it"]),
    ("zk wrong password", "get", "/api/topologies", None, 500,
     ["txdag is misconfigured on this Airflow", "ZooKeeper refused to list", "(NoAuth)"]),
    ("redis down", "get", "/api/topologies", None, 503,
     ["Redis at 127.0.0.1:", "is unreachable while reading the rejections of topology '{t}'", "start it"]),
    ("redis down", "get", "/api/topologies/{t}", None, 503, ["Redis at 127.0.0.1:", "is unreachable"]),
    ("redis wrong password", "get", "/api/topologies/{t}/rejections", None, 500,
     ["txdag is misconfigured on this Airflow", "refused user", "check the login and password"]),
]


@pytest.mark.parametrize("wrong, method, path, body, status, fragments", PAGE_MISTAKES,
                         ids=[f"{c[0] or 'ok'}: {c[1]} {c[2]} {c[3] or ''}" for c in PAGE_MISTAKES])
def test_a_mistake_on_the_page_gets_its_status_and_a_sentence(page, monkeypatch, conns, prefix, wrong, method,
                                                              path, body, status, fragments) -> None:
    if wrong:
        service, problem = wrong.split(" ", 1)
        name = "zookeeper" if service == "zk" else service
        set_conn(monkeypatch, conns, name, **({"port": unused_port()} if problem == "down" else
                                              {"password": "wrong-password"}))
    kwargs = {"json": body} if body is not None else {}
    response = getattr(page, method)(path.format(t=prefix), headers=CSRF, **kwargs)
    check_answer(response.status_code, detail_of(response), status, [f.format(t=prefix) for f in fragments],
                 what=f"{wrong}: {method} {path}")
    assert "ensure()" not in response.text and "TransactionStore" not in response.text  # no internal hint


class FakeAirflow(BaseHTTPRequestHandler):
    """Airflow's REST API as far as a replay goes: every POST answers ``{}`` and is recorded (``server.posts``)."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.server.posts.append(self.path)  # type: ignore[attr-defined]
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def cut_zk(page, monkeypatch, conns, zk_hosts) -> Iterator[tuple[Proxy, ThreadingHTTPServer]]:
    """The page's ZooKeeper behind a proxy that can cut it (its session already open, as in an API server that ran
    before the outage), and a stand-in Airflow that records the runs a replay clears."""
    proxy = Proxy(int(zk_hosts.split(",")[0].rsplit(":", 1)[1]))
    airflow = ThreadingHTTPServer(("127.0.0.1", 0), FakeAirflow)
    airflow.posts = []  # type: ignore[attr-defined]
    threading.Thread(target=airflow.serve_forever, daemon=True).start()
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", f"http://127.0.0.1:{airflow.server_address[1]}")
    set_conn(monkeypatch, conns, "zookeeper", port=proxy.port)
    yield proxy, airflow
    airflow.shutdown()
    airflow.server_close()
    proxy.close()


def test_a_replay_while_zookeeper_is_cut_answers_503_at_once_and_is_never_done_later(page, cut_zk, prefix) -> None:
    """Issue 37: the page's replay hung while ZooKeeper was down, then ran once it was back. Now it answers 503
    within the session timeout (2 s here) and leaves nothing behind: once ZooKeeper is back, only the replay asked
    then clears runs. The reads answer 503 too, not 200 with an error inside."""
    proxy, airflow = cut_zk
    opened = page.post(f"/api/topologies/{prefix}/replay", headers=CSRF, json={"from_txid": 9})
    assert opened.status_code == 409, opened.text  # the session is open (a refusal: no Airflow here to clear runs)
    proxy.cut()
    answers: list[Any] = []
    asking = threading.Thread(target=lambda: answers.append(
        page.post(f"/api/topologies/{prefix}/replay", headers=CSRF, json={"from_txid": 4})), daemon=True)
    asking.start()
    asking.join(timeout=60)  # a bound for the test, not a speed figure: without one the replay waits for ZooKeeper
    assert answers, "the replay got no answer within 60 s while ZooKeeper was cut"
    check_answer(answers[0].status_code, detail_of(answers[0]), 503,
                 [f"ZooKeeper at {proxy.hosts}", "unreachable", f"topology '{prefix}'", "start it"], what="replay")
    for path in ("/api/topologies", f"/api/topologies/{prefix}"):
        response = page.get(path)
        check_answer(response.status_code, detail_of(response), 503, [f"ZooKeeper at {proxy.hosts}", "start it"],
                     what=f"get {path}")
    proxy.heal()
    deadline = time.monotonic() + 60
    while (again := page.post(f"/api/topologies/{prefix}/replay", headers=CSRF, json={"from_txid": 5})
           ).status_code == 503 and time.monotonic() < deadline:
        time.sleep(0.2)  # kazoo reconnects on its own
    assert again.status_code == 200, again.text
    time.sleep(1)  # what the first replay left queued would have run by now
    assert airflow.posts == [f"/api/v2/dags/{prefix}/dagRuns/run5/clear"], "the replay refused was done later"


def test_a_replay_while_another_replay_of_the_topology_runs_is_a_409_naming_it(page, cut_zk, zk_client, zk_root,
                                                                             prefix) -> None:
    """Issue 37: the page's replay takes the topology's replay lock as `txdag replay` does; held -> 409, no run
    cleared."""
    _, airflow = cut_zk
    lock = zk_client.Lock(f"{zk_root}/{prefix}/replay-lock", identifier=f"txdag replay {prefix} --from 4 by ops@host")
    assert lock.acquire(timeout=10)
    try:
        response = page.post(f"/api/topologies/{prefix}/replay", headers=CSRF, json={"from_txid": 4})
    finally:
        lock.release()
    check_answer(response.status_code, detail_of(response), 409,
                 [f"topology '{prefix}': a replay of it is in progress (txdag replay {prefix} --from 4 by ops@host)",
                  f"Wait for it to finish, then see `txdag status {prefix}`"], what="replay beside another")
    assert airflow.posts == []


def test_the_rejections_are_listed_newest_first_with_their_reason_and_time(page, redis_url, prefix) -> None:
    client = redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + f"/{DB}")
    client.hset(f"txdag:rejected:{{{prefix}}}", mapping={  # one recorded before "at" existed, one not txdag's
        "3": json.dumps({"txid": 1, "attempt": 1, "partition": None, "reason": "an old one"}), "9": "garbage"})
    record_rejections(client, prefix, TransactionAttempt(5, 2), [Rejection("201", "the newest")])
    client.close()
    response = page.get(f"/api/topologies/{prefix}/rejections", params={"limit": 3})
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["total"] == 4 and [r["id"] for r in data["rejections"]] == ["201", "57", "9"]
    newest = data["rejections"][0]
    assert (newest["txid"], newest["attempt"], newest["reason"]) == (5, 2, "the newest")
    assert newest["at"] > data["rejections"][1]["at"] and data["rejections"][2]["at"] is None
    assert data["rejections"][2]["reason"].startswith("<not a txdag rejection record")

    rejected, rows, error = transactions.rejections_of(prefix)  # what the page's section of the topology shows
    assert (rejected, [r["id"] for r in rows], error) == (4, ["201", "57", "9", "3"], None)
    topology, records = read_snapshot(transactions.store_of(prefix))
    view = {**transactions_view(prefix, topology, records, now=datetime.now(UTC), runs={}, lag=0),
            "rejected": rejected, "rejections": rows}
    html = render_page([view], None, {prefix: False})
    for fragment in ('data-figure="rejected">4<', 'data-rejected-id="201"', "the newest",
                     f"txdag rejections {prefix}", "&lt;not a txdag rejection record"):
        assert fragment in html, fragment

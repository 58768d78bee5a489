"""The transactions page's API against mistakes, without services: each request gets its status and a one-sentence
``detail`` naming the problem and the fix. A topology no DAG file defines is a 404, never an empty record; a
malformed request is a 422 whose detail the page's message line can show. The cases that reach ZooKeeper or Redis
are in tests/integration/airflow/test_page_service_mistakes.py."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from support.mistakes import JWT_SECRET, check_answer, detail_of, page_token

from txdag.airflow import transactions
from txdag.airflow.page import app

SIMPLE = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
DAG_FILE = """
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

dag = render(TransactionalTopology("known", source=TweetsSource(), job="spark_jobs/job.py", states=[State("s")]),
             dag_file=__file__)
"""
CSRF = {"X-Txdag-Csrf": "1"}


@pytest.fixture
def page(monkeypatch, tmp_path) -> TestClient:
    """The page's app as the admin of a Simple auth manager, over a DAG folder that defines topology ``known``."""
    monkeypatch.setenv("AIRFLOW__CORE__AUTH_MANAGER", SIMPLE)
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", JWT_SECRET)
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(tmp_path / "passwords.json"))
    (tmp_path / "dags").mkdir()
    (tmp_path / "spark_jobs").mkdir()
    (tmp_path / "spark_jobs" / "job.py").write_text("")
    (tmp_path / "dags" / "known.py").write_text(DAG_FILE)
    monkeypatch.setenv("AIRFLOW__TXDAG__DAGS_FOLDER", str(tmp_path / "dags"))
    monkeypatch.setattr(transactions, "_definitions", (0.0, {}, {}))
    from airflow.api_fastapi.app import create_auth_manager

    client = TestClient(app)
    client.headers["Authorization"] = f"Bearer {page_token(create_auth_manager(), JWT_SECRET)}"
    return client


PAGE_MISTAKES = [  # what the user does, the request, the status it must get, what the answer must say
    ("read a topology no DAG defines", "get", "/api/topologies/nosuch", None, 404,
     ["no DAG file defines topology 'nosuch'", "it defines known", "check the name"]),
    ("read the rejections of a topology no DAG defines", "get", "/api/topologies/nosuch/rejections", None, 404,
     ["no DAG file defines topology 'nosuch'"]),
    ("replay a topology no DAG defines", "post", "/api/topologies/nosuch/replay", {"from_txid": 1}, 404,
     ["no DAG file defines topology 'nosuch'", "check the name"]),
    ("pause a topology no DAG defines", "post", "/api/topologies/nosuch/pause", {"paused": True}, 404,
     ["no DAG file defines topology 'nosuch'"]),
    ("replay from a txid that is not a number", "post", "/api/topologies/known/replay", {"from_txid": "four"}, 422,
     ["malformed request", "from_txid", "valid integer", "send JSON"]),
    ("replay from a txid in a string", "post", "/api/topologies/known/replay", {"from_txid": "3"}, 422,
     ["malformed request", "from_txid", "valid integer"]),
    ("replay from a txid that is a float", "post", "/api/topologies/known/replay", {"from_txid": 3.0}, 422,
     ["malformed request", "from_txid", "valid integer"]),
    ("replay from txid 0", "post", "/api/topologies/known/replay", {"from_txid": 0}, 422,
     ["from_txid must be a txid >= 1, got 0"]),
    ("replay from a negative txid", "post", "/api/topologies/known/replay", {"from_txid": -3}, 422,
     ["from_txid must be a txid >= 1, got -3"]),
    ("replay without saying from which txid", "post", "/api/topologies/known/replay", {}, 422,
     ["malformed request", "from_txid", "Field required"]),
    ("pause with a flag that is not a boolean", "post", "/api/topologies/known/pause", {"paused": "maybe"}, 422,
     ["malformed request", "paused"]),
    ("list rejections with a negative limit", "get", "/api/topologies/known/rejections?limit=-1", None, 422,
     ["malformed request", "limit", "greater than or equal to 0"]),
    ("list rejections with a limit that is not a number", "get", "/api/topologies/known/rejections?limit=all",
     None, 422, ["malformed request", "limit"]),
]


@pytest.mark.parametrize("what, method, path, body, status, fragments", PAGE_MISTAKES,
                         ids=[case[0] for case in PAGE_MISTAKES])
def test_a_mistake_on_the_page_gets_its_status_and_a_sentence(page, what, method, path, body, status,
                                                              fragments) -> None:
    kwargs = {"json": body} if body is not None else {}
    response = getattr(page, method)(path, headers=CSRF, **kwargs)
    check_answer(response.status_code, detail_of(response), status, fragments, what=what)
    assert "TransactionStore" not in response.text and "ensure()" not in response.text  # no internal hint


REFUSALS = [  # before any service is touched: the page's authentication and CSRF
    ("read without logging in", "get", "/api/topologies", {}, None, 401, ["log in to the Airflow UI"]),
    ("read with a token Airflow did not sign", "get", "/api/topologies/known",
     {"Authorization": "Bearer not-a-jwt"}, None, 403, ["Invalid JWT token"]),
    ("act without the CSRF header", "post", "/api/topologies/known/replay", {"X-Txdag-Csrf": ""},
     {"from_txid": 1}, 403, ["X-Txdag-Csrf: 1", "the page's buttons send it"]),
    ("scrape without a token", "get", "/metrics", {}, None, 401, ["log in", "[txdag] metrics_token"]),
    ("scrape with a token that is neither", "get", "/metrics", {"Authorization": "Bearer nope"}, None, 403,
     ["Invalid JWT token", "[txdag] metrics_token"]),
]


@pytest.mark.parametrize("what, method, path, headers, body, status, fragments", REFUSALS,
                         ids=[case[0] for case in REFUSALS])
def test_a_refusal_says_how_to_get_in(page, what, method, path, headers, body, status, fragments) -> None:
    if what in ("read without logging in", "scrape without a token"):
        del page.headers["Authorization"]
    kwargs = {"json": body} if body is not None else {}
    response = getattr(page, method)(path, headers=headers, **kwargs)
    check_answer(response.status_code, detail_of(response), status, fragments, what=what)


def test_a_topology_the_dag_folder_defines_is_not_a_404(page, monkeypatch) -> None:
    """The 404 is the DAG folder's answer, not the page's default: a defined topology reaches its view."""
    monkeypatch.setattr(transactions, "read_view", lambda name, strict=False: {"topology": name, "seen": True})
    response = page.get("/api/topologies/known")
    assert response.status_code == 200 and response.json() == {"topology": "known", "seen": True}


def test_a_scraper_reads_every_topology_with_the_metrics_token_and_a_user_those_they_may_read(page, monkeypatch
                                                                                            ) -> None:
    from txdag.airflow import page as page_module

    monkeypatch.setenv("AIRFLOW__TXDAG__METRICS_TOKEN", "s3cret\n")  # as a _CMD gives it: its output's newline
    monkeypatch.setattr(transactions, "topology_names", lambda: ["known", "secret"])
    monkeypatch.setattr(transactions, "view", lambda name, strict=False: {"topology": name, "committed_txid": 7})
    monkeypatch.setattr(page_module, "allowed", lambda user, dag_id, method, runs=False: dag_id == "known")
    for token, seen in (("s3cret", {"known", "secret"}), (page.headers["Authorization"][7:], {"known"})):
        response = page.get("/metrics", headers={"Authorization": f"Bearer {token}"})  # the scraper's, the user's
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert {t for t in ("known", "secret") if f'txdag_committed_txid{{topology="{t}"}} 7.0' in response.text
                } == seen == {t for t in ("known", "secret") if f'txdag_up{{topology="{t}"}} 1.0' in response.text}
    wrong = page.get("/metrics", headers={"Authorization": "Bearer s3cre"})  # neither the token nor a JWT
    assert wrong.status_code == 403 and "[txdag] metrics_token" in wrong.json()["detail"], wrong.text


def test_a_topology_that_cannot_be_read_is_its_up_0_not_a_failed_scrape(page, monkeypatch) -> None:
    def view(name: str, strict: bool = False) -> dict:
        if name == "broken":
            raise RuntimeError("the metadata database went away")
        return {"topology": name, "committed_txid": 3}

    monkeypatch.setattr(transactions, "topology_names", lambda: ["broken", "known"])
    monkeypatch.setattr(transactions, "view", view)
    response = page.get("/metrics")
    assert response.status_code == 200, response.text
    assert 'txdag_up{topology="broken"} 0.0' in response.text and 'txdag_up{topology="known"} 1.0' in response.text
    assert 'txdag_committed_txid{topology="known"} 3.0' in response.text and "broken\"} 3" not in response.text


def test_a_scrape_that_cannot_list_the_topologies_is_a_503_naming_the_service(page, monkeypatch) -> None:
    from txdag.errors import ServiceUnavailable

    def down() -> list[str]:
        raise ServiceUnavailable("ZooKeeper at 127.0.0.1:2191 did not answer: start it (scripts/services.sh start)")

    monkeypatch.setattr(transactions, "topology_names", down)
    response = page.get("/metrics")
    assert response.status_code == 503 and "ZooKeeper at 127.0.0.1:2191 did not answer" in response.text


@pytest.mark.parametrize("mistake", [("TweetsSource()", "TweetsSource(no_such_option=1)"),
                                     ("dag = render(", "dag = render((")])  # a syntax error: the file does not parse
def test_a_topology_whose_dag_file_fails_is_a_404_that_names_the_file(page, tmp_path, mistake) -> None:
    """A DAG file that names the topology and fails to load: the 404 names the file and where Airflow says why
    (the answer said to check the name); the error's text is Airflow's to show, to whom it may (a packaged DAG,
    a zip, is not run)."""
    (tmp_path / "dags" / "broken.py").write_text(DAG_FILE.replace('"known"', '"broken"').replace(*mistake))
    (tmp_path / "dags" / "packaged.zip").write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: Airflow lists it
    response = page.get("/api/topologies/broken")
    detail = detail_of(response)
    assert response.status_code == 404 and "broken.py, which names topology 'broken', failed to load" in detail
    assert "list-import-errors" in detail and "no_such_option" not in detail and "check the name" not in detail
    assert list(transactions.folder()[1]) == [str(tmp_path / "dags" / "broken.py")]


def test_the_404_names_only_the_topologies_the_user_may_read(page, tmp_path, monkeypatch) -> None:
    """The answer to a wrong name lists the DAG folder's topologies the user may read, and asks permission on the
    asked name first: a user who may read nothing learns nothing of the folder."""
    from txdag.airflow import page as page_module

    (tmp_path / "dags" / "secret.py").write_text(DAG_FILE.replace('"known"', '"secret"'))
    monkeypatch.setattr(page_module, "allowed", lambda user, dag_id, method, runs=False: dag_id != "secret")
    detail = detail_of(page.get("/api/topologies/nosuch"))
    assert "it defines known)" in detail and "secret" not in detail
    monkeypatch.setattr(page_module, "allowed", lambda user, dag_id, method, runs=False: False)
    response = page.get("/api/topologies/nosuch")
    assert response.status_code == 403 and "known" not in response.text and "secret" not in response.text


def test_the_page_reads_the_files_airflow_reads(page, tmp_path) -> None:
    """The DAG folder as Airflow's DAG processor lists it: a subfolder's topology is read, a file .airflowignore
    names is not run (a stale copy beside the DAG files was read, and ran, as the definition)."""
    (tmp_path / "dags" / "team").mkdir()
    (tmp_path / "dags" / "team" / "sub.py").write_text(DAG_FILE.replace('"known"', '"sub"'))
    (tmp_path / "dags" / "spark_jobs").mkdir()  # the project root of dags/team/sub.py is dags/
    (tmp_path / "dags" / "spark_jobs" / "job.py").write_text("")
    (tmp_path / "dags" / "old").mkdir()
    (tmp_path / "dags" / "old" / "stale.py").write_text("raise SystemExit('ran an ignored file')\n# DAG airflow\n")
    (tmp_path / "dags" / ".airflowignore").write_text("old/\n")
    assert set(transactions.definitions()) == {"known", "sub"} and transactions.folder()[1] == {}

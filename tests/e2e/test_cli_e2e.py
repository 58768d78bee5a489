"""``txdag pools sync`` and ``txdag doctor --check airflow`` against a real Airflow REST API.

Only the API server is needed (no scheduler, no PostgreSQL): the ``api_server`` fixture (conftest.py) starts
``airflow api-server`` of this module's own on SQLite in a temporary AIRFLOW_HOME, on a free port, and stops it at
the end. ``txdag replay`` is covered by test_topologies.py on the full instance.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txdag.airflow.api import AirflowAPI
from txdag.cli import exits
from txdag.cli.main import main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cli_env(api_server, monkeypatch):
    url, password = api_server
    monkeypatch.setenv("TXDAG_AIRFLOW_URL", url)
    monkeypatch.setenv("TXDAG_AIRFLOW_PASSWORD", password)
    monkeypatch.setenv("TXDAG_DAGS_FOLDER", str(REPO / "dags"))
    return AirflowAPI(url, "admin", password)


def test_pools_sync_creates_missing_pools_and_resets_resized_ones(cli_env, capsys):
    api = cli_env
    api.create_pool("txdag_word_count", 4, "resized by hand")
    assert main(["pools", "sync", "--dry-run"]) == 0
    assert api.pool("txdag_tweets_analytics") is None and api.pool("txdag_word_count")["slots"] == 4
    capsys.readouterr()

    assert main(["pools", "sync", "--json"]) == 0
    out, err = capsys.readouterr()
    actions = {row["pool"]: (row["action"], row["slots_before"]) for row in json.loads(out)["pools"]}
    assert actions == {"txdag_global_count": ("created", None), "txdag_trending_hashtags": ("created", None),
                       "txdag_tweets_analytics": ("created", None), "txdag_word_count": ("updated", 4)}
    assert "[4/4] pool txdag_word_count: updated" in err
    for name in actions:
        pool = api.pool(name)
        assert (pool["slots"], pool["include_deferred"]) == (1, False), pool
    assert api.pool("txdag_word_count")["description"] == "resized by hand"

    assert main(["pools", "sync", "word_count"]) == 0
    assert "txdag_word_count  unchanged" in capsys.readouterr().out


def test_doctor_reaches_the_api_and_names_a_wrong_password(cli_env, capsys, monkeypatch):
    assert main(["doctor", "--check", "airflow", "--json"]) == 0
    check = json.loads(capsys.readouterr().out)["checks"][0]
    assert check["status"] == "warn" and "not healthy" in check["detail"] and "scheduler" in check["detail"]
    monkeypatch.setenv("TXDAG_AIRFLOW_PASSWORD", "wrong")
    assert main(["doctor", "--check", "airflow"]) == 1
    out = capsys.readouterr().out
    assert "airflow api  fail" in out and "HTTP 401" in out
    assert main(["pools", "sync"]) == exits.CONFIG  # a login to fix (txdag.cli.exits)
    assert "txdag pools sync: cannot use Airflow's REST API" in capsys.readouterr().err
    monkeypatch.setenv("TXDAG_AIRFLOW_PASSWORD", "")  # set empty: as unset, never sent (Airflow answers 400)
    assert main(["pools", "sync", "--dry-run"]) == exits.CONFIG
    err = capsys.readouterr().err
    assert "not Airflow's API server" not in err and ("no Airflow password" in err or "refused the login" in err), err

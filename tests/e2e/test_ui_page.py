"""The transactions page in headless Chromium against the session's real Airflow.

A topology of its own (``ui_page``: 10 tuples per txid, no retries) runs 4 txids with a source key deleted
under txid 3, so that txid 3 fails and txid 4 fails behind it. The test logs in through the UI's login form,
compares the page's figures with ZooKeeper and Redis read directly, checks the refusals (no token, a viewer),
pauses the topology with the page's button (checked through the REST API), restores the key, replays from
txid 3 with the page's button (its runs cleared), unpauses, and waits for txid 4 to commit. Screenshots go to
$TXDAG_TEST_ARTIFACTS (default tests/artifacts/).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import redis
import requests
from access import ZK_AUTH
from conftest import REPO, AirflowInstance

from txdag.spouts import append_tweets
from txdag.zk.client import close_zk, connect_zk
from txdag.zk.records import TxStatus
from txdag.zk.store import TransactionStore

pytestmark = pytest.mark.own_topologies  # no wait for the hour's scheduled runs (conftest)

TOPOLOGY, PREFIX = "ui_page", "ui_page:"
DAG_FILE = f"""# An Airflow DAG (Airflow's safe mode parses only files that say so): the transactions page's topology.
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology(
    {TOPOLOGY!r},
    source=TweetsSource(prefix={PREFIX!r}, max_transaction_size=10),
    job={str(REPO / "spark_jobs" / "global_count.py")!r},
    states=[State("global_count", key_fields=0, namespace="ui_page_count")],
    max_active_transactions=4,
    retries=0,
)
dag = render(topology, dag_file=__file__)
"""
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1400,1100"]
READ_FIGURES = """
const s = document.querySelector('section.topology[data-topology="' + arguments[0] + '"]');
if (!s) return null;
const figures = {};
s.querySelectorAll('dd[data-figure]').forEach(d => figures[d.dataset.figure] = d.textContent);
return {figures, paused: !!s.querySelector('[data-paused="true"]'),
  failed: [...s.querySelectorAll('tr[data-failed-txid]')].map(r => [+r.dataset.failedTxid,
    r.dataset.cascade ? r.dataset.cascade.split(',').map(Number) : []]),
  in_flight: [...s.querySelectorAll('table[data-in-flight] tr[data-phase]')].map(
    r => [r.dataset.txid, r.dataset.phase]),
  rows: [...s.querySelectorAll('tr[data-row-txid]')].map(r => [+r.dataset.rowTxid, r.cells[3].textContent,
    r.querySelector('a').getAttribute('href')])};
"""


def artifacts_dir() -> Path:
    path = Path(os.environ.get("TXDAG_TEST_ARTIFACTS") or REPO / "tests" / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.fail(f"{CHROMIUM} and {CHROMEDRIVER} are needed: bash scripts/setup.sh installs Debian's chromium and "
                    "chromium-driver", pytrace=False)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture
def store(airflow: AirflowInstance) -> Iterator[TransactionStore]:
    client = connect_zk(airflow.zk_hosts, auth=ZK_AUTH)
    yield TransactionStore(client, TOPOLOGY, root=airflow.zk_root)
    close_zk(client)


def wait_until(what: str, check: Any, timeout: float = 60, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def login(driver: Any, airflow: AirflowInstance) -> None:
    from selenium.webdriver.common.by import By

    driver.get(f"{airflow.base_url}/txdag/")
    wait_until("the login form", lambda: driver.find_elements(By.NAME, "username"), 60)
    driver.find_element(By.NAME, "username").send_keys(airflow.username)
    driver.find_element(By.NAME, "password").send_keys(airflow.password)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until("the transactions page after logging in", lambda: driver.current_url.rstrip("/").endswith("/txdag"))


def figures(driver: Any) -> dict[str, Any]:
    return wait_until(f"topology {TOPOLOGY} on the page", lambda: driver.execute_script(READ_FIGURES, TOPOLOGY), 30)


def click_action(driver: Any, selector: str) -> None:
    """Click an action button, accept its confirmation, wait for the answer; asserts it was a 200."""
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, selector).click()
    wait_until("the confirmation dialog", lambda: _alert(driver), 10).accept()
    status = wait_until("the action's answer", lambda: driver.find_element(By.ID, "message").get_attribute(
        "data-status"), 60)
    assert status == "200", driver.find_element(By.ID, "message").text


def _alert(driver: Any) -> Any:
    try:
        return driver.switch_to.alert
    except Exception:  # NoAlertPresentException until the click's handler opens it
        return None


def expected_from_sources(store: TransactionStore, source: redis.Redis) -> dict[str, Any]:
    """The page's figures computed straight from ZooKeeper and Redis."""
    topo, _ = store.read_topology()
    records = {t: r for t, (r, _) in store.read_txids(store.list_txids()).items()}
    last = records[topo.last_txid].metadata
    failed = {t for t, r in records.items() if r.status is TxStatus.FAILED}
    in_flight = {t for t, r in records.items() if r.status not in (TxStatus.FAILED, TxStatus.COMMITTED)}
    lag = int(source.get(f"{PREFIX}NEXT_WRITE")) - (last["from"] + last["quantity"])
    return {"committed": topo.committed_txid, "last": topo.last_txid, "failed": failed, "in_flight": in_flight,
            "lag": lag, "records": records}


def run_txids(airflow: AirflowInstance, count: int) -> list[str]:
    base = datetime.now(UTC) - timedelta(minutes=10)
    runs = [airflow.api.trigger(TOPOLOGY, logical_date=base + timedelta(seconds=i), run_id=f"ui_page__{i}")
            for i in range(1, count + 1)]
    return [r for r in runs if airflow.api.wait_run(TOPOLOGY, r, timeout=600) not in ("success", "failed")]


def test_transactions_page_figures_and_actions(airflow: AirflowInstance, browser, store) -> None:
    source = redis.Redis.from_url(airflow.redis_url)
    append_tweets(source, [f"tuple {i}" for i in range(1, 41)], prefix=PREFIX)  # txids 1..4 of 10
    source.delete(f"{PREFIX}25")  # txid 3's batch cannot be read: it fails, txid 4 fails behind it
    airflow.add_dag_file("ui_page.py", DAG_FILE)
    airflow.api.wait_dag_parsed(TOPOLOGY, timeout=120)
    assert run_txids(airflow, 4) == []
    append_tweets(source, [f"later {i}" for i in range(15)], prefix=PREFIX)  # the lag: 15 not in a batch

    expected = expected_from_sources(store, source)
    assert (expected["committed"], expected["last"], 3 in expected["failed"]) == (2, 4, True), expected
    # txdag's own error is what ZooKeeper keeps, not spark-submit's command line and output (issue 21)
    error = expected["records"][3].error
    assert error.startswith(f"process failed: topology '{TOPOLOGY}' txid 3 attempt 1: the Spark job failed: "
                            "BatchReadError:") and "txdag accept-missing" in error and "spark-submit" not in error
    # a run behind the failed txid is red, its coordinate task failed once (no retries) naming txid 3
    behind = airflow.api.trigger(TOPOLOGY, logical_date=datetime.now(UTC) - timedelta(seconds=5),
                                 run_id="ui_page__behind")
    assert airflow.api.wait_run(TOPOLOGY, behind, timeout=600) == "failed"
    coordinate = airflow.api.task_instance(TOPOLOGY, behind, "coordinate")
    assert (coordinate["state"], coordinate["try_number"]) == ("failed", 1), coordinate
    log = airflow.api.task_log(TOPOLOGY, behind, "coordinate")
    assert "no new txid while txid 3 is failed" in log and f"txdag replay {TOPOLOGY} --from 3" in log
    login(browser, airflow)
    shown = figures(browser)
    browser.save_screenshot(str(artifacts_dir() / "transactions-page.png"))
    print(f"\nscreenshot: {artifacts_dir() / 'transactions-page.png'}")
    f = shown["figures"]
    assert expected["lag"] == 15
    assert (int(f["committed"]), int(f["last"]), int(f["lag"])) == (expected["committed"], expected["last"], 15)
    assert int(f["failed"]) == len(expected["failed"]) and int(f["in-flight"]) == len(expected["in_flight"])
    assert {t for root, cascade in shown["failed"] for t in [root, *cascade]} == expected["failed"]
    assert shown["failed"][0][0] == 3
    records = expected["records"]
    assert [r[0] for r in shown["rows"]] == sorted(records, reverse=True)
    for txid, size, href in shown["rows"]:
        assert int(size) == records[txid].metadata["quantity"]
        assert href.endswith(f"/dags/{TOPOLOGY}/runs/{quote(records[txid].run_id, safe='')}")

    # the page inside the UI: its navigation entry embeds /txdag/
    browser.get(f"{airflow.base_url}/plugin/txdag")
    from selenium.webdriver.common.by import By

    frame = wait_until("the embedded page", lambda: browser.find_elements(By.CSS_SELECTOR, "iframe"), 30)[0]
    assert frame.get_attribute("src").rstrip("/").endswith("/txdag")

    # refusals: no token, and a viewer may read but not act
    assert requests.get(f"{airflow.base_url}/txdag/api/topologies", timeout=30).status_code == 401
    viewer = json.loads((airflow.home / "simple_auth_manager_passwords.json").read_text())["viewer"]
    token = requests.post(f"{airflow.base_url}/auth/token", json={"username": "viewer", "password": viewer},
                          timeout=30).json()["access_token"]
    as_viewer = {"Authorization": f"Bearer {token}", "X-Txdag-Csrf": "1"}
    read = requests.get(f"{airflow.base_url}/txdag/api/topologies/{TOPOLOGY}", headers=as_viewer, timeout=30)
    assert read.status_code == 200 and read.json()["committed_txid"] == expected["committed"]
    refused = requests.post(f"{airflow.base_url}/txdag/api/topologies/{TOPOLOGY}/pause", json={"paused": True},
                            headers=as_viewer, timeout=30)
    assert refused.status_code == 403 and "may not pause" in refused.json()["detail"]

    # pause with the page's button
    browser.get(f"{airflow.base_url}/txdag/")
    click_action(browser, f'button[data-action="pause"][data-topology="{TOPOLOGY}"]')
    assert airflow.api.dag(TOPOLOGY)["is_paused"] is True
    browser.get(f"{airflow.base_url}/txdag/")
    assert figures(browser)["paused"] is True

    # replay from txid 3 with its button: the runs of txids 3 and 4 are cleared, 1 and 2 are left alone
    source.set(f"{PREFIX}25", "tuple 25")
    click_action(browser, f'button[data-action="replay"][data-topology="{TOPOLOGY}"][data-txid="3"]')
    states = {t: airflow.api.run(TOPOLOGY, records[t].run_id)["state"] for t in records}
    assert states[1] == states[2] == "success" and states[3] in ("queued", "running"), states
    assert states[4] in ("queued", "running"), states

    # unpause: the replayed txids commit
    browser.get(f"{airflow.base_url}/txdag/")
    click_action(browser, f'button[data-action="pause"][data-topology="{TOPOLOGY}"]')
    assert airflow.api.dag(TOPOLOGY)["is_paused"] is False
    for txid in (3, 4):
        assert airflow.api.wait_run(TOPOLOGY, records[txid].run_id, timeout=600) == "success"
    browser.get(f"{airflow.base_url}/txdag/")
    after = figures(browser)["figures"]
    browser.save_screenshot(str(artifacts_dir() / "transactions-page-after-replay.png"))
    assert (int(after["committed"]), int(after["failed"]), int(after["in-flight"])) == (4, 0, 0)
    assert store.read_topology()[0].committed_txid == 4

"""The Airflow side builds its clients from Airflow connections through txdag.protocol.clients: a task's runtime
(coordinator store under the connection's root, the states' Redis, the Spark job's URLs) and the transactions
page (topologies listed from the connection's root, without naming a topology to find it).

Connections are AIRFLOW_CONN_* variables pointing at the test servers; the topology is a DAG file in a temporary
DAG folder.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest
from access import ZK_AUTH

from txdag.topology.definition import State, TweetsSource
from txdag.topology.topology import TransactionalTopology

pytestmark = pytest.mark.usefixtures("airflow_home")
DAG_FILE = """
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology("{topo}", source=TweetsSource(prefix="{topo}:"), job="spark_jobs/job.py",
                                 states=[State("users", namespace="{topo}:users")])
dag = render(topology, dag_file=__file__)
"""


@pytest.fixture
def connections(monkeypatch, redis_url, zk_hosts, zk_root, prefix, tmp_path):
    """redis_default and zookeeper_default (root: the test's own), and a DAG folder holding one topology."""
    address = urlsplit(redis_url)
    host, port = zk_hosts.split(",")[0].split(":")
    monkeypatch.setenv("AIRFLOW_CONN_REDIS_DEFAULT", json.dumps(
        {"conn_type": "redis", "host": address.hostname, "port": address.port, "login": address.username,
         "password": address.password, "extra": {"db": 11}}))
    monkeypatch.setenv("AIRFLOW_CONN_ZOOKEEPER_DEFAULT", json.dumps(
        {"conn_type": "zookeeper", "host": host, "port": int(port), "login": ZK_AUTH[0], "password": ZK_AUTH[1],
         "extra": {"root": zk_root, "timeout": 5}}))
    for folder in ("dags", "spark_jobs"):
        (tmp_path / folder).mkdir()
    (tmp_path / "spark_jobs" / "job.py").write_text("")
    (tmp_path / "dags" / f"{prefix}.py").write_text(DAG_FILE.format(topo=prefix))
    monkeypatch.setenv("AIRFLOW__TXDAG__DAGS_FOLDER", str(tmp_path / "dags"))
    return tmp_path


def test_a_tasks_runtime_builds_its_clients_from_the_topologys_connections(connections, zk_root, prefix) -> None:
    from txdag.airflow.runtime import TopologyRuntime

    (connections / "job.py").write_text("")
    topology = TransactionalTopology(prefix, source=TweetsSource(prefix=f"{prefix}:"), job=str(connections / "job.py"),
                                     states=[State("users", namespace=f"{prefix}:users")])
    with TopologyRuntime(topology) as rt:
        store = rt.coordinator.store
        assert store.path == f"{zk_root}/{prefix}" and store.client.connected
        assert rt.client.ping() and rt.client.connection_pool.connection_kwargs["db"] == 11
        assert rt.coordinator.spout.client is rt.client  # the source reads redis_default too: one client
        urls = json.loads(rt.job_env()["TXDAG_REDIS_URLS"])
        assert list(urls) == ["redis_default"] and urls["redis_default"].endswith("/11")
    assert not store.client.connected  # closed with the task


def test_the_page_lists_topologies_from_the_connections_root(connections, monkeypatch, zk_root, prefix) -> None:
    from txdag.airflow import hooks, transactions

    monkeypatch.setattr(transactions, "_definitions", (0.0, {}, {}))  # this test's DAG folder, read afresh
    monkeypatch.setattr(transactions, "_clients", hooks.airflow_clients())
    try:
        assert transactions.topology_names() == [prefix]  # defined, never ran: no root yet
        assert transactions.store_of(prefix).path == f"{zk_root}/{prefix}"
        transactions.store_of(f"{prefix}_gone").ensure()  # ran once; its DAG file is gone since
        assert transactions.topology_names() == [prefix, f"{prefix}_gone"]
    finally:
        transactions._clients.close()

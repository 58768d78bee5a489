"""What a CLI test starts from: the Airflow connections of the test servers in the environment, and a DAG folder
holding one topology named after the test (the way a user's project looks to ``txdag``)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
from access import ZK_AUTH


def set_connections(monkeypatch: pytest.MonkeyPatch, redis_url: str, zk_hosts: str, zk_root: str, db: int,
                    zk_extra: dict | None = None) -> dict[str, dict]:
    """``redis_default`` (database ``db``) and ``zookeeper_default`` (under ``zk_root``) as AIRFLOW_CONN_*."""
    address = urlsplit(redis_url)
    host, port = zk_hosts.split(",")[0].split(":")
    conns = {"redis": {"conn_type": "redis", "host": address.hostname, "port": address.port,
                       "login": address.username, "password": address.password, "extra": {"db": db}},
             "zookeeper": {"conn_type": "zookeeper", "host": host, "port": int(port), "login": ZK_AUTH[0],
                           "password": ZK_AUTH[1], "extra": {"root": zk_root, **(zk_extra or {})}}}
    for name, value in conns.items():
        monkeypatch.setenv(f"AIRFLOW_CONN_{name.upper()}_DEFAULT", json.dumps(value))
    return conns


def dag_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, dag_file: str) -> Path:
    """``tmp_path/dags/<name>.py`` (``dag_file`` with ``{topo}`` set to ``name``), an empty job file, and
    TXDAG_DAGS_FOLDER pointing at the folder."""
    for folder in ("dags", "spark_jobs"):
        (tmp_path / folder).mkdir()
    (tmp_path / "spark_jobs" / "job.py").write_text("")
    (tmp_path / "dags" / f"{name}.py").write_text(dag_file.format(topo=name))
    monkeypatch.setenv("TXDAG_DAGS_FOLDER", str(tmp_path / "dags"))
    return tmp_path / "dags"


def state_client(redis_url: str, db: int) -> redis.Redis:
    return redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + f"/{db}")


def drop_keys(client: redis.Redis, prefix: str) -> None:
    """What the test wrote (every key with its topology's name in it), then the client."""
    leftovers = list(client.scan_iter(match=f"*{prefix}*", count=1000))
    if leftovers:
        client.delete(*leftovers)
    client.close()

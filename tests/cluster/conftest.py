"""The cluster tier's one loopback cluster, started once for every module of the tier.

TXDAG_CLUSTER_KEEP=1 leaves it running at the end (for a post-mortem: `bash scripts/cluster.sh status`, the logs
under .run/cluster/); the next session wipes it before it starts."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
import redis
from support.loopback import AIRFLOW_HOME, admin, cluster, user_project

from txdag.airflow.api import AirflowAPI
from txdag.redisio import client_from_url


@pytest.fixture(scope="session")
def addresses() -> Iterator[dict[str, str]]:
    cluster("stop")  # a session kept running (TXDAG_CLUSTER_KEEP) or cut off: the cluster starts empty
    cluster("wipe")
    user_project()
    try:
        cluster("start")
        lines = [ln.removeprefix("export ") for ln in cluster("env").splitlines()]
        yield dict(ln.split("=", 1) for ln in lines)
    finally:
        if os.environ.get("TXDAG_CLUSTER_KEEP") != "1":
            cluster("stop")
            cluster("wipe")


@pytest.fixture(scope="session")
def cluster_api(addresses: dict[str, str]) -> AirflowAPI:
    """The cluster's Airflow REST API, as its admin."""
    password = json.loads((AIRFLOW_HOME / "simple_auth_manager_passwords.json").read_text())["admin"]
    return AirflowAPI(addresses["TXDAG_CLUSTER_AIRFLOW_URL"], "admin", password)


@pytest.fixture(scope="session")
def states(addresses: dict[str, str]) -> Iterator[redis.Redis]:
    """The Redis Cluster of the topologies' states, as the admin (text replies)."""
    first, *others = addresses["TXDAG_CLUSTER_REDIS_NODES"].split(",")
    login = admin()
    client = client_from_url(f"redis://{login['username']}:{login['password']}@{first}/0?cluster=true&nodes="
                             f"{','.join(others)}", decode_responses=True)
    yield client
    client.close()

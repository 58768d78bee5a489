"""The cluster tier's one loopback cluster, started once for every module of the tier.

TXDAG_CLUSTER_KEEP=1 leaves it running at the end (for a post-mortem: `bash scripts/cluster.sh status`, the logs
under .run/cluster/); the next session wipes it before it starts."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from support.loopback import cluster


@pytest.fixture(scope="session")
def addresses() -> Iterator[dict[str, str]]:
    cluster("stop")  # a session kept running (TXDAG_CLUSTER_KEEP) or cut off: the cluster starts empty
    cluster("wipe")
    try:
        cluster("start")
        lines = [ln.removeprefix("export ") for ln in cluster("env").splitlines()]
        yield dict(ln.split("=", 1) for ln in lines)
    finally:
        if os.environ.get("TXDAG_CLUSTER_KEEP") != "1":
            cluster("stop")
            cluster("wipe")

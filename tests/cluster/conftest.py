"""The cluster tier's one loopback cluster, started once for every module of the tier."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.loopback import cluster


@pytest.fixture(scope="session")
def addresses() -> Iterator[dict[str, str]]:
    cluster("wipe")  # a run before that was cut off leaves its data; the cluster starts empty
    try:
        cluster("start")
        lines = [ln.removeprefix("export ") for ln in cluster("env").splitlines()]
        yield dict(ln.split("=", 1) for ln in lines)
    finally:
        cluster("stop")
        cluster("wipe")

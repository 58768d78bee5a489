"""txdag.defaults: each default is spelled once in the Python sources (include/, dags/, scripts/, bench/), in its
home module, and imported everywhere else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from txdag import defaults
from txdag.analytics import tweets

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p for d in ("include", "dags", "scripts", "bench") for p in (ROOT / d).rglob("*.py")]
HOMES = {
    defaults.REDIS_CONN_ID: "include/txdag/defaults.py",
    defaults.ZOOKEEPER_CONN_ID: "include/txdag/defaults.py",
    defaults.SPARK_CONN_ID: "include/txdag/defaults.py",
    defaults.SPARK_CONNECT_CONN_ID: "include/txdag/defaults.py",
    tweets.MARKER_KEY: "include/txdag/analytics/tweets.py",
}


@pytest.mark.parametrize("value", sorted(HOMES))
def test_a_default_is_spelled_once_as_a_string_literal(value: str) -> None:
    literal = re.compile(rf"""(["']){re.escape(value)}\1""")
    spelled = sorted(str(p.relative_to(ROOT)) for p in SOURCES if literal.search(p.read_text()))
    assert spelled == [HOMES[value]], f"import {value!r} from {HOMES[value]} instead of spelling it again"


def test_a_topology_gets_the_defaults() -> None:
    from txdag.topology.topology import TransactionalTopology

    fields = TransactionalTopology.__dataclass_fields__
    assert (fields["redis_conn_id"].default, fields["zookeeper_conn_id"].default, fields["spark_conn_id"].default,
            fields["spark_connect_conn_id"].default) == (defaults.REDIS_CONN_ID, defaults.ZOOKEEPER_CONN_ID,
                                                         defaults.SPARK_CONN_ID, defaults.SPARK_CONNECT_CONN_ID)
    assert (fields["keep_txids"].default, fields["commit_poke_interval"].default) == (
        defaults.KEEP_TXIDS, defaults.COMMIT_POKE_INTERVAL)

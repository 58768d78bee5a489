"""The connection check of the coordinate task (txdag.airflow.connections): the first connection a topology names
that Airflow cannot find fails the run before a txid is allocated, with the connection, the topology and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from txdag import TransactionalTopology, hints
from txdag.airflow.connections import require_connections
from txdag.errors import ConfigError
from txdag.topology.definition import State, TweetsSource


def topology(tmp_path: Path, **changes) -> TransactionalTopology:
    job = tmp_path / "job.py"
    job.write_text("")
    return TransactionalTopology("tweets", source=TweetsSource(), job=str(job), states=[State("users")], **changes)


class NotFound(Exception):
    pass


def lookup(defined: set[str]):
    asked: list[str] = []

    def get(conn_id: str) -> object:
        asked.append(conn_id)
        if conn_id not in defined:
            raise NotFound(conn_id)
        return object()

    return get, asked


def test_every_connection_defined_passes_and_each_is_asked(tmp_path) -> None:
    get, asked = lookup({"redis_default", "zookeeper_default", "spark_default"})
    require_connections(topology(tmp_path), get)
    assert sorted(asked) == ["redis_default", "spark_default", "zookeeper_default"]


@pytest.mark.parametrize(("changes", "missing", "kind"), [
    ({"redis_conn_id": "redis_states"}, "redis_states", "redis"),
    ({"zookeeper_conn_id": "zk_prod"}, "zk_prod", "zookeeper"),
    ({"spark_mode": "connect"}, "spark_connect_default", "spark_connect"),
])
def test_a_missing_connection_names_itself_the_topology_and_the_fix(tmp_path, monkeypatch, changes, missing,
                                                                    kind) -> None:
    monkeypatch.setenv(hints.ENV, "checkout")
    get, _ = lookup({"redis_default", "zookeeper_default", "spark_default"})
    with pytest.raises(ConfigError) as caught:
        require_connections(topology(tmp_path, **changes), get)
    assert str(caught.value) == (
        f"topology 'tweets': Airflow connection {missing!r} ({kind}) is not defined (NotFound): add it in Admin > "
        f"Connections or set AIRFLOW_CONN_{missing.upper()} (a {kind} connection, e.g. "
        f"{hints.connection_example(kind)})")

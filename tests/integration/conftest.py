"""The integration tier's order: its slowest tests first.

scripts/test.sh runs this tier on two workers with ``--dist worksteal``: each worker gets half of the tests in
collection order, and one that runs out takes half of the other's pending ones. A long test can't be split, so
the tier ends with the last long test alone on one worker while the other idles; started first instead, the long
tests overlap with the short ones. Only the order changes; every test runs as before.
"""

from __future__ import annotations

import pytest

# Each a minute or more on the 2-core CI machine (measured with --durations): the short soak (a subprocess per
# phase of 40 txids), the services script (its own Redis, ZooKeeper and Kafka, stopped and started), and Spark's
# Kafka source (a Python and a Spark session of its own).
SLOWEST = ("test_soak.py", "test_services_script.py", "test_kafka_broker.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return SLOWEST.index(name) if name in SLOWEST else len(SLOWEST)

    items.sort(key=rank)  # stable: the rest keep their order


@pytest.fixture(scope="session")
def postgres_conn() -> str:
    """The Airflow connection id of a PostgreSQL database of the state stores' own (tests/support/postgres.py)."""
    from support.postgres import postgres_url, use_connection

    return use_connection(postgres_url())

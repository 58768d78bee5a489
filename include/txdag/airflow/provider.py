"""Provider metadata: registers the ``zookeeper`` connection type with Airflow (entry point in pyproject)."""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "txdag",
        "name": "txdag",
        "description": "Exactly-once transactional topologies (Storm/Trident) on Airflow, Spark, ZooKeeper, Redis",
        "connection-types": [
            {"hook-class-name": "txdag.airflow.hooks.ZooKeeperHook", "connection-type": "zookeeper"},
        ],
    }

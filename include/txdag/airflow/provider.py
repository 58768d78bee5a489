"""Provider metadata (entry point ``apache_airflow_provider`` in pyproject.toml): the ``zookeeper`` connection
type, the ``txdag`` asset URI scheme (txdag.topology.assets: Airflow checks each such URI with its handler), the
tasks' extra link (txdag.airflow.links), and the plugin (loaded through its own ``airflow.plugins`` entry point;
listed here as Airflow's schema for providers has it)."""

from __future__ import annotations

from typing import Any

from txdag.topology.assets import SCHEME

PLUGIN_CLASS = "txdag.airflow.plugin.TxdagPlugin"
TXID_LINK = "txdag.airflow.links.TxidLink"  # each task's "Transaction" link


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "txdag",
        "name": "txdag",
        "description": "Exactly-once transactional topologies (Storm/Trident) on Airflow, Spark, ZooKeeper, Redis",
        "connection-types": [
            {"hook-class-name": "txdag.airflow.hooks.ZooKeeperHook", "connection-type": "zookeeper"},
        ],
        "asset-uris": [{"schemes": [SCHEME], "handler": "txdag.topology.assets.check_uri"}],
        "plugins": [{"name": "txdag", "plugin-class": PLUGIN_CLASS}],
        "extra-links": [TXID_LINK],
    }

"""Provider metadata (entry point ``apache_airflow_provider`` in pyproject.toml): the ``zookeeper`` connection
type and its form, the modules of txdag's hooks, operators and trigger (``airflow providers get txdag --full``), the
``txdag`` asset URI scheme (txdag.topology.assets: Airflow checks each such URI with its handler), the tasks' extra
link (txdag.airflow.links), the ``[txdag]`` configuration section, and the plugin (loaded through its own
``airflow.plugins`` entry point; listed here as Airflow's schema for providers has it)."""

from __future__ import annotations

from typing import Any

from txdag.airflow.config import CONFIG
from txdag.defaults import ZK_ROOT, ZK_TIMEOUT
from txdag.topology.assets import SCHEME

PLUGIN_CLASS = "txdag.airflow.plugin.TxdagPlugin"
TXID_LINK = "txdag.airflow.links.TxidLink"  # each task's "Transaction" link
INTEGRATION = "txdag"  # the one integration the hooks, operators and trigger belong to
HOOK_MODULES = ["txdag.airflow.hooks"]
OPERATOR_MODULES = ["txdag.airflow.operators"]
TRIGGER_MODULES = ["txdag.airflow.triggers"]
ZOOKEEPER_HOOK_NAME = "ZooKeeper"
# The connection form, declared as Airflow 3.2+ providers do (a hook's get_ui_field_behaviour is deprecated): the
# extra's two settings are fields of their own (txdag.airflow.hooks.zookeeper_settings reads them)
ZOOKEEPER_CONNECTION = {
    "hook-class-name": "txdag.airflow.hooks.ZooKeeperHook",
    "connection-type": "zookeeper",
    "hook-name": ZOOKEEPER_HOOK_NAME,
    "ui-field-behaviour": {
        "hidden-fields": ["schema", "extra"],
        "relabeling": {"host": "Hosts (host1,host2:2182,...)", "login": "Digest user (optional)"},
        "placeholders": {"host": "127.0.0.1", "port": "2181"},
    },
    "conn-fields": {
        "root": {"label": "Root znode", "description": "The znode under which txdag keeps its topologies",
                 "schema": {"type": ["string", "null"], "default": ZK_ROOT}},
        "timeout": {"label": "Timeout (seconds)", "description": "The ZooKeeper session timeout",
                    "schema": {"type": ["number", "null"], "default": ZK_TIMEOUT}},
    },
}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "txdag",
        "name": "txdag",
        "description": "Exactly-once transactional topologies (Storm/Trident) on Airflow, Spark, ZooKeeper, Redis",
        "integrations": [{"integration-name": INTEGRATION, "tags": ["software"]}],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": HOOK_MODULES}],
        "operators": [{"integration-name": INTEGRATION, "python-modules": OPERATOR_MODULES}],
        "triggers": [{"integration-name": INTEGRATION, "python-modules": TRIGGER_MODULES}],
        "connection-types": [ZOOKEEPER_CONNECTION],
        "asset-uris": [{"schemes": [SCHEME], "handler": "txdag.topology.assets.check_uri"}],
        "plugins": [{"name": "txdag", "plugin-class": PLUGIN_CLASS}],
        "extra-links": [TXID_LINK],
        "config": CONFIG,
    }

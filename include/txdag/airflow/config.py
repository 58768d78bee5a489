"""The ``[txdag]`` section of Airflow's configuration: its options (declared in the provider info, so ``airflow
config list`` shows them and a sensitive one is masked and read from ``_SECRET``/``_CMD`` too) and how the Airflow
components read them (airflow.cfg, or ``AIRFLOW__TXDAG__<OPTION>``, as every Airflow option)."""

from __future__ import annotations

import os
import warnings

SECTION = "txdag"
DEPRECATED_DAGS_FOLDER = "TXDAG_DAGS_FOLDER"  # read by the components until txdag 0.2, with a warning
OPTIONS = {
    "dags_folder": {
        "description": "The DAG folder in which the transactions page and the metrics endpoint find the topologies "
                       "(the txdag command reads AIRFLOW__TXDAG__DAGS_FOLDER too). Unset: [core] dags_folder.",
        "version_added": "0.1.0",
        "type": "string",
        "example": "/opt/airflow/dags",
        "default": None,
    },
    "metrics_token": {
        "description": "The bearer token a Prometheus scraper sends to GET /txdag/metrics of the API server (it "
                       "reads every topology's figures). Unset: only an Airflow user's token reads them, the "
                       "topologies that user may read.",
        "version_added": "0.1.0",
        "type": "string",
        "example": None,
        "default": None,
        "sensitive": True,
    },
}
CONFIG = {SECTION: {"description": "txdag's settings in the Airflow components that serve its plugin and run its "
                                   "tasks", "options": OPTIONS}}


def option(name: str) -> str:
    """``[txdag] <name>`` as this Airflow component is configured; '' when unset."""
    from airflow.configuration import conf

    assert name in OPTIONS, name
    return conf.get(SECTION, name, fallback="") or ""


def dags_folder() -> str:
    """``[txdag] dags_folder``, else (for one more release, with a warning) $TXDAG_DAGS_FOLDER, else Airflow's
    ``[core] dags_folder``."""
    from airflow.configuration import conf

    if configured := option("dags_folder"):
        return configured
    if legacy := os.environ.get(DEPRECATED_DAGS_FOLDER):
        warnings.warn(f"{DEPRECATED_DAGS_FOLDER} is deprecated in Airflow's components and read until txdag 0.2: set "
                      f"[txdag] dags_folder (AIRFLOW__TXDAG__DAGS_FOLDER={legacy}) instead", FutureWarning,
                      stacklevel=2)
        return legacy
    return conf.get("core", "dags_folder")

"""The txdag Airflow plugin: creates each topology's 1-slot pool when one of its runs starts.

The ``zookeeper`` connection type comes with the txdag package itself (Airflow reads connection types
from the ``apache_airflow_provider`` entry point in pyproject.toml, not from plugins).
"""

from airflow.plugins_manager import AirflowPlugin

from txdag.airflow import pools


class TxdagPlugin(AirflowPlugin):
    name = "txdag"
    listeners = [pools]

"""The txdag Airflow plugin: creates each topology's 1-slot pool when one of its runs starts, and adds the
*Transactions* page (a FastAPI app at ``/txdag/``, shown in the UI's navigation as an embedded view).

The ``zookeeper`` connection type comes with the txdag package itself (Airflow reads connection types
from the ``apache_airflow_provider`` entry point in pyproject.toml, not from plugins).
"""

from airflow.plugins_manager import AirflowPlugin

from txdag.airflow import pools


def _transactions_app():  # type: ignore[no-untyped-def]
    """Imported only where plugins' apps are mounted (the API server), not by workers and the scheduler."""
    from txdag.airflow.page import app

    return app


class TxdagPlugin(AirflowPlugin):
    name = "txdag"
    listeners = [pools]
    fastapi_apps = [{"app": _transactions_app(), "url_prefix": "/txdag", "name": "txdag transactions"}]
    external_views = [{"name": "Transactions", "href": "txdag/", "url_route": "txdag", "destination": "nav",
                       "category": "browse"}]

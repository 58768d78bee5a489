"""The txdag Airflow plugin: creates each topology's 1-slot pool when one of its runs starts, and adds the
*Transactions* page (a FastAPI app at ``/txdag/``, shown in the UI's navigation as an embedded view).

Airflow finds it through the ``airflow.plugins`` entry point of the installed txdag distribution (pyproject.toml),
so ``pip install txdag`` is enough: no file to copy into the plugins folder. The provider info lists it too
(``plugins`` of :func:`txdag.airflow.provider.get_provider_info`), as Airflow's own providers do. Airflow
registers a plugin name once; a second copy (a plugins-folder file defining the same class, or the provider's
list when ``[core] lazy_discover_providers = False``) is skipped with a warning.

The ``zookeeper`` connection type comes with the provider info too (Airflow reads connection types from the
``apache_airflow_provider`` entry point, not from plugins).
"""

from airflow.plugins_manager import AirflowPlugin

from txdag.airflow import pools


def _transactions_app():
    from txdag.airflow.page import app

    return app


class TxdagPlugin(AirflowPlugin):
    name = "txdag"
    listeners = [pools]
    fastapi_apps = [{"app": _transactions_app(), "url_prefix": "/txdag", "name": "txdag transactions"}]
    external_views = [{"name": "Transactions", "href": "txdag/", "url_route": "txdag", "destination": "nav",
                       "category": "browse"}]

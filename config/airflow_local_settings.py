"""Airflow's local settings for txdag: put this file in ``$AIRFLOW_HOME/config/`` (scripts/airflow.sh copies it
there; docker-compose.yaml mounts ./config there, as Airflow's own compose file does).

Airflow imports it in every component as it starts. The scheduler, which forks the LocalExecutor's workers and so
every task process, and a Celery worker, whose pool forks them, import the Spark Connect client once for all their
tasks (txdag.airflow.preload): a warm ``process`` task then does not import it itself.
"""

import sys

try:
    import txdag.airflow.preload
except ImportError as exc:  # an Airflow environment without txdag (or without one of its dependencies) must start
    ours = (exc.name or "").split(".")[0] == "txdag"
    missing = "txdag is not installed" if ours else f"txdag cannot be imported ({exc})"
    print(f"txdag: {__file__} is txdag's, but {missing} here: the Spark Connect client is not preloaded. Install "
          "txdag into this Airflow's environment (pip install -e '.[airflow]' in its checkout, README) or delete "
          "this file", file=sys.stderr)
else:
    txdag.airflow.preload.preload()

__all__: list[str] = []  # defines no policy or setting of Airflow's

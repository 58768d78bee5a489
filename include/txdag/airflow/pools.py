"""The topology's 1-slot pool, created by txdag itself: a task naming a missing pool would wait forever.

The plugin's listener runs in the scheduler when a txdag run starts, before its tasks are queued, and
creates the pools its tasks name that do not exist yet (never resizing one an operator changed).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.listeners import hookimpl

from txdag.defaults import POOL_PREFIX

log = logging.getLogger("txdag.airflow.pools")
POOL_DESCRIPTION = "txdag: the topology's coordinate and commit tasks, one at a time (keep 1 slot)"


def txdag_pools(dag: Any) -> set[str]:
    """The pools of a txdag DAG's tasks (txdag DAGs are tagged ``txdag``)."""
    if dag is None or "txdag" not in set(getattr(dag, "tags", None) or ()):
        return set()
    return {t.pool for t in dag.tasks if str(t.pool).startswith(POOL_PREFIX)}


def ensure_pools(names: set[str]) -> list[str]:
    """Create the missing pools with 1 slot; returns the ones created. Needs the metadata database.

    Uses a session of its own, committed here: the scheduler's session must not be committed from a
    listener (its commit guard stops the scheduler), and a failure here cannot poison its transaction."""
    from airflow import settings
    from airflow.models.pool import Pool
    from sqlalchemy.orm import Session

    created = []
    with Session(bind=settings.engine) as session:
        for name in sorted(names):
            if Pool.get_pool(name, session=session) is None:
                session.add(Pool(pool=name, slots=1, include_deferred=False, description=POOL_DESCRIPTION))
                created.append(name)
        session.commit()
    if created:
        log.info("txdag: created pool(s) %s with 1 slot", created)
    return created


@hookimpl
def on_dag_run_running(dag_run: Any, msg: str) -> None:
    names = txdag_pools(getattr(dag_run, "dag", None))
    if names:
        try:
            ensure_pools(names)
        except Exception:  # never break the scheduler; a concurrent insert of the same pool lands here too
            log.exception("txdag: could not create pools %s (retried when the next run starts); or create "
                          "them with: airflow pools set NAME 1 txdag", sorted(names))

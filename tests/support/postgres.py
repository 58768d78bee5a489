"""The PostgreSQL of scripts/postgres.sh (the one the e2e tier's Airflow uses), with a database and role of the state
stores' own, as an Airflow connection of type ``postgres`` in the environment (AIRFLOW_CONN_<ID>)."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATABASE = "txdag_states_test"
CONN_ID = "txdag_postgres"


def _script(*args: str) -> str:
    done = subprocess.run(["bash", str(ROOT / "scripts/postgres.sh"), *args], capture_output=True, text=True,
                          timeout=180)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/postgres.sh {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout.strip()


def postgres_url() -> str:
    """Start the server (one starter at a time: pytest-xdist's workers share it) and the states' database; its URL as
    the Postgres provider reads an Airflow connection URI."""
    lock = ROOT / ".run" / "postgres-tests.lock"
    lock.parent.mkdir(exist_ok=True)
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        _script("start")
        _script("ensure-db", DATABASE)
        url = _script("url", DATABASE)
    return url.replace("postgresql+psycopg2://", "postgres://", 1)


def superuser_psql(database: str, sql: str) -> str:
    """``sql`` run by PostgreSQL's superuser in ``database`` (what the states' role may not do: other roles, owners)."""
    return _script("psql", "-d", database, "-v", "ON_ERROR_STOP=1", "-c", sql)


def use_connection(url: str, conn_id: str = CONN_ID) -> str:
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = url
    return conn_id


def close_sessions() -> None:
    """This process's connections of txdag's PostgreSQL states closed and forgotten, as if it ended (a table is then
    checked again, and nothing holds a lock on a schema a test drops)."""
    from txdag.state import postgres

    for session in [*postgres._sessions.values(), *postgres._alone_sessions]:
        session.close()
    postgres._sessions.clear()

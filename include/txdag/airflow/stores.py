"""State stores reached through Airflow connections: ``PostgresStore``, a state kept in PostgreSQL
(txdag.state.postgres) through the Postgres provider's ``postgres`` connection."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from txdag.state.base import BackingMap, StateFactory
from txdag.state.postgres import PostgresBackingMap, PostgresSession, check_schema, session_of

POSTGRES_CONN_ID = "txdag_postgres"
LIBPQ_EXTRAS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl", "connect_timeout", "application_name",
                "options", "target_session_attrs")


@dataclass(frozen=True, repr=False)
class PostgresStore(StateFactory):
    """``State("words", store=PostgresStore())``: the state is the table ``<schema>.<topology>__<state>`` of the
    database of the Airflow connection ``conn_id`` (type ``postgres``; a database and role of its own, not
    Airflow's metadata database). Every state of a topology in one database commits a txid in one transaction."""

    conn_id: str = POSTGRES_CONN_ID
    schema: str = "txdag"

    def __post_init__(self) -> None:  # a mistake in the DAG file is an import error of the DAG, named
        check_schema(self.schema, self.where)

    def backing_map(self, topology: str, state: str, key_fields: int) -> BackingMap:
        return self.open(topology, state, key_fields, self.connect)

    def conn_ids(self) -> dict[str, str]:
        return {self.conn_id: "postgres"}

    def reader(self, topology: str, state: str, key_fields: int, conn: Any) -> PostgresBackingMap:
        """The backing map as ``txdag state get/top`` read it: ``conn`` is the Airflow connection object, which the
        command looked up without the hook (a command that reads imports no Airflow where it need not)."""
        session = PostgresSession(lambda: connect_to(conn), topology, self.schema, self.where)  # its own: read only
        return PostgresBackingMap(session, topology, state, key_fields, create=False)

    def forget(self, topology: str, states: list[str], conn: Any, confirm: bool
               ) -> tuple[list[str], int | None, list[str]]:
        """What ``txdag reset`` deletes here (``conn``: the Airflow connection object, as for ``reader``): the
        states' tables and the topology's row of txdag_commits, dropped with ``confirm``; see PostgresSession.forget."""
        session = PostgresSession(lambda: connect_to(conn), topology, self.schema, self.where)
        try:
            return session.forget(states, confirm)
        finally:
            session.close()

    def open(self, topology: str, state: str, key_fields: int, connect: Callable[[], Any]) -> PostgresBackingMap:
        session = session_of(self.conn_id, connect, topology, self.schema, self.where)
        return PostgresBackingMap(session, topology, state, key_fields)

    @property
    def where(self) -> str:
        return f"PostgreSQL connection {self.conn_id!r} (schema {self.schema})"

    def connect(self) -> Any:
        """A new connection through the Postgres provider's hook (its host, port, login, schema and extras)."""
        from airflow.providers.postgres.hooks.postgres import PostgresHook

        return PostgresHook(postgres_conn_id=self.conn_id).get_conn()

    def __repr__(self) -> str:
        return f"PostgresStore({self.conn_id!r}, schema={self.schema!r})"


def connect_to(conn: Any) -> Any:
    """A psycopg connection from an Airflow ``postgres`` connection's fields (its Schema is the database), with the
    libpq settings of its extra that the Postgres provider passes on too (sslmode and the certificates)."""
    import psycopg

    extra = {k: v for k, v in conn.extra_dejson.items() if k in LIBPQ_EXTRAS}
    return psycopg.connect(host=conn.host or "127.0.0.1", port=conn.port or 5432, user=conn.login,
                           password=conn.password, dbname=conn.schema or None, **extra)

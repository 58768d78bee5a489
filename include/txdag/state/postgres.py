"""A state kept in PostgreSQL: one table per state, and every state of a topology in one database written in one SQL
transaction per txid, with the txid it holds (its commit marker) in the same transaction.

A table has one ``jsonb`` column per key field (``k1`` ... ``kN``, unique by their JSON text: a field keeps its JSON
type, so ``5`` and ``"5"`` are two keys, as ``1`` and ``1.0`` are, as in a Redis state), the value (``jsonb``), the txid
the value includes and, for an opaque state, the value before it (``prev``), and the state's kind. Reads and writes are
set-based: one ``SELECT ... JOIN unnest(...)`` per chunk of keys read, one ``INSERT ... SELECT FROM unnest(...) ON
CONFLICT ... DO UPDATE`` per chunk written, never a round trip per key. ``txdag_commits`` holds the txid each topology's
states hold; the transaction that writes a txid's values writes it too, so a crash leaves all of the txid or none of it,
a reader never sees part of it, and a txid the table holds already is not written again (a non-transactional state stays
exact through a replay). txdag creates its tables with a format version in their comment, migrates an older one and
refuses a table that is not its own or is newer.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import itertools
import json
import logging
import os
import re
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from txdag import hints
from txdag.errors import ConfigError, FormatVersionError, ServiceUnavailable, StoreWentBackwards, TxidOrderError
from txdag.state.base import Key
from txdag.state.values import OpaqueValue, TransactionalValue

log = logging.getLogger("txdag.state.postgres")

def _driver_errors() -> tuple[type[BaseException], ...]:
    """A lost connection, or one the server refused, in the drivers the Postgres provider's hook may hand out (psycopg
    3 where it is installed, else psycopg2)."""
    found: list[type[BaseException]] = []
    for name in ("psycopg", "psycopg2"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        found += [module.OperationalError, module.InterfaceError]
    return tuple(found)


LOST = _driver_errors()
LOST_STATES = {"25P03", "57P01", "57P02", "57P03"}  # the server ended the session (idle in transaction, shut down)
# what a server that answered says when it refuses a connection's settings (libpq gives no SQLSTATE for it); not
# "starting up", "too many clients", nor an authentication backend (LDAP, RADIUS, PAM) that failed: those may pass
REFUSALS = re.compile(r"FATAL: +(password authentication failed|(database|role) \".*\" does not exist"
                      r"|role \".*\" is not permitted to log in|no pg_hba\.conf entry|pg_hba\.conf rejects connection"
                      r"|permission denied for database).*")
PROCESS = uuid.uuid4().hex  # with the pid: this process, in the advisory locks of one_session_per_database
DEPENDENT_OBJECTS = "2BP01"  # a view (or another object) depends on the table
INSUFFICIENT_PRIVILEGE = "42501"  # a statement this role may not run (a migration by a role not the owner)
LOCK_TIMEOUT = "55P03"  # lock_not_available: another session holds the topology's row past lock_timeout

# the tables' layouts; a table of a higher format was written by a newer txdag, one of a lower is migrated.
# State format 2: the keys are unique by their JSON text (an index on kN::text; format 1 had a primary key on the
# jsonb columns, whose comparisons made the commit's upsert half as fast again)
STATE_FORMAT, COMMITS_FORMAT = 2, 1
STATE_COMMENT = "txdag state (format {}): {}"  # the format, then topology/state: whose table it is
COMMITS_COMMENT = "txdag commits (format {})"
COMMITS_TABLE = "txdag_commits"
CHUNK = 5_000  # keys per statement
# room left in each page of a state's table: a txid rewrites most of its keys, and a row's new version that fits
# in its page updates no index (a HOT update): the upsert of 100,000 keys takes 0.8 s, not 1.15 s
FILLFACTOR = 50
SUMS_CHUNK = 200_000  # partials per JSON document (jsonb holds at most 256 MB)
IDENTIFIER = re.compile(r"[A-Za-z0-9_]{1,63}")
SURROGATE = re.compile("[\ud800-\udfff]")
_FORMAT_OF = re.compile(r"txdag (state|commits) \(format (\d+)\)(?:: (.*))?", re.DOTALL)
# A worker cut off while it holds the topology's row must not block every retry for hours (TCP keepalive): a lock
# waited for longer, or a transaction left idle longer, ends (a lock timeout is a ServiceUnavailable: retried).
SESSION_SETTINGS = "SET lock_timeout = '60s'; SET idle_in_transaction_session_timeout = '10min'"

Connect = Callable[[], Any]  # a new DB-API connection (psycopg), autocommit off


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_name(topology: str, state: str) -> str:
    """The table of a state: ``<topology>__<state>``, lower-cased, other characters as ``_``; a name longer than
    PostgreSQL's 63 characters keeps its first 54 and a hash of the whole. Two states whose names meet here are
    told apart by the table's comment, which names its topology and state."""
    name = re.sub(r"[^a-z0-9_]", "_", f"{topology}__{state}".lower())
    if len(name) > 63:
        name = f"{name[:54]}_{hashlib.sha1(f'{topology}/{state}'.encode()).hexdigest()[:8]}"
    return name


class PostgresSession:
    """One connection of one topology to one database and schema: the transaction of the txid being committed,
    shared by every state of the topology kept there. The commit phase begins it for all of them at once
    (``begin(txid, whole=True)``), which checks and sets the topology's row of txdag_commits, and commits it after
    their writes. A map state used alone has a session of its own (PostgresBackingMap), whose plain transactions
    (``begin(txid)``) leave txdag_commits alone, so states used alone commit each on its own, as Trident's do."""

    def __init__(self, connect: Connect, topology: str, schema: str, where: str, *, alone: bool = False) -> None:
        self.topology, self.schema, self.where = topology, schema, where
        self._connect = connect
        self._db: Any = None
        self.alone = alone  # a writer: one per topology and database in this process (one_session_per_database)
        self.txid: int | None = None  # the txid whose transaction is open
        self.held = False  # the database holds that txid already: its writes are dropped
        self.whole = False  # begun by the commit phase for the whole txid: the states' own commits leave it open
        self.broken = False  # the txid's transaction failed: nothing more of it is written; rollback() clears it
        self.ended = 0  # transactions of a txid rolled back or lost so far (CachedMap forgets what it cached then)
        self.lock_key: str | None = None  # its advisory lock while connected (one_session_per_database)
        self.checked: dict[str, str] = {}  # table -> the comment it was checked for (two states may meet in one)

    @property
    def db(self) -> Any:
        if self.broken:
            raise ServiceUnavailable(f"{self.said()} lost the transaction of this txid (an error ended it); the "
                                     f"commit is retried")
        if self._db is None or self._db.closed:
            if self.txid is not None:  # the connection went under an open transaction: so did the transaction
                self.broken = True
                self.close()
                raise ServiceUnavailable(f"{self.said()} lost its connection inside the transaction of this txid; "
                                         f"the commit is retried")
            with self.errors("connecting"):
                db = self._connect()
                try:
                    db.autocommit = True
                    db.execute(SESSION_SETTINGS)
                    if self.alone:
                        one_session_per_database(self, db)
                    db.autocommit = False
                except BaseException:
                    db.close()
                    raise
                self._db = db
        return self._db

    def said(self) -> str:
        """Topology, txid (while one is open) and database: how every message of this session begins."""
        return f"topology {self.topology!r}" + (f" txid {self.txid}" if self.txid is not None else "") + \
            f": {self.where}"

    @contextlib.contextmanager
    def errors(self, doing: str) -> Iterator[None]:
        """A lost connection, or a lock waited for too long, as ServiceUnavailable (retried with the topology's
        backoff), naming the database and what was being done; a connection the server refused (a wrong password, no
        such database or role) as ConfigError, quoting the server; any other error keeps its class, with a
        note naming topology, txid and what was being done. Any error inside a txid's transaction ends it at once
        (rolled back): no state writes more of the txid until it is begun again."""
        said, in_txid = self.said(), self.txid is not None
        try:
            yield
        except BaseException as exc:
            self.broken = self.broken or in_txid
            state = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
            lost = (isinstance(exc, LOST) and state is None) or str(state).startswith("08") or state in LOST_STATES
            self.close() if lost else self._end()
            rolled = "; the txid's writes there are rolled back and the commit is retried" if in_txid else ""
            if state == LOCK_TIMEOUT:
                whose = (f"the topology's row of {self.schema}.{COMMITS_TABLE} (a commit of this topology still "
                         f"running, or a worker cut off inside one: PostgreSQL ends it after "
                         f"idle_in_transaction_session_timeout)" if doing.startswith("beginning") else
                         "a lock this statement needs (see pg_locks)")
                raise ServiceUnavailable(f"{said} waited longer than its lock_timeout {doing}: another session "
                                         f"holds {whose}{rolled}") from exc
            refusal = REFUSALS.search(str(exc)) if lost and doing == "connecting" else None
            if refusal:
                raise ConfigError(f"{said}: PostgreSQL refused the connection ({refusal.group(0)}): fix the "
                                  f"Airflow connection's login, password or database (its schema field), or create "
                                  f"the role and the database (docs/stores.md)") from exc
            if lost:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ServiceUnavailable(f"{said} did not answer {doing} ({first}){rolled}: "
                                         f"{hints.how_to_start('postgres')}, or fix the connection") from exc
            if isinstance(exc, Exception) and not isinstance(
                    exc, (ConfigError, FormatVersionError, StoreWentBackwards, ServiceUnavailable)):
                exc.add_note(f"{said}: raised {doing}" + ("; the txid's writes there are rolled back" if in_txid
                                                          else ""))
            raise

    def table(self, name: str) -> str:
        return f"{quote(self.schema)}.{quote(name)}"

    def begin(self, txid: int, *, whole: bool = False, resumed: bool = True) -> None:
        """Open the transaction of ``txid`` (an earlier try's, left open when it died, is rolled back first). The
        commit phase's (``whole``) locks the topology's row of txdag_commits and checks it: the txid before, or this
        txid where this commit had begun before (``resumed``: held, its writes are dropped); anything else is a
        database that went backwards or ahead, and halts the commit. Otherwise (a state used alone, on a session of
        its own) a plain transaction."""
        self.rollback()
        _ = self.db  # connected now: a database that does not answer fails the begin, not a write
        self.txid, self.whole = txid, whole  # an error from here on names the txid and ends its transaction
        if not whole:  # used alone: a transaction of the state's own writes, txdag_commits untouched
            return
        with self.errors("beginning the txid"), self.db.cursor() as cur:
            cur.execute(f"INSERT INTO {self.table(COMMITS_TABLE)} (topology, txid) VALUES (%s, NULL) "
                        f"ON CONFLICT (topology) DO NOTHING", (self.topology,))
            cur.execute(f"SELECT txid FROM {self.table(COMMITS_TABLE)} WHERE topology = %s FOR UPDATE",
                        (self.topology,))
            held_txid = cur.fetchone()[0]
        row = f"({self.schema}.{COMMITS_TABLE}, topology {self.topology!r})"
        problem = None
        if held_txid is not None and (held_txid > txid or (held_txid == txid and not resumed)):
            problem = (f"holds txid {held_txid} {row} already, and this commit of txid {txid} had not begun: the "
                       f"topology was started over (txdag reset) while the database kept its states, or another "
                       f"topology of that id writes there; drop its tables and its row of {COMMITS_TABLE}, or give "
                       f"the store another schema")
        elif held_txid is not None and held_txid < txid - 1:
            problem = (f"holds txid {held_txid} last {row}, so txids {held_txid + 1} to {txid - 1}, committed, are "
                       f"missing from it (restored from an older copy?); bring the database back to txid {txid - 1}, "
                       f"or start the topology over (txdag reset) with its tables dropped")
        if problem:
            self.rollback()
            raise StoreWentBackwards(f"topology {self.topology!r} txid {txid}: {self.where} {problem}")
        self.held = held_txid == txid
        if self.held:
            log.info("topology=%s txid=%s: %s holds this txid already; its writes are dropped",
                     self.topology, txid, self.where)

    def commit(self, txid: int) -> None:
        """Commit the txid's transaction (the commit phase's with the topology's row at ``txid``)."""
        if self.txid != txid:
            raise ValueError(f"{self.where}: commit({txid}) without begin({txid}); the open txid is {self.txid}")
        _ = self.db  # a transaction that an error ended commits nothing: ServiceUnavailable
        with self.errors(f"committing txid {txid}"):
            if self.whole:
                with self.db.cursor() as cur:
                    cur.execute(f"UPDATE {self.table(COMMITS_TABLE)} SET txid = %s, committed_at = now() "
                                f"WHERE topology = %s", (txid, self.topology))
            self.db.commit()
        self.txid, self.held, self.whole = None, False, False

    def rollback(self) -> None:
        """End the open transaction, if any, and every flag of it."""
        self._end()
        self.txid, self.held, self.whole, self.broken = None, False, False, False

    def _end(self) -> None:
        if self.txid is not None:
            self.ended += 1
        if self._db is not None and not self._db.closed:
            try:
                self._db.rollback()
            except LOST:  # the server went: so did the transaction
                self.close()

    def close(self) -> None:
        """Close the connection; a txid open on it stays named (and ``broken``, when an error closed it) until
        rollback(), so that its other states hear that it is gone."""
        if self.txid is not None:
            self.ended += 1
        if self._db is not None:
            self._db.close()
        self._db = None

    def writable(self, table: str) -> None:
        if self.txid is None:
            raise ValueError(f"{self.where}: a write to table {table} outside a txid: call begin_commit(txid) first")

    def done_reading(self) -> None:
        """A read outside a txid's transaction ends its own (else the connection stays idle in a transaction)."""
        if self.txid is None and self._db is not None and not self._db.closed:
            self._db.rollback()

    def ensure(self, name: str, comment: str, key_fields: int | None, columns: str, *, create: bool = True,
               storage: str = "", then: Sequence[str] = (), migrations: dict[int, Sequence[str]] | None = None
               ) -> bool:
        """Create the table ``name`` (``create``) with ``comment`` (its format, and whose it is), or check the one
        there: txdag's, the same owner, of this format or older (migrated), with ``key_fields`` key columns
        (``storage``, the new table's parameters, is not checked: an ALTER TABLE of the user's stays). ``then``: the
        statements that complete a new table (``{table}`` is its name); ``migrations``: per older format, the
        statements that bring such a table to this one (``{pkey}``: its primary key constraint). One creator or
        migrator at a time per schema. Returns whether the table is there."""
        if self.checked.get(name) == comment:
            return True
        if self.txid is not None:
            raise ValueError(f"{self.where}: table {name} is first used inside the transaction of txid {self.txid}: "
                             f"build every state before the commit begins")
        db, found = self.db, None
        with self.errors(f"creating or checking table {self.schema}.{name}"), db.cursor() as cur:
            try:
                cur.execute("SELECT c.oid, obj_description(c.oid, 'pg_class') FROM pg_class c JOIN pg_namespace n "
                            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s", (self.schema, name))
                found = cur.fetchone()
                if found is None and create:
                    cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"txdag:{self.schema}",))
                    cur.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(self.schema)}")
                    cur.execute(f"CREATE TABLE IF NOT EXISTS {self.table(name)} ({columns}) {storage}")
                    cur.execute(f"SELECT obj_description({quote_literal(self.table(name))}::regclass, 'pg_class')")
                    if cur.fetchone()[0] is None:  # created here, not by the creator that held the lock before
                        for statement in then:
                            cur.execute(statement.format(table=self.table(name)))
                        cur.execute(f"COMMENT ON TABLE {self.table(name)} IS {quote_literal(comment)}")
                    cur.execute(f"SELECT {quote_literal(self.table(name))}::regclass::oid, obj_description("
                                f"{quote_literal(self.table(name))}::regclass, 'pg_class')")
                    found = cur.fetchone()
                if found is not None:
                    self._check(name, found[1], comment, cur, found[0], key_fields)
                if found is not None and create and found[1] != comment:  # txdag's, of an older format
                    found = self._migrate(name, comment, key_fields, cur, migrations or {})
            except BaseException:
                db.rollback()  # neither the lock nor the transaction stays open
                raise
            db.commit()
        if found is None:
            return False
        self.checked[name] = comment
        return True

    def forget(self, states: Sequence[str], confirm: bool) -> tuple[list[str], int | None, list[str]]:
        """What ``txdag reset`` deletes of the topology here: the tables of ``states`` that exist and its row of
        txdag_commits (the txid it holds). With ``confirm``, both go in one transaction: the row locked first, as a
        commit locks it (a commit running meanwhile is waited for, at most lock_timeout), then the schema's lock (no
        table is created or migrated meanwhile). A table of one of those names that is not txdag's is refused by
        name, before anything is deleted; one that is another topology's or state's (their names meet in one table
        name) is left alone and named. Returns the tables, the txid of the row, and the tables left alone."""
        db, names = self.db, [table_name(self.topology, state) for state in states]
        tables: list[str] = []
        others: list[str] = []
        held = None
        with self.errors("resetting the topology's tables"), db.cursor() as cur:
            try:
                cur.execute("SELECT to_regclass(%s)", (self.table(COMMITS_TABLE),))
                if cur.fetchone()[0] is not None:
                    cur.execute(f"SELECT txid FROM {self.table(COMMITS_TABLE)} WHERE topology = %s"
                                + (" FOR UPDATE" if confirm else ""), (self.topology,))
                    row = cur.fetchone()
                    held = None if row is None else row[0]
                if confirm:
                    cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"txdag:{self.schema}",))
                cur.execute("SELECT c.relname, obj_description(c.oid, 'pg_class') FROM pg_class c JOIN pg_namespace "
                            "n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = ANY(%s)",
                            (self.schema, names))
                found = dict(cur.fetchall())
                for state, name in zip(states, names):
                    if name not in found:
                        continue
                    match = _FORMAT_OF.fullmatch(found[name] or "")
                    if match is None or match.group(1) != "state":
                        raise ConfigError(f"{self.where}: table {self.schema}.{name} is not txdag's (its comment is "
                                          f"{found[name]!r}): txdag reset deletes nothing; move or drop that table "
                                          f"yourself, then run it again")
                    (tables if match.group(3) == f"{self.topology}/{state}" else others).append(name)
                if confirm:
                    for name in tables:
                        self._drop(cur, name)
                    if held is not None:
                        cur.execute(f"DELETE FROM {self.table(COMMITS_TABLE)} WHERE topology = %s", (self.topology,))
                    db.commit()
            finally:
                db.rollback()  # a dry run, or a refusal: nothing changes
        self.checked.clear()
        return [f"{self.schema}.{n}" for n in tables], held, [f"{self.schema}.{n}" for n in others]

    def _drop(self, cur: Any, name: str) -> None:
        """DROP TABLE, with what stops it named: a role that does not own it, an object that depends on it."""
        try:
            cur.execute(f"DROP TABLE {self.table(name)}")
        except Exception as exc:
            code = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
            if code not in (INSUFFICIENT_PRIVILEGE, DEPENDENT_OBJECTS):
                raise
            raise ConfigError(f"{self.where}: txdag reset cannot drop table {self.schema}.{name} "
                              f"({str(exc).strip().splitlines()[0]}): drop it as its owner, or drop what depends on "
                              f"it first; nothing is deleted") from exc

    def _migrate(self, name: str, comment: str, key_fields: int | None, cur: Any,
                 migrations: dict[int, Sequence[str]]) -> Any:
        """Bring txdag's table ``name`` of an older format to ``comment``'s, in the transaction that checked it, under
        the schema's lock (one migrator) and the table's own, taken first (a reader's lock is waited for before the
        index is built, not after); checked again there, as another txdag may have migrated it meanwhile."""
        table = self.table(name)
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"txdag:{self.schema}",))
        cur.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        cur.execute(f"SELECT {quote_literal(table)}::regclass::oid, obj_description({quote_literal(table)}::regclass, "
                    f"'pg_class')")
        oid, found = cur.fetchone()
        self._check(name, found, comment, cur, oid, key_fields)  # newer than this txdag: refused
        if found == comment:
            return oid, found
        older = int(_FORMAT_OF.fullmatch(found).group(2))  # type: ignore[union-attr]  # _check matched it
        if older not in migrations:
            raise FormatVersionError(f"{self.where}: table {self.schema}.{name} is of format {older}, which this txdag "
                                     f"does not migrate ({comment!r} expected): drop the table, or migrate it with "
                                     f"the txdag release that wrote it")
        cur.execute("SELECT conname FROM pg_constraint WHERE conrelid = %s AND contype = 'p'", (oid,))
        pkey = cur.fetchone()
        statements = [statement.format(table=table, pkey=quote(pkey[0]) if pkey else "")
                      for statement in migrations[older]
                      if "{pkey}" not in statement or pkey is not None]  # a primary key dropped by hand: none to drop
        statements.append(f"COMMENT ON TABLE {table} IS {quote_literal(comment)}")
        cur.execute("SELECT pg_get_userbyid(relowner), current_user FROM pg_class WHERE oid = %s", (oid,))
        owner, role = cur.fetchone()
        for statement in statements:
            try:
                cur.execute(statement)
            except Exception as exc:
                if (getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)) != INSUFFICIENT_PRIVILEGE:
                    raise
                raise ConfigError(
                    f"{self.where}: table {self.schema}.{name} is of format {older} and this txdag migrates it to "
                    f"{comment!r}, which only its owner can do: it belongs to {owner}, and this connection's role is "
                    f"{role} (PostgreSQL: {str(exc).strip().splitlines()[0]}). Let one task run as {owner}, or have "
                    f"{owner} run, in one transaction: {'; '.join(statements)}") from exc
        log.info("%s: table %s.%s migrated from format %s: %s", self.where, self.schema, name, older, comment)
        return oid, comment

    def _check(self, name: str, comment: str | None, expected: str, cur: Any, oid: int, key_fields: int | None
               ) -> None:
        where = f"{self.where}: table {self.schema}.{name}"
        match, wanted = _FORMAT_OF.fullmatch(comment or ""), _FORMAT_OF.fullmatch(expected)
        assert wanted is not None
        if match is None or match.group(1) != wanted.group(1):
            raise ConfigError(f"{where} exists and is not txdag's (its comment is {comment!r}, not {expected!r}); "
                              f"give the store another schema, or drop the table if it is an old copy")
        if int(match.group(2)) > int(wanted.group(2)):
            raise FormatVersionError(f"{where} is of format {match.group(2)}, written by a newer txdag than this one "
                                     f"(format {wanted.group(2)}): upgrade txdag where this task runs")
        if match.group(3) != wanted.group(3):
            raise ConfigError(f"{where} holds {match.group(3)!r}, not {wanted.group(3)!r} (their names meet in one "
                              f"table name): rename one of the two states, or give one of them a store of another "
                              f"schema")
        if key_fields is not None:
            cur.execute("SELECT count(*) FROM pg_attribute WHERE attrelid = %s AND attname ~ '^k[0-9]+$' "
                        "AND NOT attisdropped", (oid,))
            found = cur.fetchone()[0]
            if found != key_fields:
                raise ConfigError(f"{where} has {found} key column(s), and the state has {key_fields} key field(s): "
                                  f"the state changed its grouping fields; give it another table, or drop this one")


class PostgresBackingMap:
    """multi_get/multi_put of one state's table, inside its session's transaction of the txid. ``create=False``
    (a reader): nothing is created, and a missing table reads as nothing committed."""

    def __init__(self, session: PostgresSession, topology: str, state: str, key_fields: int, *,
                 create: bool = True) -> None:
        table = table_name(topology, state)
        self.session, self.name, self.width = session, table, max(key_fields, 1)  # a global state: one key field
        self.keys = [f"k{i + 1}" for i in range(self.width)]
        # a key is its JSON text, as a Redis state's field is: unique by kN::text (jsonb's own comparisons cost)
        self.conflict = ", ".join(f"({k}::text)" for k in self.keys)
        unique = f"CREATE UNIQUE INDEX ON {{table}} ({self.conflict})"
        whole_rows = "ALTER TABLE {table} REPLICA IDENTITY FULL"  # no primary key: logical replication (CDC) still
        # publishes the updates (a cost only where wal_level is logical)
        self.exists = session.ensure(COMMITS_TABLE, COMMITS_COMMENT.format(COMMITS_FORMAT), None,
                                     "topology text PRIMARY KEY, txid bigint, committed_at timestamptz", create=create)
        self.exists = session.ensure(table, STATE_COMMENT.format(STATE_FORMAT, f"{topology}/{state}"), self.width,
                                     ", ".join([*(f"{k} jsonb NOT NULL" for k in self.keys), "kind text NOT NULL",
                                                "value jsonb", "txid bigint", "prev jsonb"]),
                                     create=create, storage=f"WITH (fillfactor = {FILLFACTOR})",
                                     then=[unique, whole_rows], migrations={
                                         1: [unique, "ALTER TABLE {table} DROP CONSTRAINT {pkey}", whole_rows]}
                                     ) and self.exists
        self.table = session.table(table)
        self.alone: PostgresSession | None = None  # this state used alone: its own transactions, connection

    @property
    def shared_transaction(self) -> PostgresSession:
        """The transaction of a txid that the commit opens for every state of the topology in this database."""
        return self.session

    @property
    def tx(self) -> PostgresSession:
        """Where this state reads and writes: the commit phase's transaction while it is open, else the state's own
        transaction while it is used alone, else the shared session (a read outside any txid)."""
        if self.session.whole or self.alone is None or self.alone.txid is None:
            return self.session
        return self.alone

    def begin_commit(self, txid: int) -> None:
        """Inside the commit phase: its transaction, begun already. Used alone: a transaction of this state's own,
        on a connection of its own, committed by ``commit``; an earlier one left open is rolled back."""
        shared = self.session
        if shared.whole:
            _ = shared.db  # the commit phase's transaction died under a state that went on: ServiceUnavailable
            if shared.txid != txid:
                raise ValueError(f"{shared.said()}: begin_commit({txid}) inside the commit of txid {shared.txid}")
            return
        if self.alone is None:
            self.alone = PostgresSession(shared._connect, shared.topology, shared.schema, shared.where)
            self.alone.checked = shared.checked  # the tables were checked when the state was built
            _alone_sessions.add(self.alone)
        self.alone.begin(txid)

    def commit(self, txid: int) -> None:
        if self.session.whole:  # the commit phase commits its transaction after every state
            return
        if self.alone is None:
            raise ValueError(f"{self.session.where}: commit({txid}) of table {self.name} without begin_commit({txid})")
        self.alone.commit(txid)

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        """One statement per chunk of keys; a row is matched to its key by its position among the keys asked (a key
        is its JSON text: ``1`` and ``1.0`` are two keys, as in a Redis state)."""
        found: list[Any] = [None] * len(keys)
        encoded = [self._key(key) for key in keys]
        arrays = ", ".join(["%s::jsonb[]"] * self.width)
        using = ", ".join(self.keys)
        tx = self.tx
        with tx.errors(f"reading table {self.name}"), tx.db.cursor() as cur:
            for first in range(0, len(encoded), CHUNK):
                chunk = encoded[first:first + CHUNK]
                cur.execute(f"SELECT q.i, t.kind, t.value::text, t.txid, t.prev::text FROM unnest({arrays}) WITH "
                            f"ORDINALITY AS q({using}, i) JOIN {self.table} t ON {self._same('q', 't')}",
                            [*map(list, zip(*chunk))])
                for i, *stored in cur.fetchall():
                    found[first + i - 1] = _stored(*stored)
        tx.done_reading()
        return found

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        """One ``INSERT ... ON CONFLICT DO UPDATE`` per chunk; a key given twice keeps its last value; a row that holds
        a later txid than the one written is left as it is (the map state refuses that case before)."""
        tx = self.tx
        tx.writable(self.name)
        if tx.held:  # the database holds this txid: a replay writes nothing
            return
        rows = []
        for key, value in zip(keys, values, strict=True):
            fields = self._key(key)
            try:
                rows.append((*fields, *_columns(value)))
            except ConfigError as exc:
                raise ConfigError(f"{tx.said()}: table {self.name}, key {key!r}: {exc}") from None
        columns = ", ".join([*self.keys, "kind", "value", "txid", "prev"])
        arrays = ", ".join(["%s::jsonb[]"] * self.width + ["%s::text[]", "%s::jsonb[]", "%s::bigint[]",
                                                             "%s::jsonb[]"])
        texts = ", ".join(f"{k}::text" for k in self.keys)
        with tx.errors(f"writing table {self.name}"), tx.db.cursor() as cur:
            for first in range(0, len(rows), CHUNK):
                chunk = rows[first:first + CHUNK]
                cur.execute(f"INSERT INTO {self.table} AS t ({columns}) SELECT DISTINCT ON ({texts}) {columns} "
                            f"FROM unnest({arrays}) WITH ORDINALITY AS q({columns}, i) ORDER BY {texts}, i DESC "
                            f"ON CONFLICT ({self.conflict}) DO UPDATE SET kind = EXCLUDED.kind, "
                            f"value = EXCLUDED.value, txid = EXCLUDED.txid, prev = EXCLUDED.prev "
                            f"WHERE t.txid IS NULL OR EXCLUDED.txid IS NULL OR t.txid <= EXCLUDED.txid",
                            [*map(list, zip(*chunk))])

    def add_sums(self, txid: int, kind: str, partials: Sequence[tuple[Key, int | float]]) -> int:
        """The commit's numeric partials of ``txid`` (a Count's, a Sum's) added to the state in SQL, with the map
        state's txid rules of ``kind`` (a transactional key that holds ``txid`` is skipped, an opaque one is recomputed
        from ``prev``, a key that holds a later txid raises TxidOrderError): one JSON document of partials per
        ``INSERT ... SELECT ... ON CONFLICT DO UPDATE`` of the state. Keys that are not all strings and integers (a
        float or a bool: Python holds ``1``, ``1.0`` and ``True`` equal, their JSON texts are three keys) or a key given
        twice go into a temporary table first and are summed by key. A stored value that is not a number (or null)
        is refused by key. Returns the keys written (the rest held the txid already)."""
        tx = self.tx
        tx.writable(self.name)
        if tx.held or not partials:  # the database holds this txid: a replay writes nothing
            return 0
        wrong = next((key for key, _ in partials if len(key) != self.width), None)
        if wrong is not None:
            self._key(wrong)  # raises, naming it
        not_number = next(((key, delta) for key, delta in partials if type(delta) not in (int, float)), None)
        if not_number is not None:
            raise ConfigError(f"{tx.said()}: table {self.name}: the partial {not_number[1]!r} of key "
                              f"{not_number[0]!r} is not a number: add_sums adds the numbers of a Count or a Sum")
        try:  # JSON documents, encoded and parsed in C
            documents = [json.dumps([[*key, delta] for key, delta in partials[first:first + SUMS_CHUNK]],
                                    allow_nan=False) for first in range(0, len(partials), SUMS_CHUNK)]
        except (ValueError, TypeError):
            bad = next(((k, d) for k, d in partials if not _encodes([*k, d])), ("?", "?"))
            raise ConfigError(f"{tx.said()}: table {self.name}: the key {bad[0]!r} or its partial {bad[1]!r} has no "
                              f"JSON form that PostgreSQL's jsonb takes (infinity, NaN, or a type JSON has not); "
                              f"filter such values out in the job, then clear the txid's tasks") from None
        temp, keys_sql = f"pg_temp.txdag_sums_{self.width}", ", ".join(self.keys)
        stored = kind.replace("non_transactional", "plain")
        base = {"transactional": "t.value", "opaque": "CASE WHEN t.txid = EXCLUDED.txid THEN t.prev ELSE t.value "
                "END", "plain": "t.value"}[stored]
        numbers = f"jsonb_typeof(coalesce({base}, 'null')) IN ('number', 'null')"
        added = f"to_jsonb(coalesce(({base} #>> '{{}}')::numeric, 0) + (EXCLUDED.value #>> '{{}}')::numeric)"
        upsert = (f"ON CONFLICT ({self.conflict}) DO UPDATE SET value = {added}, txid = EXCLUDED.txid, "
                  f"prev = {base if stored == 'opaque' else 'NULL'} WHERE t.kind = EXCLUDED.kind AND {numbers} AND "
                  + ("t.txid < EXCLUDED.txid" if stored == "transactional" else
                     "(t.txid IS NULL OR t.txid <= EXCLUDED.txid)"))
        row = (stored, None if stored == "plain" else txid, "null" if stored == "opaque" else None)
        fields = ", ".join(f"r->{i}" for i in range(self.width))

        def fill(cur: Any) -> None:  # the partials as rows of a temporary table
            cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS {temp} ({', '.join(f'{k} jsonb' for k in self.keys)}, "
                        f"delta numeric NOT NULL) ON COMMIT DELETE ROWS")
            cur.execute(f"TRUNCATE {temp}")
            for document in documents:
                cur.execute(f"INSERT INTO {temp} SELECT {fields}, (r->>{self.width})::numeric "
                            f"FROM jsonb_array_elements(%s::jsonb) r", (document,))

        # keys of integers and strings (no surrogate: JSON joins a pair of them into one character) that Python holds
        # distinct have distinct JSON texts: each document goes straight into the state (no key is in two); other
        # keys are summed by their JSON text in SQL first
        distinct = len({key for key, _ in partials}) == len(partials) and all(
            type(f) is int or (type(f) is str and (f.isascii() or not SURROGATE.search(f)))
            for key, _ in partials for f in key)
        with tx.errors(f"adding the partials of table {self.name}"), tx.db.cursor() as cur:
            written = 0
            if distinct:
                for document in documents:
                    cur.execute(f"INSERT INTO {self.table} AS t ({keys_sql}, kind, value, txid, prev) SELECT "
                                f"{fields}, %s, to_jsonb((r->>{self.width})::numeric), %s, %s::jsonb FROM "
                                f"jsonb_array_elements(%s::jsonb) r {upsert}", (*row, document))
                    written += cur.rowcount
            else:
                fill(cur)
                texts = ", ".join(f"{k}::text" for k in self.keys)
                cur.execute(f"INSERT INTO {self.table} AS t ({keys_sql}, kind, value, txid, prev) SELECT "
                            f"{', '.join(f'{k}::text::jsonb' for k in self.keys)}, %s, to_jsonb(sum(delta)), %s, "
                            f"%s::jsonb FROM {temp} GROUP BY {texts} {upsert}", row)
                written = cur.rowcount
            if written < len(partials):  # keys left as they were: held at txid, or not this state's to add to
                if distinct:
                    fill(cur)
                cur.execute(f"SELECT {', '.join(f't.{k}::text' for k in self.keys)}, t.kind, t.txid, t.value::text "
                            f"FROM {temp} q JOIN {self.table} t ON {self._same('q', 't')} WHERE t.kind <> %s OR "
                            f"t.txid > %s "
                            f"OR NOT {numbers.replace('EXCLUDED.txid', str(int(txid)))} LIMIT 1", (stored, txid))
                clash = cur.fetchone()
                if clash is not None:
                    key, (found, held_txid, value) = tuple(json.loads(f) for f in clash[:self.width]), clash[-3:]
                    if found != stored:
                        raise ConfigError(f"{tx.said()}: table {self.name} holds a {found} value at "
                                          f"key {key!r}, and the state is {kind}: give each state its own table")
                    if held_txid is not None and held_txid > txid:
                        raise TxidOrderError(txid, held_txid,
                                             where=f"key {key!r} of table {self.session.schema}.{self.name}")
                    raise ConfigError(f"{tx.said()}: table {self.name} holds {value} at key {key!r}, not a "
                                      f"number: a Count or Sum adds numbers only; the state's value was written by "
                                      f"something else (a StateUpdater, a hand edit)")
            return written

    def read_committed(self, keys: Sequence[Key] | None = None, largest: int = 0) -> tuple[int | None, list, int]:
        """One snapshot of the table and of the txid it holds (a reader never sees part of a txid): the stored
        objects of ``keys``, or of the ``largest`` keys by numeric value with the number of keys in the table;
        returns (txid, [(key, stored)], keys in the table or 0). A table not created yet: nothing committed."""
        if self.session.txid is not None:
            raise ValueError(f"{self.session.where}: read_committed of table {self.name} inside the transaction of "
                             f"txid {self.session.txid}: it reads on a session of its own (txdag state get)")
        if not self.exists:
            return None, ([] if keys is None else [(key, None) for key in keys]), 0
        db, total = self.session.db, 0
        columns = ", ".join(f"t.{k}::text" for k in self.keys)
        with self.session.errors(f"reading table {self.name}"), db.cursor() as cur:
            db.rollback()
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cur.execute(f"SELECT txid FROM {self.session.table(COMMITS_TABLE)} WHERE topology = %s",
                        (self.session.topology,))
            row = cur.fetchone()
            if keys is None:
                cur.execute(f"SELECT count(*) FROM {self.table}")
                total = cur.fetchone()[0]
                cur.execute(f"SELECT {columns}, t.kind, t.value::text, t.txid, t.prev::text FROM {self.table} t "
                            f"WHERE jsonb_typeof(t.value) = 'number' ORDER BY t.value::numeric DESC, "
                            f"{', '.join(f't.{k}' for k in self.keys)} LIMIT %s", (largest,))
                found = [(tuple(json.loads(f) for f in r[:self.width]), _stored(*r[self.width:]))
                         for r in cur.fetchall()]
            else:
                found = list(zip(keys, self.multi_get(keys)))  # the same transaction: the same snapshot
            db.rollback()
        return (None if row is None else row[0]), found, total

    def _same(self, a: str, b: str) -> str:
        """Rows of ``a`` and ``b`` of one key: the same JSON text in each key column (the unique index's terms)."""
        return " AND ".join(f"{a}.{k}::text = {b}.{k}::text" for k in self.keys)

    def _key(self, key: Key) -> tuple[str, ...]:
        if len(key) != self.width:
            raise ConfigError(f"{self.tx.said()}: key {key!r} of table {self.name}: {self.width} field(s) "
                              f"expected")
        return tuple(_json(field, f"key {key!r}") for field in key)

    def __repr__(self) -> str:
        return f"PostgresBackingMap({self.session.schema}.{self.name})"


def quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, allow_nan=False)
    except (ValueError, TypeError):
        raise ConfigError(f"{what}: {value!r} has no JSON form that PostgreSQL's jsonb takes (infinity, NaN, or a "
                          f"type JSON has not); "
                          f"filter such values out in the job, then clear the txid's tasks") from None


def _encodes(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (ValueError, TypeError):
        return False
    return True


def _columns(value: Any) -> tuple[str, str | None, int | None, str | None]:
    if isinstance(value, TransactionalValue):
        return "transactional", _json(value.value, "the value"), value.txid, None
    if isinstance(value, OpaqueValue):
        return "opaque", _json(value.curr, "the value"), value.txid, _json(value.prev, "its previous value")
    return "plain", _json(value, "the value"), None, None


def _stored(kind: str, value: str | None, txid: int, prev: str | None) -> Any:
    decoded = None if value is None else json.loads(value)
    if kind == "transactional":
        return TransactionalValue(txid, decoded)
    if kind == "opaque":
        return OpaqueValue(txid, decoded, None if prev is None else json.loads(prev))
    return decoded  # plain: no txid


_sessions: dict[tuple[str, str, str], PostgresSession] = {}
_alone_sessions: weakref.WeakSet[PostgresSession] = weakref.WeakSet()  # states used alone (closed with the process)
_serials = itertools.count(1)


def session_of(key: str, connect: Connect, topology: str, schema: str, where: str) -> PostgresSession:
    """The session of ``topology`` in the database ``key`` names (one per process), shared by its states there."""
    check_schema(schema, where)
    if (key, topology, schema) not in _sessions:
        _sessions[key, topology, schema] = PostgresSession(connect, topology, schema, where, alone=True)
    return _sessions[key, topology, schema]


def one_session_per_database(session: PostgresSession, db: Any) -> None:
    """Two connection ids of one topology that reach one database and schema would be two sessions, each waiting
    for the other's lock of the topology's row of txdag_commits at every commit. Each session of this process holds
    an advisory lock of its own while connected; a session that connects and cannot take the lock of another
    session of its topology and schema reaches that one's database (by whatever address or socket), and is refused.
    """
    session.lock_key = f"txdag session {PROCESS}:{os.getpid()}:{next(_serials)}"
    lock = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
    db.execute(lock, (session.lock_key,))
    for other in list(_sessions.values()):
        if other is session or other.lock_key is None or (other.topology, other.schema) != (session.topology,
                                                                                            session.schema):
            continue
        if db.execute(lock, (other.lock_key,)).fetchone()[0]:
            db.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (other.lock_key,))
            continue
        raise ConfigError(f"topology {session.topology!r}: {session.where} reaches the database that {other.where} "
                          f"reaches already; the states of a topology in one database commit in one transaction, on "
                          f"one connection: give them one connection id (or two schemas)")


def check_schema(schema: str, where: str) -> None:
    if not IDENTIFIER.fullmatch(schema):
        raise ConfigError(f"{where}: schema {schema!r}: letters, digits or '_', at most 63 characters")
    if schema.startswith("pg_"):  # else the first commit fails: "unacceptable schema name"
        raise ConfigError(f"{where}: schema {schema!r}: PostgreSQL keeps names that begin with 'pg_' for its own "
                          f"schemas; name another")

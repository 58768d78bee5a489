"""A state kept in PostgreSQL: one table per state, and every state of a topology in one database written in one SQL
transaction per txid, with the txid it holds (its commit marker) in the same transaction.

A table has one ``jsonb`` column per key field (``k1`` ... ``kN``; a field keeps its JSON type, so ``5`` and
``"5"`` are two keys), the value (``jsonb``), the txid the value includes and, for an opaque state, the value before
it (``prev``), and the state's kind. Reads and writes are set-based: one ``SELECT ... JOIN unnest(...)`` per chunk of
keys read, one ``INSERT ... SELECT FROM unnest(...) ON CONFLICT ... DO UPDATE`` per chunk written, never a round
trip per key. ``txdag_commits`` holds the txid each topology's states hold; the transaction that writes a txid's
values writes it too, so a crash leaves all of the txid or none of it, a reader never sees part of it, and a txid
the table holds already is not written again (a non-transactional state stays exact through a replay). txdag
creates its tables with a format version in their comment and refuses a table that is not its own or is newer.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from txdag import hints
from txdag.errors import ConfigError, FormatVersionError, ServiceUnavailable, StoreWentBackwards
from txdag.state.base import Key
from txdag.state.values import OpaqueValue, TransactionalValue

log = logging.getLogger("txdag.state.postgres")

def _driver_errors() -> tuple[type[BaseException], ...]:
    """A lost or refused connection, in the drivers the Postgres provider's hook may hand out (psycopg 3 where it is
    installed, else psycopg2)."""
    found: list[type[BaseException]] = []
    for name in ("psycopg", "psycopg2"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        found += [module.OperationalError, module.InterfaceError]
    return tuple(found)


LOST = _driver_errors()

FORMAT = 1  # the tables' layout; a table of a higher format was written by a newer txdag
STATE_COMMENT = "txdag state (format {}): {}"  # the format, then topology/state: whose table it is
COMMITS_COMMENT = "txdag commits (format {})"
COMMITS_TABLE = "txdag_commits"
CHUNK = 5_000  # keys per statement
IDENTIFIER = re.compile(r"[A-Za-z0-9_]{1,63}")
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
    (``begin(txid, whole=True)``) and commits it after their writes; a map state used alone begins and commits it
    itself (the last of the states that joined commits it). ``commit`` sets the topology's row of txdag_commits."""

    def __init__(self, connect: Connect, topology: str, schema: str, where: str) -> None:
        self.topology, self.schema, self.where = topology, schema, where
        self._connect = connect
        self._db: Any = None
        self.txid: int | None = None  # the txid whose transaction is open
        self.held = False  # the database holds that txid already: its writes are dropped
        self.whole = False  # begun by the commit phase for the whole txid: the states' own commits leave it open
        self.members = 0  # states that joined a transaction they began themselves (used alone)
        self.broken = False  # the connection died inside the commit phase's transaction: only rollback() clears it
        self.checked: set[str] = set()

    @property
    def db(self) -> Any:
        if self.broken:
            raise ServiceUnavailable(f"topology {self.topology!r}: {self.where} lost the transaction of this txid; "
                                     f"the commit is retried")
        if self._db is None or self._db.closed:
            with self.errors("connecting"):
                db = self._connect()
                db.autocommit = True
                db.execute(SESSION_SETTINGS)
                db.autocommit = False
                self._db = db
            self.txid = None
        return self._db

    @contextlib.contextmanager
    def errors(self, doing: str) -> Iterator[None]:
        """A lost or refused connection as ServiceUnavailable (retried with the topology's backoff; the txid's
        transaction is gone with it), naming the database and what was being done; any other error of the database
        keeps its class, with a note naming topology, txid and what was being done."""
        txid = self.txid
        said = f"topology {self.topology!r}" + (f" txid {txid}" if txid is not None else "") + f": {self.where}"
        try:
            yield
        except LOST as exc:
            self.broken = self.whole  # inside the commit phase: nothing more of this txid may be written
            self.close()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ServiceUnavailable(
                f"{said} did not answer {doing} ({first}); the txid's writes there are rolled back and the commit is "
                f"retried: {hints.how_to_start('postgres')}, or fix the connection") from exc
        except (ConfigError, FormatVersionError, StoreWentBackwards, ServiceUnavailable):
            raise
        except Exception as exc:
            exc.add_note(f"{said}: raised {doing}; the txid's writes there are rolled back")
            raise

    def table(self, name: str) -> str:
        return f"{quote(self.schema)}.{quote(name)}"

    def begin(self, txid: int, *, whole: bool = False, resumed: bool = True) -> None:
        """Open the transaction of ``txid`` (an earlier try's, left open when it died, is rolled back first), lock
        the topology's row of txdag_commits and check it: the txid before, or this txid where this commit had begun
        before (``resumed``: held, its writes are dropped); anything else is a database that went backwards or ahead,
        and halts the commit."""
        if not whole and self.txid == txid and self._db is not None and not self._db.closed:
            self.members += 0 if self.whole else 1  # joins the open transaction
            return
        if self.broken and not whole:  # the commit phase's transaction died under a state that went on
            raise ServiceUnavailable(f"topology {self.topology!r} txid {txid}: {self.where} lost the transaction of "
                                     f"this txid; the commit is retried")
        self.rollback()
        with self.errors(f"beginning txid {txid}"), self.db.cursor() as cur:
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
        self.txid, self.held, self.whole, self.members = txid, held_txid == txid, whole, 0 if whole else 1
        if self.held:
            log.info("topology=%s txid=%s: %s holds this txid already; its writes are dropped",
                     self.topology, txid, self.where)

    def commit(self, txid: int) -> None:
        """Commit the txid's transaction with the topology's row at ``txid``: at once for the commit phase, at the
        last member's commit for states used alone."""
        if self.txid != txid:
            raise ValueError(f"{self.where}: commit({txid}) without begin({txid}); the open txid is {self.txid}")
        if not self.whole:
            self.members -= 1
            if self.members > 0:
                return
        with self.errors(f"committing txid {txid}"):
            with self.db.cursor() as cur:
                cur.execute(f"UPDATE {self.table(COMMITS_TABLE)} SET txid = %s, committed_at = now() "
                            f"WHERE topology = %s", (txid, self.topology))
            self.db.commit()
        self.txid, self.held, self.whole, self.members = None, False, False, 0

    def rollback(self) -> None:
        if self._db is not None and not self._db.closed:
            try:
                self._db.rollback()
            except LOST:  # the server went: so did the transaction
                self.close()
        self.txid, self.held, self.whole, self.members, self.broken = None, False, False, 0, False

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
        self._db, self.txid = None, None

    def writable(self, table: str) -> None:
        if self.txid is None:
            raise ValueError(f"{self.where}: a write to table {table} outside a txid: call begin_commit(txid) first")

    def done_reading(self) -> None:
        """A read outside a txid's transaction ends its own (else the connection stays idle in a transaction)."""
        if self.txid is None and self._db is not None and not self._db.closed:
            self._db.rollback()

    def ensure(self, name: str, comment: str, key_fields: int | None, columns: str, *, create: bool = True) -> bool:
        """Create the table ``name`` (``create``) with ``comment`` (its format, and whose it is), or check the one
        there: txdag's, the same owner, of this format or older (migrated), with ``key_fields`` key columns. One
        creator at a time per schema. Returns whether the table is there."""
        if name in self.checked:
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
                    cur.execute(f"CREATE TABLE IF NOT EXISTS {self.table(name)} ({columns})")
                    cur.execute(f"SELECT obj_description({quote_literal(self.table(name))}::regclass, 'pg_class')")
                    if cur.fetchone()[0] is None:  # created here, not by the creator that held the lock before
                        cur.execute(f"COMMENT ON TABLE {self.table(name)} IS {quote_literal(comment)}")
                    cur.execute(f"SELECT {quote_literal(self.table(name))}::regclass::oid, obj_description("
                                f"{quote_literal(self.table(name))}::regclass, 'pg_class')")
                    found = cur.fetchone()
                if found is not None:
                    self._check(name, found[1], comment, cur, found[0], key_fields)
            except BaseException:
                db.rollback()  # neither the lock nor the transaction stays open
                raise
            db.commit()
        if found is None:
            return False
        self.checked.add(name)
        return True

    def _check(self, name: str, comment: str | None, expected: str, cur: Any, oid: int, key_fields: int | None
               ) -> None:
        where = f"{self.where}: table {self.schema}.{name}"
        match, wanted = _FORMAT_OF.fullmatch(comment or ""), _FORMAT_OF.fullmatch(expected)
        assert wanted is not None
        if match is None or match.group(1) != wanted.group(1):
            raise ConfigError(f"{where} exists and is not txdag's (its comment is {comment!r}, not {expected!r}); "
                              f"give the store another schema, or drop the table if it is an old copy")
        if int(match.group(2)) > FORMAT:
            raise FormatVersionError(f"{where} is of format {match.group(2)}, written by a newer txdag than this one "
                                     f"(format {FORMAT}): upgrade txdag where this task runs")
        if match.group(3) != wanted.group(3):
            raise ConfigError(f"{where} holds {match.group(3)!r}, not {wanted.group(3)!r} (their names meet in one "
                              f"table name): give one of the two topologies' stores another schema")
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
        keys = ", ".join(f"{k} jsonb NOT NULL" for k in self.keys)
        self.exists = session.ensure(COMMITS_TABLE, COMMITS_COMMENT.format(FORMAT), None,
                                     "topology text PRIMARY KEY, txid bigint, committed_at timestamptz", create=create)
        self.exists = session.ensure(table, STATE_COMMENT.format(FORMAT, f"{topology}/{state}"), self.width,
                                     f"{keys}, kind text NOT NULL, value jsonb, txid bigint, prev jsonb, "
                                     f"PRIMARY KEY ({', '.join(self.keys)})", create=create) and self.exists
        self.table = session.table(table)

    @property
    def shared_transaction(self) -> PostgresSession:
        """The transaction of a txid that the commit opens for every state of the topology in this database."""
        return self.session

    def begin_commit(self, txid: int) -> None:
        self.session.begin(txid)

    def commit(self, txid: int) -> None:
        if not self.session.whole:  # used alone: the session commits when the last state that joined commits
            self.session.commit(txid)

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        """One statement per chunk of keys; a row is matched to its key by its position among the keys asked
        (jsonb's equality decides which row a key is: ``1`` and ``1.0`` are one key, as in Python)."""
        found: list[Any] = [None] * len(keys)
        encoded = [self._key(key) for key in keys]
        arrays = ", ".join(["%s::jsonb[]"] * self.width)
        using = ", ".join(self.keys)
        with self.session.errors(f"reading table {self.name}"), self.session.db.cursor() as cur:
            for first in range(0, len(encoded), CHUNK):
                chunk = encoded[first:first + CHUNK]
                cur.execute(f"SELECT q.i, t.kind, t.value::text, t.txid, t.prev::text FROM unnest({arrays}) WITH "
                            f"ORDINALITY AS q({using}, i) JOIN {self.table} t USING ({using})",
                            [*map(list, zip(*chunk))])
                for i, *stored in cur.fetchall():
                    found[first + i - 1] = _stored(*stored)
        self.session.done_reading()
        return found

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        """One ``INSERT ... ON CONFLICT DO UPDATE`` per chunk; a key given twice keeps its last value; a row that holds
        a later txid than the one written is left as it is (the map state refuses that case before)."""
        self.session.writable(self.name)
        if self.session.held:  # the database holds this txid: a replay writes nothing
            return
        rows = [(*self._key(k), *_columns(v)) for k, v in zip(keys, values, strict=True)]
        columns = ", ".join([*self.keys, "kind", "value", "txid", "prev"])
        arrays = ", ".join(["%s::jsonb[]"] * self.width + ["%s::text[]", "%s::jsonb[]", "%s::bigint[]",
                                                             "%s::jsonb[]"])
        keys_sql = ", ".join(self.keys)
        with self.session.errors(f"writing table {self.name}"), self.session.db.cursor() as cur:
            for first in range(0, len(rows), CHUNK):
                chunk = rows[first:first + CHUNK]
                cur.execute(f"INSERT INTO {self.table} AS t ({columns}) SELECT DISTINCT ON ({keys_sql}) {columns} "
                            f"FROM unnest({arrays}) WITH ORDINALITY AS q({columns}, i) ORDER BY {keys_sql}, i DESC "
                            f"ON CONFLICT ({keys_sql}) DO UPDATE SET kind = EXCLUDED.kind, value = EXCLUDED.value, "
                            f"txid = EXCLUDED.txid, prev = EXCLUDED.prev "
                            f"WHERE t.txid IS NULL OR EXCLUDED.txid IS NULL OR t.txid <= EXCLUDED.txid",
                            [*map(list, zip(*chunk))])

    def read_committed(self, keys: Sequence[Key] | None = None, largest: int = 0) -> tuple[int | None, list, int]:
        """One snapshot of the table and of the txid it holds (a reader never sees part of a txid): the stored
        objects of ``keys``, or of the ``largest`` keys by numeric value with the number of keys in the table;
        returns (txid, [(key, stored)], keys in the table or 0). A table not created yet: nothing committed."""
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

    def _key(self, key: Key) -> tuple[str, ...]:
        if len(key) != self.width:
            raise ConfigError(f"{self.session.where}: key {key!r} of table {self.name}: {self.width} field(s) expected")
        return tuple(_json(field, f"key {key!r}") for field in key)

    def __repr__(self) -> str:
        return f"PostgresBackingMap({self.session.schema}.{self.name})"


def quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        raise ConfigError(f"{what}: {value!r} has no JSON form that PostgreSQL's jsonb takes (infinity or NaN); "
                          f"filter such values out in the job") from None


def _columns(value: Any) -> tuple[str, str | None, int | None, str | None]:
    if isinstance(value, TransactionalValue):
        return "transactional", _json(value.value, "a value"), value.txid, None
    if isinstance(value, OpaqueValue):
        return "opaque", _json(value.curr, "a value"), value.txid, _json(value.prev, "a value")
    return "plain", _json(value, "a value"), None, None


def _stored(kind: str, value: str | None, txid: int, prev: str | None) -> Any:
    decoded = None if value is None else json.loads(value)
    if kind == "transactional":
        return TransactionalValue(txid, decoded)
    if kind == "opaque":
        return OpaqueValue(txid, decoded, None if prev is None else json.loads(prev))
    return decoded  # plain: no txid


_sessions: dict[tuple[str, str, str], PostgresSession] = {}


def session_of(key: str, connect: Connect, topology: str, schema: str, where: str) -> PostgresSession:
    """The session of ``topology`` in the database ``key`` names (one per process), shared by its states there."""
    check_schema(schema, where)
    if (key, topology, schema) not in _sessions:
        _sessions[key, topology, schema] = PostgresSession(connect, topology, schema, where)
    return _sessions[key, topology, schema]


def check_schema(schema: str, where: str) -> None:
    if not IDENTIFIER.fullmatch(schema):
        raise ConfigError(f"{where}: schema {schema!r}: letters, digits or '_', at most 63 characters")

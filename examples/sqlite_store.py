"""A state store of a user's own, as Trident's IBackingMap and StateFactory make one: a table in a SQLite file.

``State("words", store=SqliteStore("/data/counts.db"))`` keeps the state in the table ``<topology>__words`` (or
``table``): one row per key (the key fields as a JSON array), its value as JSON, and for a transactional or opaque
state the txid the value includes and, opaque, the value before it. The map state (TransactionalMap, OpaqueMap,
NonTransactionalMap) decides what to write; this backing map only stores it: a few hundred keys per read
statement, a chunk of keys per ``executemany``. ``begin_commit``/``commit`` wrap each txid's writes to the state in
one SQLite transaction: a crash leaves all of them or none, and a reader of the table never sees part of a txid.
The file is in WAL mode, so readers never block the commit; the states of one file share one connection, so a
txid that died inside one state's transaction is rolled back by the next ``begin_commit`` of any of them.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from txdag.state import BackingMap, OpaqueValue, StateFactory, TransactionalValue

CHUNK = 500  # keys per read statement (SQLite allows 32766 parameters)
TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")  # quoted in every statement: "order" and "word-counts" are fine
_connections: dict[str, sqlite3.Connection] = {}  # one per database file, shared by its states


@dataclass(frozen=True, repr=False)
class SqliteStore(StateFactory):
    """The definition: the database file (a path the commit task can write), the table (default: the topology's
    id and the state's name, ``<topology>__<state>``)."""

    path: str
    table: str | None = None

    def __post_init__(self) -> None:
        if self.table is not None and not TABLE.fullmatch(self.table):
            raise ValueError(f"SqliteStore table {self.table!r}: a letter or '_', then letters, digits, '_', '.', '-'")

    def backing_map(self, topology: str, state: str, key_fields: int) -> BackingMap:
        return SqliteBackingMap(self.path, self.table or f"{topology}__{state}")


class SqliteBackingMap:
    """multi_get/multi_put over one table; begin_commit/commit around each txid's writes."""

    def __init__(self, path: str, table: str) -> None:
        if path not in _connections:
            db = sqlite3.connect(path, isolation_level=None, timeout=30)  # transactions begun here, explicitly
            db.execute("PRAGMA journal_mode=WAL")
            _connections[path] = db
        self.db, self.table = _connections[path], '"' + table.replace('"', '""') + '"'
        self.db.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (key TEXT PRIMARY KEY, kind TEXT NOT NULL, "
                        f"value TEXT, txid INTEGER, prev TEXT)")

    def multi_get(self, keys: Sequence[tuple]) -> list[Any]:
        found: dict[str, Any] = {}
        encoded = [json.dumps(list(k)) for k in keys]
        for first in range(0, len(encoded), CHUNK):
            chunk = encoded[first:first + CHUNK]
            rows = self.db.execute(f"SELECT key, kind, value, txid, prev FROM {self.table} WHERE key IN "
                                   f"({','.join('?' * len(chunk))})", chunk)
            found.update((key, _stored(kind, value, txid, prev)) for key, kind, value, txid, prev in rows)
        return [found.get(k) for k in encoded]

    def multi_put(self, keys: Sequence[tuple], values: Sequence[Any]) -> None:
        rows = [(json.dumps(list(k)), *_columns(v)) for k, v in zip(keys, values, strict=True)]
        self.db.executemany(f"INSERT INTO {self.table} (key, kind, value, txid, prev) VALUES (?, ?, ?, ?, ?) "
                            f"ON CONFLICT (key) DO UPDATE SET kind = excluded.kind, value = excluded.value, "
                            f"txid = excluded.txid, prev = excluded.prev", rows)

    def begin_commit(self, txid: int) -> None:
        if self.db.in_transaction:  # an earlier try of a txid died half way: none of its writes stay
            self.db.rollback()
        self.db.execute("BEGIN IMMEDIATE")

    def commit(self, txid: int) -> None:
        self.db.commit()


def _columns(value: Any) -> tuple[str, str, int | None, str | None]:
    if isinstance(value, TransactionalValue):
        return "transactional", json.dumps(value.value), value.txid, None
    if isinstance(value, OpaqueValue):
        return "opaque", json.dumps(value.curr), value.txid, json.dumps(value.prev)
    return "plain", json.dumps(value), None, None


def _stored(kind: str, value: str, txid: int | None, prev: str | None) -> Any:
    if kind == "transactional":
        return TransactionalValue(txid, json.loads(value))
    if kind == "opaque":
        return OpaqueValue(txid, json.loads(value), json.loads(prev))
    return json.loads(value)

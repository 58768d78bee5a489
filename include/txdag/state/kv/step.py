"""A processing step with a KeyValueState (seed 002's IStatefulBolt), as txdag runs it on Spark.

``execute(row, state, collector)`` is called for each row of the batch, grouped by the step's key column (a
Storm fieldsGrouping: all rows of a key in one place, in order); ``state`` reads the step's namespace as of the
txid before this one and takes ``put``/``delete``; ``collector.emit(...)`` adds a row to the step's output. The
hooks run in the commit task, before the framework prepares, commits or rolls back the txid's writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from txdag.state.kv.layout import DELETE


class StatefulStep:
    """Subclass it and define ``execute``; ``schema`` (a Spark DDL string) names what ``collector.emit`` emits."""

    schema: str = ""

    def execute(self, row: Any, state: StepState, collector: Any) -> None:
        raise NotImplementedError

    def pre_prepare(self, txid: int) -> None:
        """Called before the framework prepares the txid's writes (seed 002's prePrepare)."""

    def pre_commit(self, txid: int) -> None:
        """Called before the framework commits the txid's writes (seed 002's preCommit)."""

    def pre_rollback(self) -> None:
        """Called before the framework rolls back a prepared txid (seed 002's preRollback)."""


class StepState:
    """The step's KeyValueState inside one Spark partition: committed values read in bulk up front (as of the
    txid before), a key outside them read on first use, writes kept until the partition stages them."""

    def __init__(self, values: Mapping[Any, Any], fetch: Callable[[Any], Mapping[Any, Any]]) -> None:
        self._read = dict(values)
        self._known = set(values)
        self._fetch = fetch
        self.writes: dict[Any, Any] = {}

    def prefetched(self, keys: set[Any]) -> None:
        self._known |= keys

    def get(self, key: Any, default: Any = None) -> Any:
        if key in self.writes:
            value = self.writes[key]
            return default if value is DELETE else value
        if key not in self._known:
            self._read.update(self._fetch(key))
            self._known.add(key)
        return self._read.get(key, default)

    def put(self, key: Any, value: Any) -> None:
        self.writes[key] = value

    def delete(self, key: Any) -> None:
        self.writes[key] = DELETE

    def __contains__(self, key: Any) -> bool:
        missing = object()
        return self.get(key, missing) is not missing

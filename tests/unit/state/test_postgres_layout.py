"""Pure parts of the PostgreSQL store (txdag.state.postgres): table names, what a row holds per kind, and the order
in which the commit begins, commits and rolls back the transactions states share (shared_transactions)."""

from __future__ import annotations

import pytest

from txdag.errors import ConfigError
from txdag.state.base import shared_transactions
from txdag.state.postgres import _columns, _stored, table_name
from txdag.state.values import OpaqueValue, TransactionalValue


def test_a_state_table_is_named_after_its_topology_and_state_in_lower_case() -> None:
    assert table_name("Word-Count", "users.v2") == "word_count__users_v2"
    long = table_name("t" * 40, "s" * 30)
    assert len(long) == 63 and long.startswith("t" * 40 + "__" + "s" * 12 + "_")
    assert long != table_name("t" * 40, "s" * 31), "two long names that share their first 54 characters meet"


def test_a_value_without_a_json_form_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"^the value: inf has no JSON form that PostgreSQL's jsonb takes"):
        _columns(TransactionalValue(3, float("inf")))
    with pytest.raises(ConfigError, match=r"^its previous value: nan has no JSON form"):
        _columns(OpaqueValue(3, 1, float("nan")))


@pytest.mark.parametrize("stored", [TransactionalValue(4, 10), OpaqueValue(5, 12.5, None), OpaqueValue(6, 3, 1),
                                    {"a": [1, 2]}, 7, None])
def test_each_kind_reads_back_as_it_was_written(stored) -> None:
    kind, value, txid, prev = _columns(stored)
    assert _stored(kind, value, txid, prev) == stored


class Transaction:
    def __init__(self, log: list, name: str, fails: str = "") -> None:
        self.log, self.name, self.fails = log, name, fails

    def begin(self, txid: int, *, whole: bool = False, resumed: bool = True) -> None:
        self.log.append(("begin", self.name, txid, whole, resumed))
        if self.fails == "begin":
            raise ConnectionError(f"{self.name} did not begin")

    def commit(self, txid: int) -> None:
        self.log.append(("commit", self.name, txid))
        if self.fails == "commit":
            raise ConnectionError(f"{self.name} did not commit")

    def rollback(self) -> None:
        self.log.append(("rollback", self.name))


class Backing:
    def __init__(self, transaction: Transaction | None) -> None:
        if transaction is not None:
            self.shared_transaction = transaction


def test_shared_transactions_begin_once_commit_once_after_the_writes_and_roll_back_on_failure() -> None:
    log: list = []
    one, two = Transaction(log, "one"), Transaction(log, "two")
    backings = [Backing(one), Backing(one), Backing(None), Backing(two)]
    with shared_transactions(backings, 7, resumed=False):
        log.append("writes")
    assert log == [("begin", "one", 7, True, False), ("begin", "two", 7, True, False), "writes", ("commit", "one", 7),
                   ("commit", "two", 7)]
    log.clear()
    with pytest.raises(RuntimeError, match="died"), shared_transactions(backings, 8):
        raise RuntimeError("died half way")
    assert log == [("begin", "one", 8, True, True), ("begin", "two", 8, True, True), ("rollback", "one"),
                   ("rollback", "two")]


@pytest.mark.parametrize("fails", ["begin", "commit"])
def test_a_shared_transaction_that_fails_leaves_none_of_the_others_open(fails) -> None:
    log: list = []
    one, two, three = Transaction(log, "one"), Transaction(log, "two", fails), Transaction(log, "three")
    with pytest.raises(ConnectionError, match=f"two did not {fails}"), shared_transactions(
            [Backing(one), Backing(two), Backing(three)], 4):
        log.append("writes")
    ended = [entry for entry in log if entry[0] in ("commit", "rollback")]
    if fails == "begin":  # nothing was written: what began, and the one that failed half way, are rolled back
        assert "writes" not in log and ended == [("rollback", "one"), ("rollback", "two")]
    else:  # one committed; two and three are rolled back, none left open
        assert ended == [("commit", "one", 4), ("commit", "two", 4), ("rollback", "two"), ("rollback", "three")]

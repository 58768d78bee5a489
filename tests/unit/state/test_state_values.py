"""TransactionalValue and OpaqueValue rules: Storm's test-opaque-value and seed 004's worked examples."""

import pytest

from txdag import TransactionAttempt
from txdag.errors import TxidOrderError
from txdag.state import OpaqueValue, TransactionalValue


def test_opaque_value_reads_curr_for_later_batches_and_prev_for_a_replay():
    value = OpaqueValue(8, "v1", "v0")
    assert value.get(None) == "v1"
    assert value.get(100) == "v1"
    assert value.get(9) == "v1"
    assert value.get(8) == "v0"
    with pytest.raises(TxidOrderError, match="txid 7 is behind the stored txid 8"):
        value.get(7)


def test_opaque_value_update_with_the_same_txid_keeps_prev():
    value = OpaqueValue(8, "v1", "v0")
    assert value.update(8, "v2") == OpaqueValue(8, "v2", "v0")


def test_opaque_value_update_with_a_later_txid_moves_curr_to_prev():
    value = OpaqueValue(8, "v1", "v0")
    assert value.update(9, "v2") == OpaqueValue(9, "v2", "v1")
    assert value == OpaqueValue(8, "v1", "v0"), "values are immutable"


def test_seed_004_opaque_example():
    stored = OpaqueValue(txid=2, curr=4, prev=1)
    partial = 2
    assert stored.update(3, stored.get(3) + partial) == OpaqueValue(3, 6, 4)
    assert stored.update(2, stored.get(2) + partial) == OpaqueValue(2, 3, 1)


def test_transactional_value_refuses_an_older_txid():
    value = TransactionalValue(5, 10)
    assert value.update(6, 11) == TransactionalValue(6, 11)
    with pytest.raises(TxidOrderError) as info:
        value.update(4, 11)
    assert (info.value.current, info.value.stored) == (4, 5)
    assert "txid 4" in str(info.value) and "txid 5" in str(info.value)


@pytest.mark.parametrize("txid,attempt", [(0, 1), (1, 0), (-1, 1), (1.5, 1), (True, 1), ("1", 1)])
def test_transaction_attempt_rejects_bad_numbers(txid, attempt):
    with pytest.raises(ValueError, match="TransactionAttempt"):
        TransactionAttempt(txid, attempt)


def test_transaction_attempt_orders_by_txid_then_attempt():
    assert TransactionAttempt(2, 1) > TransactionAttempt(1, 9)
    assert str(TransactionAttempt(3, 2)) == "txid 3 attempt 2"

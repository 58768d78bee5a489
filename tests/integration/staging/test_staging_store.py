"""Staging per (txid, attempt): sealed, verified at commit, isolated between attempts, cleaned up."""

import pytest

from txdag import TransactionAttempt
from txdag.errors import BatchReadError, FormatVersionError, StaleAttemptError
from txdag.staging.format import COMBINE, KV, SUM, OutputSpec
from txdag.staging.layout import fence_key
from txdag.staging.store import FENCE_TTL, Staging, stage_key


def test_write_seal_read_round_trip(redis_client, prefix):
    staging = Staging(redis_client, prefix)
    tx = TransactionAttempt(3, 1)
    partials = [(f"w{i}", i) for i in range(12_000)] + [("half", 0.5)]
    assert staging.write(tx, "words", partials) == 12_001
    staging.write(tx, "words", [("w1", 1)])  # a retried Spark task rewrites, it does not add
    staging.seal(tx, {"words": 12_001})
    read = staging.read(tx)
    assert read["words"]["w11999"] == 11999 and read["words"]["w1"] == 1 and read["words"]["half"] == 0.5
    assert len(read["words"]) == 12_001


def test_unsealed_or_lost_staging_fails_loudly(redis_client, prefix):
    staging = Staging(redis_client, prefix)
    tx = TransactionAttempt(4, 2)
    staging.write(tx, "words", [("a", 1), ("b", 2)])
    with pytest.raises(BatchReadError, match="no sealed staging for txid 4 attempt 2 .*replay txid 4"):
        staging.read(tx)
    staging.seal(tx, {"words": 2})
    redis_client.hdel(stage_key(prefix, tx, "words"), "b")  # as if Redis lost part of it
    with pytest.raises(BatchReadError, match="holds 1 of 2 partials"):
        staging.read(tx)


def test_attempts_do_not_see_each_other_and_delete_cleans_all(redis_client, prefix):
    staging = Staging(redis_client, prefix)
    old, new = TransactionAttempt(5, 1), TransactionAttempt(5, 2)
    staging.write(old, "words", [("a", 100)])
    staging.write(new, "words", [("a", 1)])
    staging.seal(new, {"words": 1})
    assert staging.read(new) == {"words": {"a": 1}}
    assert staging.delete(5, [1, 2], ["words"]) == 3
    assert redis_client.keys(f"txdag:stage:{{{prefix}}}:*") == []


def test_an_attempt_is_claimed_by_one_processing_try_and_delete_frees_it(redis_client, prefix):
    staging = Staging(redis_client, prefix)
    tx = TransactionAttempt(6, 1)
    assert staging.claim(tx, "run_a try 1") == "run_a try 1"
    assert staging.claim(tx, "run_a try 1") == "run_a try 1"  # the same try again (a reschedule) keeps it
    assert staging.claim(tx, "run_a try 2") == "run_a try 1"  # a retry must take a fresh attempt
    staging.delete(6, [1], ["words"])
    fence = fence_key(prefix, 6)
    assert [k.decode() for k in redis_client.keys(f"txdag:*{{{prefix}}}*")] == [fence]  # the fence stays a while
    assert 0 < redis_client.ttl(fence) <= FENCE_TTL
    assert staging.claim(tx, "run_b try 1") == "run_b try 1"


def test_a_newer_claim_fences_every_write_of_the_older_attempt_even_after_the_cleanup(redis_client, prefix):
    """The zombie case: try 1 (attempt 1) is given up on; try 2 re-emits the txid and claims attempt 2. Whatever
    try 1 still writes (a partial, its seal, a claim) is refused, before and after the commit's cleanup."""
    staging = Staging(redis_client, prefix)
    old, new = TransactionAttempt(8, 1), TransactionAttempt(8, 2)
    assert staging.claim(old, "run try 1") == "run try 1"
    staging.write(old, "words", [("a", 1)])  # before the retry: written
    assert staging.claim(new, "run try 2") == "run try 2"
    for stale_write in (lambda: staging.write(old, "words", [("b", 5)]), lambda: staging.seal(old, {"words": 1}),
                        lambda: staging.claim(old, "run try 1"),
                        lambda: staging.stage(old, {"words": {"c": 1}})):
        with pytest.raises(StaleAttemptError, match=f"topology '{prefix}' (claiming )?txid 8 attempt 1: attempt 1 "
                                                    "is stale: attempt 2 of its txid was claimed since"):
            stale_write()
    assert redis_client.hgetall(stage_key(prefix, old, "words")) == {b"a": b"1"}, "nothing more of attempt 1"
    assert not redis_client.exists(stage_key(prefix, old))
    staging.stage(new, {"words": {"a": 2}})
    assert staging.read(new) == {"words": {"a": 2}}
    staging.delete(8, [1, 2], ["words"])  # the commit's cleanup
    with pytest.raises(StaleAttemptError):
        staging.write(old, "words", [("late", 1)])
    assert redis_client.keys(f"txdag:stage:{{{prefix}}}:*") == []


def test_each_kind_is_read_back_as_the_table_of_kinds_says(redis_client, prefix):
    staging = Staging(redis_client, prefix)
    tx = TransactionAttempt(7, 1)
    staging.write(tx, "words", [("a", 2), ("b", 0.5)])
    staging.write(tx, "longest", [("a", '{"w": "abc"}')])
    staging.seal(tx, {"words": OutputSpec(SUM, 2), "longest": OutputSpec(COMBINE, 1), "counts": OutputSpec(KV, 4)})
    assert staging.read(tx) == {"words": {"a": 2, "b": 0.5}, "longest": {"a": {"w": "abc"}}, "counts": {}}
    at_commit = {name: values for name, (_, values) in staging.read_outputs(tx, commit=True).items()}
    assert at_commit == {"words": stage_key(prefix, tx, "words"), "longest": {"a": {"w": "abc"}}, "counts": {}}
    # the bytes of what was read into Python, as staged: the combine's field and JSON (the sums' are the script's)
    assert staging.read_staged(tx, commit=True)[1] == len("a") + len('{"w": "abc"}')
    assert staging.read_staged(tx)[1] == len("a") + len('{"w": "abc"}') + len("a2") + len("b0.5")
    redis_client.hdel(stage_key(prefix, tx, "words"), "b")  # the sums left in Redis are counted all the same
    with pytest.raises(BatchReadError, match="state 'words' holds 1 of 2 partials"):
        staging.read_outputs(tx, commit=True)


def test_a_seal_with_a_kind_this_txdag_does_not_know_is_refused_naming_it(redis_client, prefix):
    staging = Staging(redis_client, prefix)
    tx = TransactionAttempt(8, 2)
    redis_client.hset(stage_key(prefix, tx), mapping={"v": "2", "words": '{"kind": "frobnicate", "count": 1}'})
    with pytest.raises(FormatVersionError, match=rf"txid 8 attempt 2 of topology '{prefix}': state 'words' has output "
                                                 r"kind 'frobnicate', which this txdag does not know"):
        staging.read_outputs(tx, commit=True)

"""The key layouts, spelled out: what is in users' Redis must still be found, so a key may not change by a byte
without a migration. Each layout module has txdag.keyspace's shape (``keys``, ``acl_patterns``)."""

from __future__ import annotations

import pytest
from support.keys import redis_match

from txdag.attempt import TransactionAttempt, attempt_id, parse_attempt_id
from txdag.commit import newvalues, rejections
from txdag.keyspace import below, glob_escape
from txdag.spouts import streams, tweets
from txdag.staging import layout as staging_layout
from txdag.state import redis_backing
from txdag.state.kv import layout as kv_layout
from txdag.windows import store as window_store

TX = TransactionAttempt(12, 3)
LAYOUTS = [redis_backing, staging_layout, kv_layout, rejections, newvalues, window_store, tweets, streams]


@pytest.mark.parametrize("module", LAYOUTS, ids=lambda m: m.__name__)
def test_every_layout_has_the_shape(module) -> None:
    assert callable(module.keys) and callable(module.acl_patterns)
    assert "txdag.keyspace" in module.__doc__


def test_the_keys_as_in_users_redis() -> None:
    assert redis_backing.keys("ns") == ["ns", "{ns}:txid", "{ns}:prev", "{ns}:meta"]
    assert redis_backing.keys("{t}ns")[1:] == ["{t}ns:txid", "{t}ns:prev", "{t}ns:meta"]
    assert staging_layout.keys("tw", TX, ["users"]) == [
        "txdag:stage:{tw}:12:3", "txdag:claim:{tw}:12:3", "txdag:stage:{tw}:12:3:users"]
    assert kv_layout.keys("tw:c", TX) == [
        "txdag:kv:{tw:c}", "txdag:kv:{tw:c}:meta", "txdag:kv:{tw:c}:prepared", "txdag:kv:{tw:c}:undo",
        "txdag:kv:{tw:c}:stages", "txdag:kv:{tw:c}:stage:12:3", "txdag:kv:{tw:c}:migrating",
        "txdag:kv:{tw:c}:stage:12:3:migrating"]
    assert kv_layout.KVNamespace("tw:c").stage_prefix == "txdag:kv:{tw:c}:stage:"
    assert rejections.keys("tw") == ["txdag:rejected:{tw}"]
    assert newvalues.keys("tw", "trending") == ["txdag:values:{tw}:trending"]
    assert window_store.keys("tw", "win", 5, 7) == [
        "txdag:window:{tw}:win", "txdag:window:{tw}:win:blocks", "txdag:window:{tw}:win:rows:5",
        "txdag:window:{tw}:win:fired:5", "txdag:window:{tw}:win:result:7"]
    assert tweets.keys("p:", [9, 10]) == ["p:NEXT_READ", "p:NEXT_WRITE", "p:9", "p:10"]
    assert streams.keys(["s:0", "s:1"]) == ["s:0", "s:1"]


def test_the_acl_patterns() -> None:
    assert redis_backing.acl_patterns("n*s") == ["n\\*s", "{n\\*s}:txid", "{n\\*s}:prev", "{n\\*s}:meta"]
    assert staging_layout.acl_patterns("tw") == ["txdag:stage:{tw}:*", "txdag:claim:{tw}:*"]
    assert kv_layout.acl_patterns("tw") == ["txdag:kv:{tw:*"]
    assert rejections.acl_patterns("tw") == ["txdag:rejected:{tw}"]
    assert newvalues.acl_patterns("tw") == ["txdag:values:{tw}:*"]
    assert window_store.acl_patterns("tw") == ["txdag:window:{tw}:*"]
    assert tweets.acl_patterns("p?") == ["p\\?[0-9]*", "p\\?NEXT_WRITE", "p\\?NEXT_READ"]
    assert streams.acl_patterns(["s[0]"]) == ["s\\[0\\]"]


def test_attempt_ids_round_trip() -> None:
    assert attempt_id(TX) == "12:3"
    assert parse_attempt_id("12:3") == TX


def test_glob_escape_and_below_match_only_what_they_say() -> None:
    key = "a*b?[c]\\d"
    assert glob_escape(key) == "a\\*b\\?\\[c\\]\\\\d" and redis_match(glob_escape(key), key)
    assert not redis_match(glob_escape(key), "aXb?[c]\\d")
    assert redis_match(below("x*{t}"), "x*{t}:1:2") and not redis_match(below("x*{t}"), "x*{t}")
    assert not redis_match(below("x*{t}"), "xy{t}:1")

"""txdag.luascripts without a server: every error code of every declared script becomes its TxdagError with a
message that names the namespace, txid and attempt and says what to do; anything else is left alone."""

from __future__ import annotations

import pytest
import redis

import txdag.commit.newvalues
import txdag.spouts.tweets
import txdag.staging.store
import txdag.state.kv.scripts
import txdag.state.lua
import txdag.windows.store  # noqa: F401  (declares its script)
from txdag.errors import (
    BatchReadError,
    ConfigError,
    FormatVersionError,
    StaleAttemptError,
    TxdagError,
    TxidOrderError,
)
from txdag.luascripts import declare, declared, parse, translate
from txdag.state.kv.errors import KeyCollision, KVStateError

MAP = txdag.state.lua.APPLY
KV = txdag.state.kv.scripts.PREPARE
TWEETS = txdag.spouts.tweets.APPEND_TWEETS
STAGING = txdag.staging.store.FENCED_HSET

# (script, reply as Redis sends it without the " script: ..." tail, error class, words the message must hold)
CASES = {
    "TXDAG_BACKWARDS": (MAP, "TXDAG_BACKWARDS ns:a 7 3 my field", TxidOrderError,
                        ["txid 3 is behind the stored txid 7", "state 'ns:a' field 'my field'"]),
    "TXDAG_KIND": (MAP, "TXDAG_KIND ns:a transactional opaque", ConfigError,
                   ["'ns:a' holds state of kind transactional, not opaque", "its own namespace"]),
    "TXDAG_VERSION": (MAP, "TXDAG_VERSION ns:a 2", FormatVersionError, ["'ns:a' has format version '2'", "upgrade"]),
    "TXDAG_NOTNUM": (MAP, "TXDAG_NOTNUM ns:a my field 1.5", TxdagError,
                     ["'ns:a' field 'my field' is not a number", "partial 1.5"]),
    "TXDAG_KV_BEHIND": (KV, "TXDAG_KV_BEHIND ns:a 3 7", TxidOrderError, ["txid 3", "txid 7", "ns:a"]),
    "TXDAG_KV_SERIALIZERS": (KV, "TXDAG_KV_SERIALIZERS ns:a base64,base64 json,json", ConfigError,
                             ["base64,base64",
                              "txdag state migrate ns:a --key-serializer json --value-serializer json"]),
    "TXDAG_KV_MIGRATING": (KV, "TXDAG_KV_MIGRATING ns:a json,utf8", KVStateError,
                           ["--key-serializer json --value-serializer utf8"]),
    "TXDAG_KV_OTHER_PREPARED": (KV, "TXDAG_KV_OTHER_PREPARED ns:a 4 5", KVStateError,
                                ["txid 4 is prepared", "txid 5 cannot", "commit or roll back txid 4"]),
    "TXDAG_KV_STALE": (KV, "TXDAG_KV_STALE ns:a 5 1 2", StaleAttemptError,
                       ["attempt 2 of txid 5", "attempt 1 is stale"]),
    "TXDAG_KV_NOT_STAGED": (KV, "TXDAG_KV_NOT_STAGED ns:a 5 1", BatchReadError, ["txid 5 attempt 1", "replay txid 5"]),
    "TXDAG_KV_NOT_SEALED": (KV, "TXDAG_KV_NOT_SEALED ns:a 5 1", BatchReadError,
                            ["txid 5 attempt 1 is not sealed", "replay txid 5"]),
    "TXDAG_KV_LOST": (KV, "TXDAG_KV_LOST ns:a 5 1 9 10", BatchReadError,
                      ["txid 5 attempt 1 holds 9 keys, sealed with 10", "replay txid 5"]),
    "TXDAG_KV_NOT_PREPARED": (KV, "TXDAG_KV_NOT_PREPARED ns:a 5 none", KVStateError,
                              ["txid 5 cannot commit", "prepared: none"]),
    "TXDAG_KV_PREPARED": (KV, "TXDAG_KV_PREPARED ns:a 5", KVStateError, ["txid 5 is prepared", "then migrate"]),
    "TXDAG_KV_VERSION": (KV, "TXDAG_KV_VERSION ns:a 3", FormatVersionError, ["'ns:a' has format version '3'"]),
    "TXDAG_KV_NOMETA": (KV, "TXDAG_KV_NOMETA ns:a", KVStateError, ["txdag:kv:{ns:a}:meta", "--from-key-serializer"]),
    "TXDAG_KV_NEW_STAGING": (KV, "TXDAG_KV_NEW_STAGING ns:a", KVStateError, ["run the same `txdag state migrate`"]),
    "TXDAG_KV_UNFINISHED": (KV, "TXDAG_KV_UNFINISHED ns:a", KVStateError, ["run the same `txdag state migrate`"]),
    "TXDAG_KV_NOT_MIGRATING": (KV, "TXDAG_KV_NOT_MIGRATING ns:a", KVStateError,
                               ["run the same `txdag state migrate`"]),
    "TXDAG_KV_COLLISION": (KV, "TXDAG_KV_COLLISION ns:a 3", KeyCollision, ["field number 3", "two keys would merge"]),
    "TXDAG_STALE_ATTEMPT": (STAGING, "TXDAG_STALE_ATTEMPT 1 2", StaleAttemptError,
                            ["attempt 1 is stale", "attempt 2 of its txid was claimed since", "write is refused"]),
    "TXDAG_NOT_INTEGER": (TWEETS, "TXDAG_NOT_INTEGER p:NEXT_WRITE", ConfigError,
                          ["p:NEXT_WRITE does not hold an integer", "must hold an integer tweet id"]),
}


def reply(text: str) -> redis.ResponseError:
    """The error redis-py raises for a script's ``error({err = text})`` (Redis 7 appends where it was raised)."""
    return redis.ResponseError(f"{text} script: 3f2a9c, on @user_script:12.")


def test_every_code_of_every_declared_script_has_a_case() -> None:
    codes = {code for name, script in declared().items() if not name.startswith("test.") for code in script.errors}
    assert codes == set(CASES), "add a case for each new code (and drop the cases of codes gone)"
    assert {"state.put", "state.apply", "state.apply_staged", "kv.open", "kv.prepare", "kv.commit", "kv.rollback",
            "kv.migrate_begin", "kv.migrate_move", "kv.migrate_finish", "newvalues.emit", "windows.append",
            "tweets.append", "staging.claim", "staging.fenced_hset"} <= set(declared())


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_code_becomes_its_error(code: str) -> None:
    script, text, kind, words = CASES[code]
    exc = reply(text)
    error = translate(exc, script)
    assert type(error) is kind
    for word in words:
        assert word in str(error)
    assert "script:" not in str(error), "Redis's tail of the reply is not part of the message"


def test_a_collision_carries_the_index_of_the_group_in_the_chunk() -> None:
    error = translate(reply("TXDAG_KV_COLLISION ns:a 3"), txdag.state.kv.scripts.MIGRATE_MOVE)
    assert isinstance(error, KeyCollision) and error.index == 3


def test_where_starts_the_message() -> None:
    error = translate(reply("TXDAG_BACKWARDS ns:a 7 3 f"), MAP, where="topology 'tweets', committing txid 3")
    assert isinstance(error, TxidOrderError) and (error.current, error.stored) == (3, 7)
    assert str(error).startswith("topology 'tweets', committing txid 3: txid 3 is behind the stored txid 7")


def test_an_unknown_code_names_the_script_and_the_code() -> None:
    error = translate(reply("TXDAG_KV_BEHIND ns:a 3 7"), MAP)  # a kv code from a map-state script
    assert type(error) is TxdagError
    assert "Lua script 'state.apply'" in str(error) and "TXDAG_KV_BEHIND ns:a 3 7" in str(error)
    assert "TXDAG_BACKWARDS" in str(error), "names the codes the script declares"
    assert "does not declare" in str(error) and "report it" in str(error)


def test_a_script_without_codes_names_itself_too() -> None:
    error = translate(reply("TXDAG_OOPS k"), txdag.commit.newvalues.EMIT)
    assert type(error) is TxdagError and "'newvalues.emit'" in str(error) and "(none)" in str(error)


def test_words_a_builder_cannot_read_name_the_script() -> None:
    error = translate(reply("TXDAG_BACKWARDS ns:a seven 3 f"), MAP)
    assert type(error) is TxdagError
    assert "Lua script 'state.apply'" in str(error) and "TXDAG_BACKWARDS ns:a seven 3 f" in str(error)


@pytest.mark.parametrize("text", [
    "WRONGTYPE Operation against a key holding the wrong kind of value",
    "NOPERM The user executing the script can't access at least one of the keys mentioned in the command "
    "script: 3f2a9c, on @user_script:1. TXDAG_IN_A_KEY_NAME",
])
def test_other_replies_are_left_alone(text: str) -> None:
    other = redis.ResponseError(text)
    assert parse(other) is None
    assert translate(other, MAP) is other


def test_a_name_is_declared_once() -> None:
    first = declare("test.once", "return 1")
    assert declare("test.once", "return 1") is first, "importing the owner again declares the same script"
    with pytest.raises(ValueError, match="'test.once' is declared twice"):
        declare("test.once", "return 2")
    with pytest.raises(ValueError, match="must start with 'TXDAG_'"):
        declare("test.bad_code", "return 1", {"KV_BEHIND": lambda ns: TxdagError(ns)})

"""txdag.luascripts against a real Redis: a script is registered once per client, survives a flushed script cache,
and its TXDAG_ error reply arrives as the TxdagError its table builds."""

from __future__ import annotations

import pytest
import redis

from txdag.errors import ConfigError
from txdag.luascripts import declare, run

ECHO = declare("test.echo", "return {KEYS[1], ARGV[1]}")
REFUSE = declare(
    "test.refuse",
    "if ARGV[1] == 'no' then error({err = 'TXDAG_TEST_REFUSED ' .. KEYS[1] .. ' ' .. ARGV[2]}) end\n"
    "return redis.call('INCR', KEYS[1])",
    {"TXDAG_TEST_REFUSED": lambda key, why: ConfigError(f"key {key!r} refused: {why}")},
)


def test_a_script_is_registered_once_per_client(redis_client, redis_url, prefix, monkeypatch):
    registered = []
    monkeypatch.setattr(redis.Redis, "register_script",
                        lambda self, source: registered.append(self) or redis.commands.core.Script(self, source))
    other = redis.Redis.from_url(redis_url)
    try:
        for client in (redis_client, redis_client, other, other, redis_client):
            assert run(client, ECHO, [f"{prefix}:k"], ["v"]) == [f"{prefix}:k".encode(), b"v"]
    finally:
        other.close()
    assert registered == [redis_client, other]


def test_a_flushed_script_cache_loads_the_script_again(redis_client, prefix):
    assert run(redis_client, REFUSE, [f"{prefix}:n"], ["yes"]) == 1
    redis_client.script_flush()  # as after a restart of Redis
    assert run(redis_client, REFUSE, [f"{prefix}:n"], ["yes"]) == 2


def test_an_error_reply_becomes_the_txdag_error_of_its_code(redis_client, prefix):
    with pytest.raises(ConfigError, match=rf"^topology 't': key '{prefix}:n' refused: because$") as caught:
        run(redis_client, REFUSE, [f"{prefix}:n"], ["no", "because"], where="topology 't'")
    assert isinstance(caught.value.__cause__, redis.ResponseError), "the server's reply stays the cause"
    assert redis_client.get(f"{prefix}:n") is None, "the script stopped before it wrote"


def test_other_error_replies_are_raised_as_they_are(redis_client, prefix):
    redis_client.hset(f"{prefix}:n", "f", "1")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        run(redis_client, REFUSE, [f"{prefix}:n"], ["yes"])

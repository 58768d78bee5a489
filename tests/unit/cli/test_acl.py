"""txdag.cli.acl's rules, the AccessDenied message and the log masking, without a server."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest
import redis
from support.keys import every_kind_of_key, granted, redis_match, source_keys, written_keys

from txdag.attempt import TransactionAttempt
from txdag.cli.acl import glob_escape, key_patterns, redis_acl_rules, setuser_args, setuser_line
from txdag.cli.main import main
from txdag.errors import AccessDenied, ConfigError
from txdag.masking import mask, register_secret
from txdag.redisio import access_denied
from txdag.staging.layout import claim_key, stage_key
from txdag.state.kv import KVNamespace, kv_namespace
from txdag.state.redis_backing import state_keys
from txdag.topology.definition import KeyValue, State, StreamsSource, TweetsSource
from txdag.topology.topology import TransactionalTopology

ROOT = Path(__file__).resolve().parents[3]
DANGEROUS = ("+@all", "+flushall", "+flushdb", "+keys", "+scan", "+config", "+acl", "+shutdown", "+debug", "+multi")


def topology(name: str = "tw", **kwargs) -> TransactionalTopology:
    kwargs.setdefault("source", TweetsSource(prefix="src:"))
    kwargs.setdefault("states", [State("users"), State("pairs", key_fields=2, separator=":")])
    kwargs.setdefault("marker_key", "LAST")
    return TransactionalTopology(name, job="spark_jobs/tweets_analytics.py", project_dir=str(ROOT), **kwargs)


def matches(rules: list[str], key: str, prefix: str = "~") -> bool:
    return bool(granted(rules, key, prefix))


def test_every_key_the_layouts_write_is_granted_and_each_pattern_is_needed() -> None:
    t = every_kind_of_key("tw")
    rules, written = key_patterns(t), written_keys(t)
    assert len(written) > 30 and [k for k in written if not matches(rules, k)] == []
    assert [k for k in source_keys(t) if not matches(rules, k, "%R~") or matches(rules, k)] == []
    for rule in rules:  # no rule is there for nothing: without it, some key is refused
        rest = [r for r in rules if r != rule]
        assert [k for k in written + source_keys(t) if not (matches(rest, k) or matches(rest, k, "%R~"))], rule


@pytest.mark.parametrize("other", ["tw2", "t", "tw-x", "tw.b", "TW", "xtw", "tw_"])
def test_a_topologys_patterns_match_no_key_of_another(other: str) -> None:
    rules = key_patterns(every_kind_of_key("tw"), source_write=True)
    theirs = every_kind_of_key(other)
    assert [k for k in written_keys(theirs) + source_keys(theirs) if matches(rules, k)] == []


def test_near_misses_are_refused() -> None:
    t = topology()
    rules = key_patterns(t)
    tx = TransactionAttempt(12, 3)
    assert [k for k in written_keys(topology(key_values=[KeyValue("counter")])) if not matches(rules, k)] == []
    assert not matches(rules, stage_key("other", tx)) and not matches(rules, "users2")
    assert not matches(rules, claim_key("tw2", tx)) and not matches(rules, state_keys("pairsx")[1])
    others = [KVNamespace(kv_namespace("tw2", "counter")).committed, KVNamespace("twx:c").meta,
              KVNamespace("tw").committed, "txdag:kv:{tw}:meta", "LAST2", "txdag:rejected:{tw}:x"]
    assert [k for k in others if matches(rules, k)] == []


def test_redis_globs_as_fnmatch() -> None:
    assert redis_match(glob_escape("a*b?[c]\\d"), "a*b?[c]\\d")
    assert not redis_match(glob_escape("a*b"), "axxb") and redis_match("a*b", "axxb")
    assert redis_match("s:[0-9]*", "s:12") and not redis_match("s:[0-9]*", "s:x1")
    assert redis_match("s:[^0-9]", "s:x") and not redis_match("s:[^0-9]", "s:1")


def test_the_source_is_read_only_unless_asked() -> None:
    t = topology()
    rules = key_patterns(t)
    for key in ("src:1", "src:12345", "src:NEXT_WRITE", "src:NEXT_READ"):
        assert matches(rules, key, "%R~") and not matches(rules, key)
    assert not matches(rules, "src:other", "%R~") and not matches(rules, "1", "%R~")
    assert matches(key_patterns(t, source_write=True), "src:7")
    streams = key_patterns(topology(source=StreamsSource(["s:0", "s:1"])))
    assert "%R~s:0" in streams and "%R~s:1" in streams


def test_only_txdags_commands_after_minus_all() -> None:
    rules = redis_acl_rules(topology())
    assert rules.index("-@all") < min(i for i, r in enumerate(rules) if r.startswith("+"))
    assert not [r for r in rules if r.startswith(DANGEROUS)]
    for needed in ("+evalsha", "+eval_ro", "+script|load", "+hincrby", "+xrange", "+select", "+copy", "+rename",
                   "+hkeys", "+hsetnx", "+cluster|slots", "+command"):
        assert needed in rules


def test_glob_characters_in_keys_match_only_themselves() -> None:
    assert glob_escape("a*b?[c]\\d") == "a\\*b\\?\\[c\\]\\\\d"
    t = topology(states=[State("s", namespace="ns*")])
    assert "~ns\\*" in key_patterns(t)


def test_several_topologies_in_one_user_without_duplicates() -> None:
    rules = redis_acl_rules(topology("a"), topology("b"))
    assert "~txdag:stage:{a}:*" in rules and "~txdag:stage:{b}:*" in rules
    assert len(rules) == len(set(rules))
    with pytest.raises(ConfigError):
        redis_acl_rules()


def test_the_line_carries_the_password_hash_never_the_password() -> None:
    args = setuser_args("tw-user", [topology()], password="pa55-word")
    line = setuser_line(args)
    assert line.startswith("ACL SETUSER tw-user reset on #" + hashlib.sha256(b"pa55-word").hexdigest())
    assert "pa55-word" not in line
    keep = setuser_args("tw-user", [topology()])
    assert keep[:3] == ["tw-user", "on", "resetkeys"] and "reset" not in keep
    assert setuser_line(["u", "~a b", 'x"y']) == 'ACL SETUSER u "~a b" "x\\"y"'
    with pytest.raises(ConfigError):
        setuser_args("two words", [topology()])


def test_cli_prints_the_line_for_a_shipped_topology(capsys, monkeypatch) -> None:
    monkeypatch.setenv("TW_PW", "cli-secret-pw")
    assert main(["acl", "redis", "tweets_analytics", "--user", "tw", "--password-env", "TW_PW",
                 "--dags", str(ROOT / "dags")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ACL SETUSER tw reset on #") and "~txdag:stage:{tweets_analytics}:*" in out
    assert "cli-secret-pw" not in out
    assert main(["acl", "redis", "nope", "--dags", str(ROOT / "dags")]) == 1
    assert "no topology ['nope']" in capsys.readouterr().err


def test_access_denied_names_user_topology_keys_and_the_fix_not_the_password() -> None:
    client = redis.Redis(host="127.0.0.1", port=1, username="tw-user", password="hunter2-pw")
    refused = redis.exceptions.NoPermissionError("this user has no permissions to access one of the keys")
    err = access_denied(client, refused, "staging txid 3", topology="tw", keys=["a", "b", "c", "d", "e", "f"])
    assert isinstance(err, AccessDenied) and isinstance(err, ConfigError)
    text = str(err)
    for part in ("topology 'tw'", "'tw-user'", "'a'", "and 2 more", "txdag acl redis tw --user tw-user",
                 "127.0.0.1:1/0"):
        assert part in text
    assert "hunter2" not in text
    wrong = access_denied(client, redis.AuthenticationError("invalid username-password pair"), "connecting")
    assert "check the login and password" in str(wrong) and "hunter2" not in str(wrong)


def test_registered_secrets_are_masked_in_kazoo_records(caplog) -> None:
    register_secret("zk-p@ss word")
    with caplog.at_level(logging.DEBUG, logger="kazoo.client"):
        logging.getLogger("kazoo.client").debug("Sending request(xid=%s): %s", 1, "Auth(auth='u:zk-p@ss word')")
        logging.getLogger("kazoo.client").debug("url redis://u:zk-p%40ss%20word@h:1/0")
    assert [r.getMessage() for r in caplog.records] == ["Sending request(xid=1): Auth(auth='u:***')",
                                                        "url redis://u:***@h:1/0"]
    assert mask("nothing here") == "nothing here"

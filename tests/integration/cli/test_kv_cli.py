"""``txdag state dump|migrate`` against real servers: a provider and its JSON config on the command line (both
providers), a config file, and an Airflow Redis connection like the other commands."""

from __future__ import annotations

import json
import logging
from urllib.parse import urlsplit

import pytest
from access import PASSWORDS

from txdag.attempt import TransactionAttempt as Tx
from txdag.cli import exits
from txdag.cli.main import main
from txdag.state import KeyValueState
from txdag.state.kv import DELETE, KVNamespace, prepare, seal_stage, stage_writes

pytestmark = pytest.mark.usefixtures("airflow_home")


@pytest.fixture
def log_levels():
    """Reading an Airflow connection quiets the root and kazoo loggers for the CLI (commands.common.logs_to_stderr);
    put them back so later tests that read kazoo's DEBUG records still get them."""
    saved = {name: logging.getLogger(name).level for name in ("", "kazoo")}
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


def provider_args(p) -> list[str]:
    return ["--provider", p.name, "--config", json.dumps(p.config)]


def filled(client, name: str, serializers=("json", "json"), n: int = 5) -> KVNamespace:
    """Committed txid 2 with n values, txid 3 prepared (attempt 2), txid 4 staged (open)."""
    spec = KVNamespace(name, *serializers)
    s = KeyValueState(client, spec)
    for i in range(n):
        s.put(f"k{i}" if i else ("@bob", "#storm"), {"n": i} if i % 2 else i)
    s.prepare_commit(1)
    s.commit(1)
    s.put("k0", "zero")
    s.prepare_commit(2)
    s.commit(2)
    seal_stage(client, spec, Tx(3, 2), stage_writes(client, spec, Tx(3, 2), [("k1", 9), ("k2", DELETE)]))
    prepare(client, spec, Tx(3, 2))
    stage_writes(client, spec, Tx(4, 1), [("k3", 1)])
    return spec


def test_dump_shows_values_txids_and_staged_attempts(kv_provider, prefix, capsys):
    spec = filled(kv_provider.client, f"{prefix}:counter")
    assert main(["state", "dump", spec.namespace, *provider_args(kv_provider), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["committed_txid"], out["prepared"], out["total_keys"]) == (2, {"txid": 3, "attempt": 2, "keys": 2}, 6)
    assert out["staged"] == [{"txid": 3, "attempt": 2, "sealed": True, "keys": 2},
                             {"txid": 4, "attempt": 1, "sealed": False, "keys": 1}]
    assert (out["key_serializer"], out["value_serializer"], out["format_version"]) == ("json", "json", "1")
    values = {json.dumps(r["key"]): r["value"] for r in out["values"]}
    assert values == {'["@bob", "#storm"]': 0, '"k1"': {"n": 1}, '"k2"': 2, '"k3"': {"n": 3}, '"k4"': 4,
                      '"k0"': "zero"}

    assert main(["state", "dump", spec.namespace, *provider_args(kv_provider), "--limit", "2"]) == 0
    text = capsys.readouterr().out
    assert "committed txid   2" in text and "txid 3 attempt 2 (2 keys), not committed" in text
    assert "txid 3 attempt 2 (sealed, 2 keys); txid 4 attempt 1 (open, 1 keys)" in text
    assert "6 (showing 2)" in text and text.splitlines()[-3].split() == ["KEY", "VALUE"]
    assert all(p not in text for p in [*PASSWORDS, kv_provider.config["password"]])


def test_dump_of_a_namespace_that_is_not_there(kv_provider, prefix, capsys):
    assert main(["state", "dump", f"{prefix}:nothing", *provider_args(kv_provider)]) == 1
    assert f"no KeyValueState '{prefix}:nothing'" in capsys.readouterr().err


def test_migrate_on_the_command_line_resumes_and_reports(kv_provider, prefix, capsys, tmp_path):
    client = kv_provider.client
    spec = KVNamespace(f"{prefix}:legacy", "base64", "base64")
    s = KeyValueState(client, spec)
    for i in range(700):  # more than a listpack (512): HSCAN pages it
        s.put(f"w{i}", i)
    s.prepare_commit(1)
    s.commit(1)
    config = tmp_path / "provider.json"
    config.write_text(json.dumps(kv_provider.config))
    args = ["state", "migrate", spec.namespace, "--provider", kv_provider.name, "--config-file", str(config),
            "--chunk", "50"]
    assert main([*args, "--max-chunks", "2"]) == 1
    err = capsys.readouterr()
    assert "stopped after --max-chunks" in err.out and "run the same command again" in err.out
    assert err.err.splitlines()[0].startswith("[") and "/700] " in err.err.splitlines()[0]
    assert main([*args, "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert (out["outcome"], out["from"], out["to"], out["converted_in_all_runs"], out["remaining"]) == (
        "migrated", "base64,base64", "json,json", 700, 0)
    assert 0 < out["converted"] < 700 and captured.err.splitlines()[-1].startswith("[700/700]")
    assert dict(KeyValueState(client, spec.namespace).items()) == {f"w{i}": i for i in range(700)}
    assert main(args) == 0 and "nothing to do" in capsys.readouterr().out


def test_migrate_refuses_while_a_txid_is_prepared(kv_provider, prefix, capsys):
    spec = filled(kv_provider.client, f"{prefix}:busy", ("base64", "base64"))
    assert main(["state", "migrate", spec.namespace, *provider_args(kv_provider)]) == exits.REFUSED
    assert "txid 3 is prepared but not committed" in capsys.readouterr().err


def test_storm_config_and_bad_configs_on_the_command_line(redis_url, redis_client, prefix, capsys):
    parts = urlsplit(redis_url)
    filled(redis_client, f"{prefix}:storm")
    storm = {"keySerializerClass": "org.apache.storm.state.DefaultStateSerializer", "jedisPoolConfig": {
        "host": parts.hostname, "port": parts.port, "timeout": 2000, "database": 0, "username": parts.username,
        "password": parts.password}}
    assert main(["state", "dump", f"{prefix}:storm", "--provider",
                 "org.apache.storm.redis.state.RedisKeyValueStateProvider", "--config", json.dumps(storm)]) == 0
    assert "committed txid   2" in capsys.readouterr().out
    assert main(["state", "dump", "x:y", "--provider", "redis", "--config", '{"prot": 1}']) == exits.CONFIG
    assert "unknown config key(s) ['prot']" in capsys.readouterr().err
    assert main(["state", "dump", "x:y", "--config", "{}"]) == exits.USAGE
    assert "need --provider" in capsys.readouterr().err


def test_dump_through_an_airflow_connection(redis_url, redis_client, prefix, capsys, monkeypatch, log_levels):
    parts = urlsplit(redis_url)
    monkeypatch.setenv("AIRFLOW_CONN_KV_TEST", json.dumps(
        {"conn_type": "redis", "host": parts.hostname, "port": parts.port, "login": parts.username,
         "password": parts.password, "extra": {"db": 0}}))
    filled(redis_client, f"{prefix}:conn")
    assert main(["state", "dump", f"{prefix}:conn", "--redis-conn-id", "kv_test", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["committed_txid"] == 2

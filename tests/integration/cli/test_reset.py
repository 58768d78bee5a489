"""A state store that lost its data, seen by `txdag status` and `txdag doctor`, and the deliberate way out:
`txdag reset TOPOLOGY --confirm` deletes the topology's records and every key it wrote, keeps its source, and the
topology starts over exactly (issue 20)."""

from __future__ import annotations

import json

import pytest
import redis
from access import ZK_AUTH
from test_cli import env, ran, run  # noqa: F401  (fixtures and the runner of the CLI tests)

from txdag.analytics.tweets import tweet_partials
from txdag.local import LocalTopology
from txdag.protocol import Committed
from txdag.spouts import SpoutContext
from txdag.spouts.samples import sample_tweets
from txdag.state.marker import default_key
from txdag.topology.topology import load_definitions
from txdag.txid.coordinator import Coordinator
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore

pytestmark = pytest.mark.usefixtures("airflow_home")


def lose_redis_state(client, prefix):
    """What a Redis restarted without its data holds of the topology: its source only."""
    kept = {f"{prefix}:NEXT_WRITE".encode()} | {f"{prefix}:{n}".encode() for n in range(1, 201)}
    lost = [k for k in client.scan_iter(match=f"*{prefix}*") if k not in kept]
    assert any(b"committed" in k for k in lost)  # the commit marker was there
    client.delete(*lost)


def test_status_and_doctor_lead_with_the_halt_and_reset_starts_over_exactly(
    ran, env, capsys, prefix, zk_hosts, zk_root, tmp_path  # noqa: F811  (the fixtures imported above)
):
    lose_redis_state(env, prefix)

    code, out, _ = run(capsys, "status", prefix)
    assert code == 4 and out.startswith(f"HALTED: topology {prefix!r}: ZooKeeper records txid 3 committed")  # refused
    assert f"txdag reset {prefix} --confirm" in out
    code, out, _ = run(capsys, "doctor", "--check", "stores")
    assert code == 1 and f"stores of {prefix}" in out and "fail" in out and "txdag reset" in out

    code, out, _ = run(capsys, "reset", prefix)
    assert code == 1 and "nothing deleted: add --confirm" in out
    assert run(capsys, "status", prefix)[1].startswith("HALTED")  # nothing was deleted

    code, out, _ = run(capsys, "reset", prefix, "--confirm", "--json")
    assert code == 0
    done = json.loads(out)
    assert done["confirmed"] and done["committed_txid"] == 3
    assert run(capsys, "status", prefix)[0] == 1  # no records any more: status says it never ran
    assert env.get(f"{prefix}:NEXT_WRITE") == b"201"  # the source is kept

    definition = load_definitions(tmp_path / "dags")[0][prefix]
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root),
                              definition.source.build(SpoutContext(prefix, {"redis_default": env})),
                              max_active_transactions=2)
    states = {s.name: s.build(env) for s in definition.states}
    topology = LocalTopology(coordinator, env, states, lambda records: tweet_partials(r.value for r in records))
    outcomes = topology.drain("again")
    assert [o.tx.txid for o in outcomes] == [1, 2, 3, 4, 5] and {type(o) for o in outcomes} == {Committed}
    truth = tweet_partials(sample_tweets(200, seed=5))
    assert states["users"].multi_get(list(truth["users"])) == list(truth["users"].values())
    code, out, _ = run(capsys, "doctor", "--check", "stores")
    assert code == 0 and "committed txid 5" in out
    coordinator.store.client.stop()


def owned_keys(client, definition) -> set[bytes]:
    """What an admin's SCAN finds under the topology's key patterns (what reset must delete)."""
    from txdag.cli.acl import owned_patterns

    return {k for p in owned_patterns(definition) for k in client.scan_iter(match=p, count=1000)}


def test_the_advised_reset_runs_as_printed_with_the_topologys_own_redis_user(
    ran, env, capsys, monkeypatch, prefix, zk_hosts, zk_root, tmp_path  # noqa: F811  (the fixtures imported above)
):
    """Issue 37: the HALTED message and doctor advise `txdag reset TOPOLOGY --confirm`; with the connection the
    demo sets up (the user of `txdag acl redis`, which may not SCAN) it deletes the same keys an admin's SCAN
    finds, from the names of the layouts, and the topology starts over exactly."""
    from access import redis_user

    definition = load_definitions(tmp_path / "dags")[0][prefix]
    env.set(default_key(prefix), 1)  # the store went back behind ZooKeeper's txid 3: HALTED
    env.set(f"txdag:claim:{{{prefix}}}:4:1", "left by a dead try")  # a claim a crashed try left behind
    env.set(f"txdag:stage:{{{prefix}}}:2:1:users", "left by a crash at commit")
    with redis_user(env, f"{prefix}-user", [definition], "pw-reset") as user:
        kwargs = user.connection_pool.connection_kwargs
        monkeypatch.setenv("AIRFLOW_CONN_REDIS_DEFAULT", json.dumps(
            {"conn_type": "redis", "host": kwargs["host"], "port": kwargs["port"], "login": f"{prefix}-user",
             "password": "pw-reset", "extra": {"db": 11}}))
        with pytest.raises(redis.exceptions.NoPermissionError):
            user.scan(match="*")  # the user may not SCAN
        code, out, _ = run(capsys, "status", prefix)
        assert code == 4 and out.startswith("HALTED")
        advised = next(line for line in out.splitlines() if "txdag reset" in line)
        argv = advised[advised.index("txdag reset"):].split("`")[0].split()[1:]
        assert argv == ["reset", prefix, "--confirm"]
        before = owned_keys(env, definition)
        assert {f"{prefix}:users".encode(), default_key(prefix).encode(), f"txdag:claim:{{{prefix}}}:4".encode(),
                f"txdag:stage:{{{prefix}}}:2:1:users".encode()} <= before  # states, marker, fences, leftovers
        code, out, _ = run(capsys, "reset", prefix)
        assert code == 1 and f"{len(before)} Redis key(s)" in out  # what a dry run counts is what is there
        code, out, err = run(capsys, *argv)  # the way out, as printed
        assert code == 0, out + err
        assert out.startswith(f"reset topology {prefix}: its records at") and f"{len(before)} Redis key(s)" in out
    assert owned_keys(env, definition) == set()  # nothing left that an admin's SCAN would have deleted
    assert env.get(f"{prefix}:NEXT_WRITE") == b"201"  # the source is kept
    assert run(capsys, "status", prefix)[0] == 1  # no records any more: it never ran

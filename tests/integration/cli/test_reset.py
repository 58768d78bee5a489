"""A state store that lost its data, seen by `txdag status` and `txdag doctor`, and the deliberate way out:
`txdag reset TOPOLOGY --confirm` deletes the topology's records and every key it wrote, keeps its source, and the
topology starts over exactly (issue 20)."""

from __future__ import annotations

import json

import pytest
from access import ZK_AUTH
from test_cli import env, ran, run  # noqa: F401  (fixtures and the runner of the CLI tests)

from txdag.analytics.tweets import tweet_partials
from txdag.protocol.local import LocalTopology
from txdag.spouts import SpoutContext
from txdag.spouts.samples import sample_tweets
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
    assert [o.tx.txid for o in outcomes] == [1, 2, 3, 4, 5] and {o.status for o in outcomes} == {"committed"}
    truth = tweet_partials(sample_tweets(200, seed=5))
    assert states["users"].multi_get(list(truth["users"])) == list(truth["users"].values())
    code, out, _ = run(capsys, "doctor", "--check", "stores")
    assert code == 0 and "committed txid 5" in out
    coordinator.store.client.stop()

"""KeyValueState (seed 002) against real servers: one contract suite over every provider we ship (a Redis server
and a real 3-master Redis Cluster), then what is particular to each (a server down, a wrong password)."""

from __future__ import annotations

import pickle

import pytest

from txdag.attempt import TransactionAttempt as Tx
from txdag.errors import BatchReadError, ConfigError, StaleAttemptError, TxidOrderError
from txdag.state import KeyValueState
from txdag.state.kv import (
    DELETE,
    KVNamespace,
    KVStateError,
    commit,
    load_state,
    make_client,
    parse_provider_config,
    prepare,
    recover,
    rollback,
    seal_stage,
    stage_writes,
    status,
)


def open_state(p, ns: str, **kw) -> KeyValueState:
    return load_state(p.name, {**p.config, **kw}, ns)


def stage(client, spec: KVNamespace, tx: Tx, writes: dict) -> None:
    seal_stage(client, spec, tx, stage_writes(client, spec, tx, writes.items()))


def committed(p, ns: str) -> dict:
    return dict(open_state(p, ns).items())


def test_contract_put_get_delete_iterate(kv_provider, prefix):
    s = open_state(kv_provider, f"{prefix}:counts")
    assert s.get("a") is None and s.get("a", 0) == 0 and "a" not in s
    s.put("a", 1)
    s.put(("@bob", "#storm"), {"n": [1, 2]})
    s.put("gone", "x")
    s.delete("gone")
    assert s.get("a") == 1 and s.get(("@bob", "#storm")) == {"n": [1, 2]} and s.get("gone", "d") == "d"
    assert dict(s.items()) == {"a": 1, ("@bob", "#storm"): {"n": [1, 2]}}
    assert committed(kv_provider, f"{prefix}:counts") == {}  # nothing visible before the commit
    s.prepare_commit(1)
    assert s.get("a") == 1  # its own prepared writes, until committed
    s.commit(1)
    s.put("b", 2)
    s.delete("a")
    assert sorted(s, key=str) == [("@bob", "#storm"), "b"]
    s.prepare_commit(2)
    s.commit(2)
    assert committed(kv_provider, f"{prefix}:counts") == {("@bob", "#storm"): {"n": [1, 2]}, "b": 2}
    assert open_state(kv_provider, f"{prefix}:counts").committed_txid == 2


def test_contract_reads_never_see_another_txids_uncommitted_writes(kv_provider, prefix):
    client, spec = kv_provider.client, KVNamespace(f"{prefix}:w")
    s = KeyValueState(client, spec)
    s.put("k", "committed")
    s.prepare_commit(1)
    s.commit(1)
    stage(client, spec, Tx(2, 1), {"k": "staged 2", "new": 1})
    prepare(client, spec, Tx(2, 1))  # txid 2 prepared, not committed
    stage(client, spec, Tx(3, 1), {"k": DELETE})  # txid 3 staged
    reader = KeyValueState(client, spec)
    assert reader.get("k") == "committed" and reader.get("new") is None
    assert dict(reader.items()) == {"k": "committed"}
    reader.put("k", "mine")
    assert reader.get("k") == "mine"  # its own pending write first


def test_contract_two_attempts_staged_only_the_second_prepared(kv_provider, prefix):
    client, spec = kv_provider.client, KVNamespace(f"{prefix}:att")
    stage(client, spec, Tx(1, 1), {"a": 1, "b": 1})
    stage(client, spec, Tx(1, 2), {"a": 2, "c": 2})
    assert [(a.tx, a.sealed, a.keys) for a in status(client, spec).staged] == [(Tx(1, 1), 2, 2), (Tx(1, 2), 2, 2)]
    assert prepare(client, spec, Tx(1, 2)).outcome == "prepared"
    with pytest.raises(StaleAttemptError, match="attempt 2 of txid 1 is already prepared; attempt 1 is stale"):
        prepare(client, spec, Tx(1, 1))
    assert commit(client, spec, 1).keys == 2
    assert committed(kv_provider, spec.namespace) == {"a": 2, "c": 2}
    assert status(client, spec).staged == []  # the staging of every attempt of txid 1 is gone with the commit


def test_contract_prepare_commit_and_reruns_change_nothing(kv_provider, prefix):
    client, spec = kv_provider.client, KVNamespace(f"{prefix}:idem")
    stage(client, spec, Tx(1, 1), {"a": 1, "b": 2})
    assert prepare(client, spec, Tx(1, 1)).outcome == "prepared"
    assert prepare(client, spec, Tx(1, 1)).outcome == "already prepared"
    first = commit(client, spec, 1)
    assert (first.outcome, first.keys) == ("committed", 2)
    stage(client, spec, Tx(2, 1), {"a": 10, "b": DELETE})
    prepare(client, spec, Tx(2, 1))
    assert (commit(client, spec, 2).keys, commit(client, spec, 2).outcome) == (1, "already committed")
    assert commit(client, spec, 1).outcome == "already committed"
    assert prepare(client, spec, Tx(2, 1)).outcome == "already committed"  # a late re-run of the prepare
    st = status(client, spec)
    assert (st.committed_txid, st.prepared_txid, st.committed_keys) == (2, None, 1)
    assert committed(kv_provider, spec.namespace) == {"a": 10}
    stage(client, spec, Tx(1, 3), {"a": 0})
    with pytest.raises(TxidOrderError, match="txid 1 is behind the stored txid 2"):
        prepare(client, spec, Tx(1, 3))


def test_contract_rollback_discards_the_prepared_txid(kv_provider, prefix):
    client, spec = kv_provider.client, KVNamespace(f"{prefix}:rb")
    s = KeyValueState(client, spec)
    s.put("a", 1)
    s.prepare_commit(1)
    s.commit(1)
    s.put("a", 2)
    s.prepare_commit(2)
    assert s.rollback().outcome == "rolled back"
    assert s.get("a") == 1 and status(client, spec).prepared_txid is None
    with pytest.raises(KVStateError, match="txid 2 cannot commit, it is not prepared"):
        s.commit(2)
    assert rollback(client, spec).outcome == "nothing prepared"
    stage(client, spec, Tx(2, 2), {"a": 3})
    prepare(client, spec, Tx(2, 2))
    assert rollback(client, spec, 5).outcome == "other txid prepared"  # names another txid: left alone
    commit(client, spec, 2)
    assert committed(kv_provider, spec.namespace) == {"a": 3}


def test_contract_refusals_name_what_to_do(kv_provider, prefix):
    client, spec = kv_provider.client, KVNamespace(f"{prefix}:bad")
    with pytest.raises(BatchReadError, match="nothing staged for txid 1 attempt 1"):
        prepare(client, spec, Tx(1, 1))
    stage_writes(client, spec, Tx(1, 1), [("a", 1)])
    with pytest.raises(BatchReadError, match="not sealed"):
        prepare(client, spec, Tx(1, 1))
    seal_stage(client, spec, Tx(1, 1), 2)
    with pytest.raises(BatchReadError, match="holds 1 keys, sealed with 2"):
        prepare(client, spec, Tx(1, 1))
    seal_stage(client, spec, Tx(1, 1), 1)
    prepare(client, spec, Tx(1, 1))
    stage(client, spec, Tx(2, 1), {"b": 1})
    with pytest.raises(KVStateError, match="txid 1 is prepared but not committed, so txid 2 cannot be prepared"):
        prepare(client, spec, Tx(2, 1))
    with pytest.raises(ConfigError, match=r"written with serializers json,json .* not json,utf8.*txdag state migrate"):
        open_state(kv_provider, spec.namespace, value_serializer="utf8")


def test_contract_crash_between_prepare_and_commit_then_recovery_commits(kv_provider, prefix):
    client = kv_provider.client
    specs = [KVNamespace(f"{prefix}:a"), KVNamespace(f"{prefix}:b")]
    for spec in specs:
        stage(client, spec, Tx(1, 1), {"x": spec.namespace})
        prepare(client, spec, Tx(1, 1))
    commit(client, specs[0], 1)  # the commit task dies after its first commit
    plan = recover(client, specs)
    assert (plan.action, plan.txid, plan.namespaces) == ("commit", 1, (specs[1].namespace,))
    assert [committed(kv_provider, s.namespace) for s in specs] == [{"x": s.namespace} for s in specs]
    assert recover(client, specs).action == "nothing"


def test_contract_crash_during_prepare_then_recovery_rolls_back(kv_provider, prefix):
    client = kv_provider.client
    specs = [KVNamespace(f"{prefix}:a"), KVNamespace(f"{prefix}:b")]
    for spec in specs:
        stage(client, spec, Tx(1, 1), {"x": 1})
    prepare(client, specs[0], Tx(1, 1))  # the commit task dies before preparing the second namespace
    plan = recover(client, specs)
    assert (plan.action, plan.txid, plan.namespaces) == ("rollback", 1, (specs[0].namespace,))
    assert [status(client, s).prepared_txid for s in specs] == [None, None]
    assert [committed(kv_provider, s.namespace) for s in specs] == [{}, {}]
    for spec in specs:  # the staging is kept: the commit task's rerun prepares and commits it
        prepare(client, spec, Tx(1, 1))
        commit(client, spec, 1)
    assert [committed(kv_provider, s.namespace) for s in specs] == [{"x": 1}, {"x": 1}]


class Recorder:
    def __init__(self, fail: str | None = None) -> None:
        self.calls: list[tuple] = []
        self.fail = fail

    def _hook(self, name: str, *args: int) -> None:
        self.calls.append((name, *args))
        if name == self.fail:
            raise RuntimeError(f"hook {name} failed")

    def pre_prepare(self, txid: int) -> None:
        self._hook("pre_prepare", txid)

    def pre_commit(self, txid: int) -> None:
        self._hook("pre_commit", txid)

    def pre_rollback(self) -> None:
        self._hook("pre_rollback")


def test_contract_hooks_run_first_in_order(kv_provider, prefix):
    hooks = Recorder()
    s = KeyValueState(kv_provider.client, f"{prefix}:h", hooks=hooks)
    s.put("a", 1)
    s.prepare_commit(1)
    s.commit(1)
    s.put("a", 2)
    s.prepare_commit(2)
    s.rollback()
    assert hooks.calls == [("pre_prepare", 1), ("pre_commit", 1), ("pre_prepare", 2), ("pre_rollback",)]


@pytest.mark.parametrize("failing", ["pre_prepare", "pre_commit", "pre_rollback"])
def test_contract_a_failing_hook_aborts_its_step_untouched(kv_provider, prefix, failing):
    client, spec = kv_provider.client, KVNamespace(f"{prefix}:hf")
    s = KeyValueState(client, spec, hooks=Recorder(fail=failing))
    s.put("a", 1)
    before = status(client, spec)
    try:
        s.prepare_commit(1)
        s.commit(1)
        s.rollback()
    except RuntimeError as exc:
        assert str(exc) == f"hook {failing} failed"
    after = status(client, spec)
    expected = {"pre_prepare": (0, None, []), "pre_commit": (0, 1, [Tx(1, 1)]), "pre_rollback": (1, None, [])}
    assert (after.committed_txid, after.prepared_txid, [a.tx for a in after.staged]) == expected[failing]
    assert before.committed_txid == 0
    s.hooks = None  # the step runs once the hook lets it
    if failing == "pre_prepare":
        assert s.get("a") == 1 and s.prepare_commit(1).outcome == "prepared"
    if failing in ("pre_prepare", "pre_commit"):
        assert s.commit(1).outcome == "committed"
    assert committed(kv_provider, spec.namespace) == {"a": 1}


def test_contract_spark_partitions_stage_with_their_own_clients(kv_provider, prefix, monkeypatch):
    """What a Spark job does: the picklable namespace and config go to executors, each partition stages its
    keys with a client of its own, the driver seals with the sum; then the commit task prepares and commits."""
    monkeypatch.setattr("txdag.state.kv.protocol.HSET_FIELDS", 100)  # several round trips of several HSETs each
    monkeypatch.setattr("txdag.state.kv.protocol.PIPELINE_DEPTH", 3)
    spec = pickle.loads(pickle.dumps(KVNamespace(f"{prefix}:spark", value_serializer="json")))
    config = pickle.loads(pickle.dumps(parse_provider_config(kv_provider.name, kv_provider.config)))
    tx = Tx(1, 1)
    partitions = [[(f"w{i}", i) for i in range(p, 2600, 3)] for p in range(3)]  # > one HSET and one HSCAN page
    counts = []
    for rows in partitions:
        executor_client = make_client(config)
        counts.append(stage_writes(executor_client, spec, tx, rows))
        executor_client.close()
    seal_stage(kv_provider.client, spec, tx, sum(counts))
    assert prepare(kv_provider.client, spec, tx).keys == 2600
    assert commit(kv_provider.client, spec, 1).keys == 2600
    values = committed(kv_provider, spec.namespace)
    assert len(values) == 2600 and values["w2599"] == 2599


def test_contract_processing_reads_as_of_the_txid_before_even_after_its_own_commit(kv_provider, prefix):
    from txdag.state.kv import read_as_of

    client, spec = kv_provider.client, KVNamespace(f"{prefix}:asof")
    stage(client, spec, Tx(1, 1), {"a": 1, "b": 2})
    prepare(client, spec, Tx(1, 1))
    commit(client, spec, 1)
    assert read_as_of(client, spec, ["a", "b", "c"], 2) == {"a": 1, "b": 2}
    stage(client, spec, Tx(2, 1), {"a": 5, "b": DELETE, "c": 7})
    prepare(client, spec, Tx(2, 1))
    commit(client, spec, 2)
    # txid 2's state is committed, and txid 2 is processed again (its commit failed after the state's): it still
    # reads the state as of txid 1, from what txid 2 overwrote
    assert read_as_of(client, spec, ["a", "b", "c"], 2) == {"a": 1, "b": 2}
    assert read_as_of(client, spec, ["a", "b", "c"], 3) == {"a": 5, "c": 7}
    with pytest.raises(KVStateError, match="txid 5 is processed before txid 4 was committed"):
        read_as_of(client, spec, ["a"], 5)
    with pytest.raises(KVStateError, match="holds txid 2 already, so txid 1 cannot be read as of txid 0"):
        read_as_of(client, spec, ["a"], 1)
    stage(client, spec, Tx(3, 1), {"a": 6})  # the next commit replaces the undo record
    prepare(client, spec, Tx(3, 1))
    commit(client, spec, 3)
    assert read_as_of(client, spec, ["a", "b", "c"], 3) == {"a": 5, "c": 7}
    assert read_as_of(client, spec, [], 4) == {}

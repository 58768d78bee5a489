"""The kept bad-input corpus (tests/data/bad_input/, described in its README) through the real code paths.

Coordinator + spout + staging + commit (LocalTopology) over real Redis and ZooKeeper. Each case ends either as a
listed rejection (txdag.commit.rejections) while every valid neighbour is committed, or as an error naming topology,
txid and key/znode; then the case is fixed and the topology commits its next txid.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from txdag import TransactionAttempt
from txdag.analytics.tweets import STATES, tweet_partials
from txdag.commit.rejections import list_rejections
from txdag.errors import BatchReadError, ConfigError, FormatVersionError
from txdag.local import LocalTopology
from txdag.protocol import Committed
from txdag.spouts import (
    OpaquePartitionedStreamSpout,
    PartitionedTransactionalStreamSpout,
    StreamPartition,
    TweetsTransactionalSpout,
    append_entries,
    append_tweets,
)
from txdag.state import JoinedKeyCodec, KeyClashError, RedisBackingMap, TransactionalMap
from txdag.state.keys import DEFAULT_KEY_CODEC
from txdag.txid.coordinator import Coordinator, Emission, Wait
from txdag.zk.records import TxStatus
from txdag.zk.store import TransactionStore

CORPUS = Path(__file__).parents[2] / "data" / "bad_input"
TWEETS = [json.loads(line) for line in (CORPUS / "tweets.jsonl").read_text().splitlines() if line.strip()]
REDIS_KEYS = json.loads((CORPUS / "redis_keys.json").read_text())
STREAMS = json.loads((CORPUS / "streams.json").read_text())
ZNODES = json.loads((CORPUS / "znodes.json").read_text())
ERRORS = {e.__name__: e for e in (BatchReadError, ConfigError, FormatVersionError)}
CODECS = {"users_hashtags": JoinedKeyCodec(":", 2)}
BATCH = 4  # tweets per txid: the corpus spans several txids


def tweet_value(case: dict) -> str | bytes:
    """The bytes or text a case writes at its key (wrong-type cases write a placeholder, replaced afterwards)."""
    if "file" in case:
        return (CORPUS / case["file"]).read_bytes()
    if "recipe" in case:  # the 1 MB tweet is generated, not stored
        unit, size, tail = case["recipe"]["unit"], case["recipe"]["bytes"], case["recipe"]["tail"]
        return (unit * (size // len(unit) + 1))[: size - len(tail)] + tail
    return case.get("text", "placeholder")


def put_wrong_type(client, key: str, kind: str) -> None:
    """Replace ``key`` by a value of Redis type ``kind`` (what a stray HSET/RPUSH/SADD/XADD leaves behind)."""
    client.delete(key)
    writers = {
        "hash": lambda: client.hset(key, "text", "@h #h"),
        "list": lambda: client.rpush(key, "@l #l"),
        "set": lambda: client.sadd(key, "@s #s"),
        "stream": lambda: client.xadd(key, {"value": "@x #x"}),
    }
    writers[kind]()


def topology_over(spout, redis_client, zk_client, zk_root, prefix) -> LocalTopology:
    """Seed 000's tweets analytics over ``spout``: users, hashtags and user:hashtag pairs in TransactionalMaps."""
    coordinator = Coordinator(TransactionStore(zk_client, prefix, root=zk_root), spout, max_active_transactions=2)
    codec = lambda name: CODECS.get(name, DEFAULT_KEY_CODEC)  # noqa: E731
    states = {n: TransactionalMap(RedisBackingMap(redis_client, f"{prefix}:{n}", key_codec=codec(n))) for n in STATES}
    process = lambda records: tweet_partials(r.value for r in records)  # noqa: E731
    return LocalTopology(coordinator, redis_client, states, process, marker_key=f"{prefix}:LAST")


def tweets_topology(redis_client, zk_client, zk_root, prefix) -> LocalTopology:
    spout = TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=BATCH, topology=prefix)
    return topology_over(spout, redis_client, zk_client, zk_root, prefix)


def committed(redis_client, prefix) -> dict[str, dict[str, int]]:
    """The committed hashes, field by field."""
    return {n: {k.decode(): int(v) for k, v in redis_client.hgetall(f"{prefix}:{n}").items()} for n in STATES}


def truth(texts) -> dict[str, dict[str, int]]:
    """tweet_partials over the valid records, encoded to fields the way the states store them (a key whose field
    holds the separator is a rejection, never stored)."""
    out: dict[str, dict[str, int]] = {name: {} for name in STATES}
    for name, counter in tweet_partials(texts).items():
        for key, count in counter.items():
            try:
                field = CODECS.get(name, DEFAULT_KEY_CODEC).encode(key)
            except KeyClashError:
                continue
            out[name][field] = out[name].get(field, 0) + count
    return out


def check_message(exc: BaseException, *fragments: str) -> str:
    message = str(exc)
    missing = [f for f in fragments if f not in message]
    assert not missing, f"{missing} not in: {message}"
    return message


def test_every_tweet_case_is_a_record_or_a_listed_rejection(redis_client, zk_client, zk_root, prefix) -> None:
    """Each case sits between valid neighbours; bad ones are listed once, every valid tweet is committed."""
    written, valid = [], []
    for i, case in enumerate(TWEETS):
        written += [f"@n{i} #ok{i}", tweet_value(case)]
        valid += [f"@n{i} #ok{i}"] + ([tweet_value(case)] if case["expect"] == "record" else [])
    ids = append_tweets(redis_client, [*written, "@last #ok"], prefix=f"{prefix}:")
    valid.append("@last #ok")
    case_ids = {case["case"]: ids[2 * i + 1] for i, case in enumerate(TWEETS)}
    for case in TWEETS:
        if "redis_type" in case:
            put_wrong_type(redis_client, f"{prefix}:{case_ids[case['case']]}", case["redis_type"])

    topology = tweets_topology(redis_client, zk_client, zk_root, prefix)
    topology.drain()

    rejected = list_rejections(redis_client, prefix)
    colon_txid = (case_ids["colon_in_user"] - 1) // BATCH + 1  # "@a:b #c": a record; its pair would be "@a:b:#c"
    assert rejected.pop(f'key:users_hashtags:{colon_txid}:["@a:b","#c"]')["txid"] == colon_txid
    expected = {str(case_ids[c["case"]]): c for c in TWEETS if c["expect"] == "rejection"}
    assert sorted(rejected, key=int) == sorted(expected, key=int), "exactly the bad tweets are listed, once each"
    for tweet_id, case in expected.items():
        entry = rejected[tweet_id]
        assert case["reason"] in entry["reason"] and f"'{prefix}:{tweet_id}'" in entry["reason"], entry
        assert entry["txid"] == (int(tweet_id) - 1) // BATCH + 1 and entry["attempt"] == 1
    assert committed(redis_client, prefix) == truth(valid)
    assert committed(redis_client, prefix)["hashtags"]["#huge"] == 1, "the 1 MB tweet counted"

    txids = -(-len(ids) // BATCH)
    append_tweets(redis_client, ["@after #ok"], prefix=f"{prefix}:")
    assert [type(o) for o in topology.drain(run_prefix="after")] == [Committed]
    assert topology.coordinator.status().topology.committed_txid == txids + 1
    assert committed(redis_client, prefix) == truth([*valid, "@after #ok"])


@pytest.mark.parametrize("case", REDIS_KEYS, ids=lambda c: c["case"])
def test_a_broken_key_is_an_error_naming_it_then_the_fix_resumes(
    redis_client, zk_client, zk_root, prefix, case
) -> None:
    texts = [f"@u{i} #t{i % 3}" for i in range(6)]
    append_tweets(redis_client, texts, prefix=f"{prefix}:")
    topology = tweets_topology(redis_client, zk_client, zk_root, prefix)
    key = f"{prefix}:{case['key']}"
    saved = redis_client.get(key)
    in_batch = case["key"].isdigit()  # a tweet key goes missing after its batch was planned
    emission = topology.coordinate("run1") if in_batch else None
    redis_client.delete(key)
    if case["action"] == "set":
        redis_client.set(key, case["value"])
    elif case["action"] != "delete":
        put_wrong_type(redis_client, key, case["action"])

    with pytest.raises(ERRORS[case["error"][0]]) as info:
        topology.process(emission) if emission else topology.coordinate("run1")
    message = check_message(info.value, f"topology {prefix!r}", repr(key), *case["error"][1:])
    status = topology.coordinator.status()
    if emission:
        assert "txid 1 attempt 1" in message
        assert status.txids[0].status is TxStatus.FAILED and repr(key) in status.txids[0].error
        wait = topology.coordinate("someone-else")
        assert isinstance(wait, Wait) and "txid 1 is failed" in wait.reason, "nothing new on top of it"
    else:
        assert status.topology.last_txid == 0, "no txid was consumed"

    redis_client.delete(key)  # the operator's fix
    if saved is not None:
        redis_client.set(key, saved)
    if emission:
        replay = topology.coordinate("run1")
        assert replay.tx == TransactionAttempt(1, 2) and replay.metadata == emission.metadata
        topology.process(replay)
        assert isinstance(topology.commit(replay.tx), Committed)
    assert all(isinstance(o, Committed) for o in topology.drain(run_prefix="after"))
    assert topology.coordinator.status().topology.committed_txid == 2
    assert committed(redis_client, prefix) == truth(texts)
    assert list_rejections(redis_client, prefix) == {}


def entry_fields(case: dict) -> dict:
    """``fields_bytes`` hold raw bytes spelt as latin-1 code points (\\u00ff is the byte 0xff)."""
    if "fields_bytes" in case:
        return {k.encode("latin-1"): v.encode("latin-1") for k, v in case["fields_bytes"].items()}
    return case["fields"]


def test_every_stream_entry_case_is_a_record_or_a_listed_rejection(redis_client, zk_client, zk_root, prefix) -> None:
    part = StreamPartition("a", redis_client, f"{prefix}:a")
    valid, expected = [], {}
    for i, case in enumerate(STREAMS["entries"]):
        append_entries(part, [f"@n{i} #ok"])
        entry_id = redis_client.xadd(part.stream, entry_fields(case)).decode()
        valid += [f"@n{i} #ok"] + ([case["fields"]["value"]] if case["expect"] == "record" else [])
        if case["expect"] == "rejection":
            expected[f"a:{entry_id}"] = case
    spout = PartitionedTransactionalStreamSpout([part], max_per_partition=3, topology=prefix)
    topology = topology_over(spout, redis_client, zk_client, zk_root, prefix)
    topology.drain()

    rejected = list_rejections(redis_client, prefix)
    assert sorted(rejected) == sorted(expected), "exactly the bad entries are listed, once each"
    for record_id, case in expected.items():
        assert case["reason"] in rejected[record_id]["reason"] and rejected[record_id]["partition"] == "a"
    assert committed(redis_client, prefix) == truth(valid)

    txids = topology.coordinator.status().topology.committed_txid
    append_entries(part, ["@after #ok"])
    assert [type(o) for o in topology.drain(run_prefix="after")] == [Committed]
    assert topology.coordinator.status().topology.committed_txid == txids + 1
    assert committed(redis_client, prefix) == truth([*valid, "@after #ok"])


def test_a_key_that_is_not_a_stream_is_an_error_and_consumes_no_txid(redis_client, zk_client, zk_root, prefix) -> None:
    [case] = [c for c in STREAMS["errors"] if c["case"] == "key_not_a_stream"]
    part = StreamPartition("a", redis_client, f"{prefix}:a")
    redis_client.set(part.stream, "oops")
    spout = OpaquePartitionedStreamSpout([part], topology=prefix)
    topology = topology_over(spout, redis_client, zk_client, zk_root, prefix)
    with pytest.raises(ERRORS[case["error"][0]]) as info:
        topology.coordinate("run1")
    check_message(info.value, f"topology {prefix!r}", repr(part.stream), *case["error"][1:])
    assert topology.coordinator.status().topology.last_txid == 0

    redis_client.delete(part.stream)  # the fix
    append_entries(part, ["@a #x", "@b #y"])
    assert [type(o) for o in topology.drain()] == [Committed]
    assert committed(redis_client, prefix) == truth(["@a #x", "@b #y"])


def test_an_entry_deleted_inside_a_batch_fails_the_txid_naming_it_then_the_replay_commits(
    redis_client, zk_client, zk_root, prefix
) -> None:
    [case] = [c for c in STREAMS["errors"] if c["case"] == "entry_deleted_in_batch_range"]
    part = StreamPartition("a", redis_client, f"{prefix}:a")
    texts = [f"@u{i} #t" for i in range(5)]
    ids = append_entries(part, texts)
    spout = OpaquePartitionedStreamSpout([part], max_per_partition=3, topology=prefix)
    topology = topology_over(spout, redis_client, zk_client, zk_root, prefix)
    first = topology.coordinate("run1")
    redis_client.xdel(part.stream, ids[1])

    with pytest.raises(ERRORS[case["error"][0]]) as info:
        topology.process(first)
    check_message(info.value, f"topology {prefix!r}", repr(part.stream), *case["error"][1:])
    transactional = PartitionedTransactionalStreamSpout([part], topology=prefix)
    with pytest.raises(BatchReadError, match=f"restore the entries, then `txdag replay {prefix} --from 1`; or start "
                       f"over with `txdag reset {prefix} --confirm`"):
        transactional.emit_batch(first.tx, first.metadata)  # a transactional spout cannot replay around it

    replay = topology.coordinate("run1")  # the opaque replay recomputes the batch from what the stream holds
    assert replay.tx == TransactionAttempt(1, 2) and replay.metadata["partitions"]["a"]["count"] == 3
    topology.process(replay)
    assert isinstance(topology.commit(replay.tx), Committed)
    assert [type(o) for o in topology.drain(run_prefix="after")] == [Committed]
    assert committed(redis_client, prefix) == truth(texts[:1] + texts[2:])
    assert list_rejections(redis_client, prefix) == {}


@pytest.mark.parametrize("case", ZNODES, ids=lambda c: c["file"])
def test_a_malformed_znode_is_an_error_naming_it_then_the_restore_resumes(
    redis_client, zk_client, zk_root, prefix, case
) -> None:
    texts = [f"@u{i} #t{i % 2}" for i in range(2 * BATCH)]
    append_tweets(redis_client, texts, prefix=f"{prefix}:")
    topology = tweets_topology(redis_client, zk_client, zk_root, prefix)
    first = topology.coordinate("run1")
    topology.process(first)
    topology.commit(first.tx)
    second = topology.coordinate("run2")
    store = topology.coordinator.store
    path = {"topology": store.path, "txid": store.txid_path(2), "run": store.run_path("run2")}[case["node"]]
    good = zk_client.get(path)[0]
    zk_client.set(path, (CORPUS / "znodes" / case["file"]).read_bytes())

    with pytest.raises(ERRORS[case["error"][0]] if case["error"][0] in ERRORS else FormatVersionError) as info:
        if case.get("fails_at") == "process":
            topology.process(topology.coordinate("run2"))  # the transactional replay reuses the stored batch
        else:
            topology.coordinate("run2")
    fragments = [f for f in case["error"] if f not in ERRORS]
    if case.get("fails_at") == "process":
        check_message(info.value, f"topology {prefix!r}", *fragments)
        record = store.read_txid(2)[0]
        assert record.status is TxStatus.FAILED and "got 0" in record.error, "the failure is on the txid's record"
        zk_client.set(path, replace(record, metadata=second.metadata).to_bytes())  # the operator's correction
    else:
        check_message(info.value, f"znode {path} ", *fragments)  # the path holds the topology and txid/run
        zk_client.set(path, good)  # the operator's restore

    replay = topology.coordinate("run2")
    assert isinstance(replay, Emission) and replay.metadata == second.metadata
    topology.process(replay)
    assert isinstance(topology.commit(replay.tx), Committed)
    append_tweets(redis_client, ["@after #ok"], prefix=f"{prefix}:")
    assert [type(o) for o in topology.drain(run_prefix="after")] == [Committed]
    assert topology.coordinator.status().topology.committed_txid == 3
    assert committed(redis_client, prefix) == truth([*texts, "@after #ok"])

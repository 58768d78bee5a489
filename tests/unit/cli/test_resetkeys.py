"""txdag.cli.resetkeys: the keys ``txdag reset`` names without SCAN cover every key the layouts write."""

from __future__ import annotations

import json
from dataclasses import dataclass

import redis
from support.keys import SAMPLE_TX, SAMPLE_WINDOW, every_kind_of_key, written_keys

from txdag.cli import resetkeys
from txdag.state import StateFactory
from txdag.state.kv import KVNamespace, kv_namespace
from txdag.windows import store as window_store


class Indexes:
    """The reads reset makes, over the indexes a topology that ran txids 1..12 holds (no server)."""

    def __init__(self, topology) -> None:
        t = topology.topology_id
        self.hashes = {window_store.window_key(t, s.name): {"txid": "12", "progress": json.dumps({"fired": 7})}
                       for s in topology.states}
        stages = KVNamespace(kv_namespace(t, "counter")).stages
        self.hashes[stages] = {"12:3": "open"}
        self.strings = {topology.commit_marker: "11"}

    def get(self, key):
        return self.strings.get(key)

    def hget(self, key, field):
        return self.hashes.get(key, {}).get(field)

    def type(self, key):
        return b"hash" if key in self.hashes else b"none"

    def hkeys(self, key):
        return [f.encode() for f in self.hashes.get(key, {})]

    def exists(self, *keys):
        return sum(k in self.hashes or k in self.strings for k in keys)

    def scan_iter(self, **_):
        raise redis.exceptions.NoPermissionError("this user has no permissions to run the 'scan' command")


def test_the_named_keys_hold_every_key_the_layouts_write() -> None:
    topology = every_kind_of_key("tw")
    client = Indexes(topology)
    named = set(resetkeys.named_keys(client, topology, zk_last=10, attempts={10: 1, 12: SAMPLE_TX.attempt}))
    assert SAMPLE_TX.txid == 12 and SAMPLE_WINDOW <= 7  # the sample ids are inside what the indexes say
    assert [k for k in written_keys(topology) if k not in named] == []


def test_the_last_txid_is_the_highest_any_record_says() -> None:
    topology = every_kind_of_key("tw")
    client = Indexes(topology)
    assert resetkeys.last_txid(client, topology, zk_last=3) == 12  # a window's
    assert resetkeys.last_txid(client, topology, zk_last=40) == 40


def test_a_connection_that_may_not_scan_sweeps_nothing() -> None:
    assert resetkeys.scanned_keys(Indexes(every_kind_of_key("tw")), ["tw:*"]) == set()


@dataclass
class Mine(StateFactory):
    """A store of the user's, which txdag cannot empty (a plain dataclass: not hashable)."""

    path: str = "/data/counts.db"

    def backing_map(self, topology, state, key_fields):  # never called here
        raise AssertionError


def test_reset_names_the_tables_it_drops_and_the_stores_it_cannot_empty():
    from txdag.cli.ops import reset_summary, store_states
    from txdag.topology.definition import State

    mine = Mine()
    definition = type("Definition", (), {"states": [State("a"), State("b", store=mine), State("c", store=mine)]})
    assert store_states(definition) == [(mine, ["b", "c"])]
    plan = {"topology": "t", "zookeeper": "/txdag/t", "committed_txid": 4, "redis_keys": 9,
            "tables": ["s.t__x", "s.t__y"], "store_txids": {"PostgresStore('pg', schema='s')": 4},
            "stores_kept": ["b in Mine(path='/data/counts.db')"], "tables_of_others": ["s.t__z"], "confirmed": False}
    assert reset_summary(plan) == (
        "would reset topology t: its records at /txdag/t (committed up to txid 4), 2 table(s) of its states (s.t__x, "
        "s.t__y), its row of txdag_commits at txid 4 in PostgresStore('pg', schema='s') and 9 Redis key(s) it wrote; "
        "its source is kept; kept, as txdag cannot empty a store of yours: b in Mine(path='/data/counts.db') (empty "
        "them before the next run, docs/stores.md); left alone, as another topology's or state's (their names meet "
        "in one table name): s.t__z; nothing deleted: add --confirm to do it")

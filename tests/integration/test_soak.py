"""The short soak (bench/soak.py) in CI: both topologies under random faults, audited against the sources.

The full soak is the same script with --txids 500 (see its docstring); this runs a few dozen txids with a
high fault rate so that most fault kinds occur, and checks that its audit does catch a wrong count.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import redis

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from soak import TWEETS, Soak, audit, committed_truth, load  # noqa: E402


def test_short_soak_commits_every_txid_exactly_once_under_faults(tmp_path):
    out = tmp_path / "soak.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "soak.py"), "--txids", "40", "--seed", "3", "--fault-rate", "0.6",
         "--batch", "12", "--json", str(out)],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    print(done.stdout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["ok"] is True
    assert sum(r["txids committed"] for r in result["topologies"].values()) >= 40
    for topology, r in result["topologies"].items():
        assert (r["tuples lost"], r["tuples double-counted"]) == (0, 0), topology
        assert r["commits ordered, no gap"] and r["final attempts recorded"], topology
    assert sum(result["faults"].values()) >= 10, result["faults"]
    assert result["replays"] >= 1, "a fault that forces a replay (cascade or partition) must have happened"


def test_the_audit_catches_a_lost_and_a_double_counted_tuple(tmp_path):
    soak = Soak(tmp_path, seed=1, fault_rate=0.0, batch=10)
    soak.start()
    try:
        tweets, sentences = load(soak, 3)
        assert soak.drive(TWEETS, 3) == 3
        truth = committed_truth(soak, TWEETS, tweets, sentences)
        clean = audit(soak, TWEETS, truth)
        assert (clean["tuples lost"], clean["tuples double-counted"], clean["final attempts recorded"]) == (0, 0, True)
        client = redis.Redis.from_url(soak.redis.url, decode_responses=True)
        users = f"{TWEETS}:users"
        first, second = sorted(client.hkeys(users))[:2]
        client.hincrby(users, first, 1)
        client.hincrby(users, second, -1)
        tampered = audit(soak, TWEETS, truth)
        assert (tampered["tuples lost"], tampered["tuples double-counted"]) == (1, 1)
        soak.committed_attempts[TWEETS][2] += 1
        assert audit(soak, TWEETS, truth)["final attempts recorded"] is False
    finally:
        soak.stop()

"""Every Redis key txdag writes for a topology, collected from the layout modules (txdag.keyspace's ``keys``), and
Redis's glob matching of ACL key patterns, for the tests that check the ACL against them."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

from txdag.attempt import TransactionAttempt
from txdag.commit import newvalues, rejections
from txdag.spouts import streams, tweets
from txdag.staging import layout as staging_layout
from txdag.state import redis_backing
from txdag.state.kv import layout as kv_layout
from txdag.topology.definition import KeyValue, State, TweetsSource
from txdag.topology.topology import TransactionalTopology
from txdag.windows import store as window_store

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_TX = TransactionAttempt(12, 3)
SAMPLE_TWEETS = [1, 12, 3456]
SAMPLE_WINDOW = 7


def every_kind_of_key(name: str) -> TransactionalTopology:
    """A topology with every kind of key: states (a namespace with glob characters), a marker (with one too), a
    key-value state, a tweets source whose prefix has a glob character."""
    states = [State("users", namespace=f"{name}:users"),
              State("pairs", namespace=f"{name}:pa[ir]s*", key_fields=2, separator=":")]
    return TransactionalTopology(name, source=TweetsSource(prefix=f"{name}?src:"), states=states,
                                 key_values=[KeyValue("counter")], marker_key=f"{name}:LAST[1]",
                                 job="spark_jobs/tweets_analytics.py", project_dir=str(ROOT))


def written_keys(topology: Any, tx: TransactionAttempt = SAMPLE_TX) -> list[str]:
    """The keys a topology's components write: its states and marker, staging and claims, rejections, a window
    store and a new values stream per state name, and its KeyValueStates (in their default namespaces)."""
    t, names = topology.topology_id, [s.name for s in topology.states]
    keys = [k for s in topology.states for k in redis_backing.keys(s.redis_key)]
    keys += [topology.commit_marker]
    keys += staging_layout.keys(t, tx, names) + rejections.keys(t)
    keys += [k for n in names for k in window_store.keys(t, n, tx.txid, SAMPLE_WINDOW) + newvalues.keys(t, n)]
    keys += [k for kv in topology.key_values for k in kv_layout.keys(kv.namespace_of(t), tx)]
    return keys


def source_keys(topology: Any) -> list[str]:
    """The keys its spout reads."""
    source = topology.source
    if source.type == "tweets":
        return tweets.keys(source.prefix, SAMPLE_TWEETS)
    return streams.keys(source.streams)


def granted(rules: list[str], key: str, prefix: str = "~") -> list[str]:
    """The rules with ``prefix`` (``~`` read-write, ``%R~`` read-only) whose pattern matches ``key``."""
    return [r for r in rules if r.startswith(prefix) and redis_match(r[len(prefix):], key)]


def redis_match(pattern: str, key: str) -> bool:
    """Whether a Redis glob (an ACL key pattern, as txdag writes them) matches ``key`` as Redis matches it."""
    return fnmatch.fnmatchcase(key, _fnmatch_pattern(pattern))


def _fnmatch_pattern(pattern: str) -> str:
    """A Redis glob as an fnmatch pattern: ``\\x`` (a literal x) becomes ``[x]``, ``[^...]`` becomes ``[!...]``."""
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(f"[{pattern[i]}]")
        elif pattern.startswith("[^", i):
            out.append("[!")
            i += 1
        else:
            out.append(pattern[i])
        i += 1
    return "".join(out)

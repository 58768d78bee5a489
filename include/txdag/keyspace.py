"""The shape every Redis key layout shares, so that a key is spelled in one module and access control follows it.

One module per layout is the only place that builds its keys:

    txdag.state.redis_backing   a map state's namespace (owner: the namespace)
    txdag.staging.layout        a topology's staging and claims
    txdag.state.marker          a topology's commit marker (the last committed txid)
    txdag.state.kv.layout       a KeyValueState's namespace, with its staging (owner: the topology, for its
                                steps' namespaces)
    txdag.commit.rejections     rejected source entries          txdag.commit.newvalues   new values streams
    txdag.windows.store         window stores                    txdag.spouts.tweets / .streams   the sources

and offers the same two functions:

    keys(owner, *ids) -> list[str]       every key of the layout for one owner and the ids it is keyed by
    acl_patterns(owner) -> list[str]     Redis ACL key patterns matching those keys whatever the ids, and no
                                         key of another owner

``txdag.cli.acl`` builds a user's ``~``/``%R~`` rules from ``acl_patterns`` alone (tests/unit/cli/test_acl.py
checks every ``keys`` against them). The patterns are Redis globs: ``*``, ``?``, ``[...]``, ``\\`` escapes.
"""

from __future__ import annotations

import re

GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


def glob_escape(key: str) -> str:
    """A Redis key as an ACL key pattern that matches that key only."""
    return GLOB_SPECIAL.sub(r"\\\1", key)


def below(base: str) -> str:
    """The pattern of every key ``<base>:...`` (not ``base`` itself)."""
    return f"{glob_escape(base)}:*"


def literal(pattern: str) -> str | None:
    """The one key a Redis glob matches when it has no wildcard (``glob_escape`` undone), else None."""
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern):
            out.append(pattern[i + 1])
            i += 2
            continue
        if pattern[i] in "*?[":
            return None
        out.append(pattern[i])
        i += 1
    return "".join(out)

"""The ``txdag://`` URI scheme of the states' assets and the extra of a commit's event (txdag.topology.assets)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from txdag.attempt import TransactionAttempt
from txdag.errors import ConfigError
from txdag.topology.assets import check_uri, commit_extra, source_uri, state_uri


def test_a_states_uri_names_its_topology_then_the_state() -> None:
    assert state_uri("tweets", "hashtags") == "txdag://tweets/hashtags"
    assert state_uri("word_count.v2", "words-1") == "txdag://word_count.v2/words-1"


@pytest.mark.parametrize("topology, state", [("", "s"), ("t", ""), ("a/b", "s"), ("t", "s/x"), ("t", "s?q=1")])
def test_a_uri_is_built_only_from_valid_ids(topology: str, state: str) -> None:
    with pytest.raises(ConfigError, match="letters, digits"):
        state_uri(topology, state)


@pytest.mark.parametrize("uri", ["txdag://tweets/hashtags", "txdag://tweets"])
def test_the_handler_keeps_a_states_uri_and_a_sources_as_they_are(uri: str) -> None:
    parts = urlsplit(uri)
    assert check_uri(parts) == parts


def test_a_sources_uri_is_its_topology_alone() -> None:
    assert source_uri("tweets") == "txdag://tweets"
    with pytest.raises(ConfigError, match="letters, digits"):
        source_uri("a/b")


@pytest.mark.parametrize("uri", ["txdag://tweets/a/b", "txdag://tw:80/a", "txdag://u@t/a",
                                 "txdag://t/a?x=1", "txdag:///a", "txdag://t/a%20b"])
def test_the_handler_refuses_a_uri_that_names_no_state_and_says_what_to_write(uri: str) -> None:
    with pytest.raises(ValueError, match=r"no txdag state or source: write txdag://<topology_id>/<state>") as caught:
        check_uri(urlsplit(uri))
    assert str(caught.value).startswith("asset URI 'txdag:") and "state_asset(topology, state)" in str(caught.value)


def test_a_commits_event_says_which_txid_attempt_and_how_many_keys() -> None:
    extra = commit_extra(TransactionAttempt(7, 2), "tweets", "hashtags", 41)
    assert extra == {"topology": "tweets", "state": "hashtags", "txid": 7, "attempt": 2, "keys": 41}

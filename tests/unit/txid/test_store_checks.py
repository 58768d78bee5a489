"""A store or source that went backwards relative to ZooKeeper halts the topology, naming both sides and the ways
out (issue 20): the pure rules of txdag.txid.decisions."""

from __future__ import annotations

import pytest

from txdag.errors import StoreWentBackwards, source_went_backwards
from txdag.txid.decisions import check_marker


@pytest.mark.parametrize(("committed", "marker", "begun"),
                         [(0, None, False), (0, 1, True), (5, 5, False), (5, 6, True)])
def test_a_marker_at_or_one_ahead_of_a_commit_begun_is_consistent(committed: int, marker: int | None,
                                                                  begun: bool) -> None:
    check_marker("wc", committed, marker, "redis 127.0.0.1:6379 key m", next_commit_begun=begun)  # cut short


@pytest.mark.parametrize(("committed", "marker"), [(0, 1), (5, 6)])
def test_a_marker_one_ahead_of_a_txid_whose_commit_never_began_halts(committed: int, marker: int) -> None:
    """The topology's ZooKeeper records were lost (or a name reused over a fresh root) while the store kept a
    marker one ahead: taking the new txid for the old commit's would skip its batch, so it halts."""
    with pytest.raises(StoreWentBackwards) as caught:
        check_marker("wc", committed, marker, "redis x", next_commit_begun=False)
    message = str(caught.value)
    assert f"holds commit marker {marker}, but ZooKeeper records only txid {committed} committed" in message
    assert f"no commit begun of txid {marker}" in message and "txdag reset wc --confirm" in message


@pytest.mark.parametrize(("committed", "marker", "shown"), [(14, None, "no commit marker"), (14, 3, "commit marker 3")])
def test_a_store_behind_zookeeper_halts_naming_both_sides(committed: int, marker: int | None, shown: str) -> None:
    with pytest.raises(StoreWentBackwards) as caught:
        check_marker("tweets", committed, marker, "redis 127.0.0.1:6391 key LAST", next_commit_begun=True)
    message = str(caught.value)
    assert "ZooKeeper records txid 14 committed" in message and shown in message
    assert "redis 127.0.0.1:6391 key LAST" in message and "txdag reset tweets --confirm" in message
    assert "restore" in message


def test_a_marker_two_ahead_means_zookeeper_lost_its_records() -> None:
    with pytest.raises(StoreWentBackwards, match=r"holds commit marker 9, but ZooKeeper records only txid 2"):
        check_marker("wc", 2, 9, "redis x", next_commit_begun=True)


def test_the_source_error_names_what_the_spout_found() -> None:
    error = source_went_backwards("tweets", "NEXT_WRITE is 501 but the last batch ended at tweet 1314")
    assert isinstance(error, StoreWentBackwards)
    assert "NEXT_WRITE is 501" in str(error) and "txdag reset tweets --confirm" in str(error)

"""Which windows a committed batch closes: count, batch and duration windows, as pure functions of the past."""

import pytest

from txdag.errors import ConfigError
from txdag.windows.rules import (
    Block,
    Progress,
    SlidingBatchWindow,
    SlidingCountWindow,
    SlidingDurationWindow,
    TumblingBatchWindow,
    TumblingCountWindow,
    TumblingDurationWindow,
    spec_from_dict,
    spec_to_dict,
)


def run(spec, batches):
    """Append batches (lists of timestamps) one txid after the other; the windows each closed, and the progress."""
    progress, closed = Progress(), []
    for txid, timestamps in enumerate(batches, start=1):
        advance = spec.advance(progress, txid, timestamps)
        closed.append(advance.closed)
        progress = advance.progress
    return closed, progress


def test_sliding_count_windows_close_every_slide_rows_over_the_last_size_rows():
    closed, progress = run(SlidingCountWindow(size=5, slide=2), [[0] * 3, [0] * 0, [0] * 4, [0]])
    assert closed == [[(1, 2)], [], [(1, 4), (2, 6)], [(4, 8)]]
    assert progress.rows == 8 and progress.blocks == 4


def test_tumbling_count_windows_do_not_overlap():
    closed, _ = run(TumblingCountWindow(3), [[0] * 7, [0] * 2])
    assert closed == [[(1, 3), (4, 6)], [(7, 9)]]


def test_count_windows_keep_only_the_blocks_a_future_window_covers():
    spec = SlidingCountWindow(size=4, slide=2)
    _, progress = run(spec, [[0] * 3, [0] * 3])  # rows 1..6 in blocks 1..3 and 4..6; next window: rows 5..8
    assert not spec.needed(Block(1, 1, 1, 3), progress)
    assert spec.needed(Block(2, 2, 4, 3), progress)


def test_batch_windows_cover_the_last_size_blocks_even_empty_ones():
    closed, _ = run(SlidingBatchWindow(size=3), [[1], [], [2, 3], [4]])
    assert closed == [[(1, 1)], [(1, 2)], [(1, 3)], [(2, 4)]]
    closed, _ = run(TumblingBatchWindow(2), [[1], [], [2], [3], [5]])
    assert closed == [[], [(1, 2)], [], [(3, 4)], []]
    spec = SlidingBatchWindow(size=3, slide=2)
    _, progress = run(spec, [[1]] * 4)  # next window closes at block 6 and covers blocks 4..6
    assert [spec.needed(Block(n, n, n, 1), progress) for n in (3, 4)] == [False, True]


def test_duration_windows_close_when_the_watermark_passes_their_end():
    spec = SlidingDurationWindow(size=10, slide=5)
    closed, progress = run(spec, [[1, 3], [7], [12, 4], [31]])
    # block 1: watermark 3, nothing closes; block 2: watermark 7 closes the window ending at 5;
    # block 3: watermark 12 closes 10 (4 was in the closed window [-5, 5): late, but still joins [0, 10));
    # block 4 closes 15..30
    assert closed == [[], [(-5, 5)], [(0, 10)], [(5, 15), (10, 20), (15, 25), (20, 30)]]
    assert progress.late == 1 and progress.rows == 6 and progress.watermark == 31 and progress.next_end == 35


def test_late_rows_are_reported_and_lateness_holds_windows_open():
    spec = TumblingDurationWindow(10, lateness=5)
    first = spec.advance(Progress(), 1, [14, 16])  # watermark 11: [10, 20) stays open until it reaches 20
    assert first.closed == [] and first.late == [] and first.progress.next_end == 20
    second = spec.advance(first.progress, 2, [18, 9, 24])  # 9 belongs to [0, 10), which has closed: dropped
    assert second.late == [1] and second.kept == [0, 2] and second.closed == []
    third = spec.advance(second.progress, 3, [33])  # watermark 28 closes [10, 20)
    assert third.closed == [(10, 20)] and third.progress.late == 1 and third.progress.rows == 5


def test_a_sliding_duration_row_behind_one_closed_window_joins_the_open_ones():
    spec = SlidingDurationWindow(size=10, slide=5)
    first = spec.advance(Progress(), 1, [12])  # watermark 12: [0, 10) is past; [5, 15) and [10, 20) are open
    assert first.closed == [] and first.progress.next_end == 15
    second = spec.advance(first.progress, 2, [7])  # 7 belongs to [0, 10), past: late, but [5, 15) is open
    assert second.late == [0] and second.kept == [0]


def test_duration_windows_drop_blocks_no_future_window_reaches():
    spec = TumblingDurationWindow(10)
    _, progress = run(spec, [[1, 2], [15], [27]])  # closed up to 20; the next window is [20, 30)
    assert progress.next_end == 30
    assert not spec.needed(Block(1, 1, 1, 2, max_ts=2), progress)
    assert not spec.needed(Block(2, 2, 3, 1, max_ts=15), progress)
    assert spec.needed(Block(3, 3, 4, 1, max_ts=27), progress)
    assert not spec.needed(Block(4, 4, 5, 0, max_ts=None), progress)


@pytest.mark.parametrize("spec", [SlidingCountWindow(5, 2), TumblingCountWindow(4), SlidingBatchWindow(3),
                                  TumblingBatchWindow(2), SlidingDurationWindow(60, 10, 5), TumblingDurationWindow(30)])
def test_specs_round_trip_through_json(spec):
    assert spec_from_dict(spec_to_dict(spec)) == spec


@pytest.mark.parametrize(("build", "match"), [
    (lambda: SlidingCountWindow(0, 1), "SlidingCountWindow size must be an int >= 1, got 0"),
    (lambda: SlidingBatchWindow(3, slide=True), "SlidingBatchWindow slide must be an int >= 1, got True"),
    (lambda: SlidingDurationWindow(10, -1), "slide must be a number of seconds > 0, got -1"),
    (lambda: TumblingDurationWindow(10, lateness=-2), "lateness must be a number of seconds >= 0"),
    (lambda: spec_from_dict({"type": "HoppingWindow"}), "unknown window type 'HoppingWindow'"),
    (lambda: spec_from_dict({"type": "TumblingCountWindow", "length": 3}), "window TumblingCountWindow: .*length"),
])
def test_bad_window_specs_say_what_to_change(build, match):
    with pytest.raises(ConfigError, match=match):
        build()

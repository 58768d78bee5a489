"""Windows over batches (seed 001): which windows a committed batch fires, as pure functions of the window's past.

Each committed txid appends one block of window rows (possibly empty) to the window, in txid order. A window spec
decides which windows the new block closes and which rows each covers. Nothing here reads a clock: evaluating a
txid's commit again (a retry) closes the same windows over the same rows.

- ``SlidingCountWindow(size, slide)`` / ``TumblingCountWindow(size)``: rows are numbered 1, 2, ... in commit
  order; window k closes when row k*slide arrives and covers rows k*slide - size + 1 .. k*slide.
- ``SlidingDurationWindow(size, slide, lateness=0)`` / ``TumblingDurationWindow(size)``: by the rows' timestamps
  (seconds); windows end at multiples of ``slide`` and cover [end - size, end). The watermark is the largest
  timestamp seen minus ``lateness``; a window closes once the watermark reaches its end. A row that belongs to
  a window already closed is late: it is reported (the window fired without it), and joins the windows of its
  that are still open, if any.
- ``SlidingBatchWindow(size, slide=1)`` / ``TumblingBatchWindow(size)``: by blocks (txids): the n-th block
  closes a window when n is a multiple of ``slide``, over the last ``size`` blocks.

A closed window that holds no row fires nothing, except a batch window (its txids are its content).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from txdag.errors import ConfigError


@dataclass(frozen=True)
class Block:
    """One txid's rows as the window holds them: its place among the blocks and among the rows."""

    txid: int
    ordinal: int  # 1 for the first block appended to this window
    first_row: int  # number of the block's first row; rows are numbered from 1 in commit order
    count: int  # rows kept (late rows are not)
    max_ts: float | None = None

    @property
    def last_row(self) -> int:
        return self.first_row + self.count - 1


@dataclass(frozen=True)
class Progress:
    """What the window remembers between txids besides its blocks."""

    rows: int = 0  # rows appended so far
    blocks: int = 0  # blocks appended so far
    fired: int = 0  # windows fired so far: the id of the last one
    watermark: float | None = None  # duration windows
    next_end: float | None = None  # duration windows: the end of the next window to close
    late: int = 0  # duration windows: rows that came after one of their windows closed


@dataclass(frozen=True)
class Advance:
    """What appending one block does: the windows it closes (start, end), the progress after, the late rows."""

    closed: list[tuple[float, float]]
    progress: Progress
    late: list[int] = field(default_factory=list)  # indices of the block's rows that are late
    kept: list[int] | None = None  # indices of the rows the block keeps (None: all)


def _int_at_least_1(spec: Any, *names: str) -> None:
    for name in names:
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{type(spec).__name__} {name} must be an int >= 1, got {value!r}")


def _next_multiple(value: float, step: float) -> float:
    """The smallest multiple of ``step`` strictly above ``value``."""
    return (math.floor(value / step) + 1) * step


@dataclass(frozen=True)
class SlidingCountWindow:
    size: int
    slide: int

    def __post_init__(self) -> None:
        _int_at_least_1(self, "size", "slide")

    def advance(self, before: Progress, txid: int, timestamps: Sequence[float]) -> Advance:
        last = before.rows + len(timestamps)
        ends = range(int(_next_multiple(before.rows, self.slide)), last + 1, self.slide)
        progress = Progress(last, before.blocks + 1, before.fired)
        return Advance([(max(1, end - self.size + 1), end) for end in ends], progress)

    def covers(self, window: tuple[float, float], block: Block, index: int, ts: float) -> bool:
        return window[0] <= block.first_row + index <= window[1]

    def needed(self, block: Block, progress: Progress) -> bool:
        """Whether a future window may cover rows of ``block`` (else the store drops it)."""
        return block.last_row >= _next_multiple(progress.rows, self.slide) - self.size + 1


@dataclass(frozen=True)
class TumblingCountWindow(SlidingCountWindow):
    slide: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "slide", self.slide or self.size)
        super().__post_init__()


@dataclass(frozen=True)
class SlidingBatchWindow:
    size: int
    slide: int = 1

    def __post_init__(self) -> None:
        _int_at_least_1(self, "size", "slide")

    def advance(self, before: Progress, txid: int, timestamps: Sequence[float]) -> Advance:
        n = before.blocks + 1
        progress = Progress(before.rows + len(timestamps), n, before.fired)
        return Advance([(max(1, n - self.size + 1), n)] if n % self.slide == 0 else [], progress)

    def covers(self, window: tuple[float, float], block: Block, index: int, ts: float) -> bool:
        return window[0] <= block.ordinal <= window[1]

    def needed(self, block: Block, progress: Progress) -> bool:
        return block.ordinal >= _next_multiple(progress.blocks, self.slide) - self.size + 1


@dataclass(frozen=True)
class TumblingBatchWindow(SlidingBatchWindow):
    slide: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "slide", self.slide or self.size)
        super().__post_init__()


@dataclass(frozen=True)
class SlidingDurationWindow:
    size: float
    slide: float
    lateness: float = 0.0

    def __post_init__(self) -> None:
        for name in ("size", "slide"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"{type(self).__name__} {name} must be a number of seconds > 0, got {value!r}")
        if isinstance(self.lateness, bool) or not isinstance(self.lateness, int | float) or self.lateness < 0:
            raise ConfigError(f"{type(self).__name__} lateness must be a number of seconds >= 0, got "
                              f"{self.lateness!r}")

    def advance(self, before: Progress, txid: int, timestamps: Sequence[float]) -> Advance:
        next_end, late, kept = before.next_end, [], []
        for i, ts in enumerate(timestamps):
            first, last = _next_multiple(ts, self.slide), math.floor((ts + self.size) / self.slide) * self.slide
            if first > ts + self.size:
                continue  # between two windows (slide > size): no window wants it
            if next_end is not None and first < next_end:
                late.append(i)
                if last < next_end:
                    continue  # every window of its has closed
            kept.append(i)
        mark = before.watermark
        if kept:
            top = max(timestamps[i] for i in kept) - self.lateness
            mark = top if mark is None else max(mark, top)
            if next_end is None:
                next_end = _next_multiple(min(min(timestamps[i] for i in kept), mark), self.slide)
        closed: list[tuple[float, float]] = []
        while next_end is not None and mark is not None and next_end <= mark:
            closed.append((next_end - self.size, next_end))
            next_end += self.slide
        progress = Progress(before.rows + len(kept), before.blocks + 1, before.fired, mark, next_end,
                            before.late + len(late))
        return Advance(closed, progress, late, kept)

    def covers(self, window: tuple[float, float], block: Block, index: int, ts: float) -> bool:
        return window[0] <= ts < window[1]

    def needed(self, block: Block, progress: Progress) -> bool:
        if block.max_ts is None:
            return False
        return progress.next_end is None or block.max_ts >= progress.next_end - self.size


@dataclass(frozen=True)
class TumblingDurationWindow(SlidingDurationWindow):
    slide: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "slide", self.slide or self.size)
        super().__post_init__()


WindowSpec = SlidingCountWindow | SlidingBatchWindow | SlidingDurationWindow
SPECS: dict[str, type] = {cls.__name__: cls for cls in (
    SlidingCountWindow, TumblingCountWindow, SlidingBatchWindow, TumblingBatchWindow, SlidingDurationWindow,
    TumblingDurationWindow)}


def fires_when_empty(spec: WindowSpec) -> bool:
    return isinstance(spec, SlidingBatchWindow)


def spec_to_dict(spec: WindowSpec) -> dict[str, Any]:
    return {"type": type(spec).__name__, **{f.name: getattr(spec, f.name) for f in fields(spec)}}


def spec_from_dict(data: Any) -> WindowSpec:
    if not isinstance(data, dict):
        raise ConfigError(f"a window spec is a JSON object with a 'type', got {data!r}")
    args = dict(data)
    kind = SPECS.get(args.pop("type", None))
    if kind is None:
        raise ConfigError(f"unknown window type {data.get('type')!r}; txdag knows {sorted(SPECS)}")
    try:
        return kind(**args)
    except TypeError as exc:
        raise ConfigError(f"window {kind.__name__}: {exc}") from None

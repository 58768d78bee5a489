"""The tweets spout's batch metadata, pure: ``{"v": 1, "from": id, "quantity": n}`` and, once an operator accepted
a hole (``txdag accept-missing``), ``"missing": {"<id>": "<when accepted>"}``. Seed 000's coordinator arithmetic
(the next batch continues after the previous one) and the checks every reader runs (readers refuse versions and
shapes they do not know; metadata without ``missing`` is read as before).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from txdag.errors import FormatVersionError
from txdag.spouts.base import Metadata

FORMAT_VERSION = 1


def check_metadata(metadata: Any) -> tuple[int, int]:
    """``(from, quantity)`` of a tweets metadata dict; refuses unknown versions and shapes."""
    if not isinstance(metadata, dict) or metadata.get("v") != FORMAT_VERSION:
        version = metadata.get("v") if isinstance(metadata, dict) else type(metadata).__name__
        raise FormatVersionError(
            f"tweets spout metadata has format version {version!r}; this txdag reads version {FORMAT_VERSION} "
            f"only (upgrade txdag, or start the topology over with `txdag reset TOPOLOGY --confirm`)"
        )
    start, quantity = metadata.get("from"), metadata.get("quantity")
    for name, value, low in (("from", start, 1), ("quantity", quantity, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise FormatVersionError(
                f"tweets spout metadata field {name!r} must be an int >= {low}, got {value!r}"
            )
    missing_in(metadata, start, quantity)  # type: ignore[arg-type]
    return start, quantity  # type: ignore[return-value]


def accepted_missing(metadata: Metadata) -> dict[int, str]:
    """The ids of the batch accepted as missing (``txdag accept-missing``) and when; {} for metadata without any
    (older metadata, and every batch without a hole)."""
    return missing_in(metadata, *check_metadata(metadata))


def missing_in(metadata: Metadata, start: int, quantity: int) -> dict[int, str]:
    """The accepted ids of a batch whose ``from``/``quantity`` are checked already."""
    missing = metadata.get("missing", {})
    if not isinstance(missing, dict):
        raise FormatVersionError(f"tweets spout metadata field 'missing' must be an object, got {missing!r}")
    out: dict[int, str] = {}
    for key, at in missing.items():
        tweet_id = int(key) if isinstance(key, str) and key.isdigit() else None
        if tweet_id is None or not isinstance(at, str) or not start <= tweet_id < start + quantity:
            raise FormatVersionError(
                f"tweets spout metadata field 'missing' must map ids of the batch ({start}.."
                f"{start + quantity - 1}) to when they were accepted, got {key!r}: {at!r}"
            )
        out[tweet_id] = at
    return out


def with_missing(metadata: Metadata, tweet_ids: Iterable[int], at: str) -> Metadata:
    """``metadata`` with ``tweet_ids`` accepted as missing at ``at`` (the ids accepted before keep their time)."""
    check_metadata(metadata)
    added = {str(i): at for i in sorted(tweet_ids)}
    return {**metadata, "missing": {**added, **metadata.get("missing", {})}}


def missing_reason(at: str) -> str:
    """A Rejection's reason for an id accepted as missing."""
    return f"accepted as missing by txdag accept-missing at {at}"


def next_from(prev_metadata: Metadata | None, next_read: int) -> int:
    """The first tweet id after ``prev_metadata``'s batch; the very first txid starts at NEXT_READ."""
    if prev_metadata is None:
        return next_read
    start, quantity = check_metadata(prev_metadata)
    return start + quantity


def plan_batch(prev_metadata: Metadata | None, next_read: int, next_write: int, max_size: int) -> Metadata:
    """The seed's coordinator arithmetic: continue after the previous batch, at most ``max_size`` tweets."""
    start = next_from(prev_metadata, next_read)
    quantity = max(0, min(next_write - start, max_size))
    return {"v": FORMAT_VERSION, "from": start, "quantity": quantity}

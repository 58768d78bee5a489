"""What a processing step staged for one state, as recorded in the staging seal, so the commit knows how to apply it.

Kinds of output:

- ``sum``: numeric partials per hash field (Count, Sum): added inside Redis by one script call per chunk, with the
  state's txid rule per key (``txdag.state.redis_commit``). A plain DataFrame returned by a job is this kind.
- ``combine``: a combiner aggregator's partial value per hash field (JSON), merged into the stored value by the
  aggregator's ``combine`` at commit time, through the map state's ``multi_update`` (Trident's persistentAggregate
  with a CombinerAggregator). ``ref`` names the aggregator so that the commit task can rebuild it.
- ``window``: the txid's window rows (JSON ``[ts, field, ...]`` per staged sequence number), appended to the
  window store at commit time, in txid order; the windows they close are aggregated with ``ref``'s aggregator
  (``options``: the window spec, the field names, how many are group keys, top N, new values).
- ``persist``: rows handed to a StateUpdater (``ref``) at commit time (Trident's partitionPersist).
- ``kv``: a stateful step's writes to a KeyValueState, staged in the state's own namespace (txdag.state.kv), so
  the seal only counts them; prepared and committed by txdag.commit.keyvalue (``ref``: the step, for its hooks).

The seal of an attempt holding only ``sum`` outputs keeps format version 1 (``state -> number of fields``), which
every txdag reads; any other output makes it version 2, where each state's entry is a JSON object.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from txdag.errors import FormatVersionError

SUM = "sum"
COMBINE = "combine"
WINDOW = "window"
PERSIST = "persist"
KV = "kv"
KINDS = (SUM, COMBINE, WINDOW, PERSIST, KV)
STAGED_ELSEWHERE = (KV,)  # kinds whose values are not in txdag's staging hash


@dataclass(frozen=True)
class OutputSpec:
    """One state's staged output: its kind, how many hash fields were staged, and what the commit must rebuild."""

    kind: str = SUM
    count: int = 0
    ref: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise FormatVersionError(f"unknown staged output kind {self.kind!r}; this txdag knows {list(KINDS)}")

    def seal_value(self, version: int) -> str:
        if version == 1:
            return str(self.count)
        return json.dumps({"kind": self.kind, "count": self.count, "ref": self.ref, "options": self.options},
                          separators=(",", ":"), sort_keys=True)


def seal_version(outputs: dict[str, OutputSpec]) -> int:
    return 1 if all(o.kind == SUM for o in outputs.values()) else 2


def encode_seal(outputs: dict[str, OutputSpec]) -> dict[str, str]:
    """The seal hash: ``v`` and one entry per state."""
    version = seal_version(outputs)
    return {"v": str(version), **{name: o.seal_value(version) for name, o in outputs.items()}}


def decode_seal(raw: dict[str, str], where: str) -> dict[str, OutputSpec] | None:
    """The outputs of a seal hash (None when there is no seal); refuses versions and entries it does not know."""
    fields = dict(raw)
    version = fields.pop("v", None)
    if version is None:
        return None
    if version == "1":
        return {name: OutputSpec(SUM, _count(value, name, where)) for name, value in fields.items()}
    if version != "2":
        raise FormatVersionError(f"staging seal of {where} has format version {version!r}; this txdag reads 1 and 2: "
                                 f"process the txid with the txdag version that commits it")
    outputs = {}
    for name, value in fields.items():
        try:
            entry = json.loads(value)
            outputs[name] = OutputSpec(entry["kind"], _count(entry["count"], name, where), entry.get("ref"),
                                       entry.get("options") or {})
        except (ValueError, KeyError, TypeError) as exc:
            raise FormatVersionError(f"staging seal of {where}: entry {name!r} is malformed ({exc}): replay the "
                                     f"txid to process it again") from None
    return outputs


def _count(value: Any, name: str, where: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise FormatVersionError(f"staging seal of {where}: count of {name!r} is {value!r}, not a number: replay "
                                 f"the txid to process it again") from None

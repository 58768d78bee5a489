"""What a processing step staged for one state, as recorded in the staging seal, and how its values are read back.

``kind`` names an entry of FORMATS, which says for each kind where its values are staged and how one is decoded;
how the commit applies each kind is txdag.commit.kinds, keyed by the same names.

The seal of an attempt holding only ``sum`` outputs keeps format version 1 (``state -> number of fields``), which
every txdag reads; any other output makes it version 2, where each state's entry is a JSON object.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from txdag.errors import FormatVersionError

SUM = "sum"  # numeric partials: the one kind a version 1 seal holds
COMBINE = "combine"
WINDOW = "window"
PERSIST = "persist"
SINK = "sink"
KV = "kv"


def decode_number(raw: bytes) -> int | float:
    """A staged numeric partial (a Count's, a Sum's) as the number it was."""
    text = raw.decode()
    try:
        return int(text)
    except ValueError:
        return float(text)


@dataclass(frozen=True)
class StagedFormat:
    """How one kind's values are staged: in txdag's staging hash or elsewhere (the seal only counts them), how one
    field's value is decoded, and whether the commit applies them inside Redis (it reads only their key)."""

    in_staging: bool = True
    decode: Callable[[bytes], Any] = json.loads
    in_redis: bool = False


FORMATS: dict[str, StagedFormat] = {
    COMBINE: StagedFormat(), WINDOW: StagedFormat(), PERSIST: StagedFormat(), SINK: StagedFormat(),
    # a KeyValueState's writes are staged in the state's own namespace (txdag.state.kv.layout)
    KV: StagedFormat(in_staging=False),
    SUM: StagedFormat(decode=decode_number, in_redis=True),
}


@dataclass(frozen=True)
class OutputSpec:
    """One state's staged output: its kind, how many hash fields were staged, and what the commit must rebuild."""

    kind: str = SUM
    count: int = 0
    ref: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def seal_value(self, version: int) -> str:
        if version == 1:
            return str(self.count)
        return json.dumps({"kind": self.kind, "count": self.count, "ref": self.ref, "options": self.options},
                          separators=(",", ":"), sort_keys=True)


def seal_version(outputs: dict[str, OutputSpec]) -> int:
    return 1 if all(o.kind == SUM for o in outputs.values()) else 2


def encode_seal(outputs: dict[str, OutputSpec], kinds: Collection[str]) -> dict[str, str]:
    """The seal hash: ``v`` and one entry per state; refuses a kind not in ``kinds``."""
    for name, o in outputs.items():
        if o.kind not in kinds:
            raise FormatVersionError(f"state {name!r}: unknown staged output kind {o.kind!r}; this txdag knows "
                                     f"{sorted(kinds)}: stage the state with one of txdag's outputs")
    version = seal_version(outputs)
    return {"v": str(version), **{name: o.seal_value(version) for name, o in outputs.items()}}


def decode_seal(raw: dict[str, str], where: str, kinds: Collection[str]) -> dict[str, OutputSpec] | None:
    """The outputs of a seal hash (None when there is no seal); refuses versions, entries and kinds (not in
    ``kinds``) it does not know."""
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
        kind = outputs[name].kind
        if kind not in kinds:
            raise FormatVersionError(f"staging seal of {where}: state {name!r} has output kind {kind!r}, which this "
                                     f"txdag does not know (it knows {sorted(kinds)}): process the txid with the txdag "
                                     f"version that commits it")
    return outputs


def _count(value: Any, name: str, where: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise FormatVersionError(f"staging seal of {where}: count of {name!r} is {value!r}, not a number: replay "
                                 f"the txid to process it again") from None

"""The kinds of staged output, one entry each: how the commit applies them. Adding a kind is one entry here, its
staged format (txdag.staging.format.FORMATS), and the Spark side's output class that stages it (txdag.spark: a
DataFrame is ``sum``; CombinedOutput, WindowOutput, PersistOutput, StatefulOutput).

The commit calls every kind's applier at every txid, in the table's order (sums last, for the marker), with the
outputs of that kind (maybe none: the key-value states and the marker are committed at every txid all the same).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from txdag.commit.apply import (
    CommitContext,
    apply_combine,
    apply_persist,
    apply_sink,
    apply_sums,
    apply_window,
    sink_position,
)
from txdag.commit.keyvalue import commit_key_values
from txdag.staging.format import COMBINE, KV, PERSIST, SINK, SUM, WINDOW, OutputSpec

Outputs = Mapping[str, tuple[OutputSpec, Any]]  # state -> (its output, its staged values as the staging read them)
# -> (keys applied, keys that held the txid already, bytes of the sums' staged partials it counted: the other kinds'
# are counted where the staging is read into Python, txdag.staging.store.Staging.read_staged; key-value states'
# writes, which their prepare and commit move inside Redis, are not counted)
Applier = Callable[[CommitContext, Outputs], tuple[int, int, int]]


@dataclass(frozen=True)
class OutputKind:
    """One kind: its name in the seal (and in txdag.staging.format.FORMATS) and its applier."""

    name: str
    apply: Applier


def each(applier: Callable[[CommitContext, str, OutputSpec, Any], int]) -> Applier:
    """An applier of one state's output, run for each state of its kind in seal order."""

    def apply(ctx: CommitContext, outputs: Outputs) -> tuple[int, int, int]:
        return sum(applier(ctx, name, spec, values) for name, (spec, values) in outputs.items()), 0, 0

    return apply


def _key_values(ctx: CommitContext, outputs: Outputs) -> tuple[int, int, int]:
    return commit_key_values(ctx, {name: spec for name, (spec, _) in outputs.items()}), 0, 0


KINDS: dict[str, OutputKind] = {kind.name: kind for kind in (
    # a combiner aggregator's partial value per hash field (JSON), merged into the stored value with the aggregator's
    # ``combine`` through the map state's multi_update (Trident's persistentAggregate); ``ref``: the aggregator
    OutputKind(COMBINE, each(apply_combine)),
    # the txid's window rows (JSON ``[ts, field, ...]`` per staged sequence number), appended to the window store in
    # txid order; the windows they close are aggregated with ``ref``'s aggregator (``options``: the window spec, the
    # field names, how many are group keys, top N, new values)
    OutputKind(WINDOW, each(apply_window)),
    # rows (JSON arrays) handed to a StateUpdater (``ref``; Trident's partitionPersist), or folded per key by a
    # ReducerAggregator (``options["key_fields"]``)
    OutputKind(PERSIST, each(apply_persist)),
    # a sink's rows (JSON arrays, as PERSIST) handed to its Committer (``ref``; Storm's committer bolt), unless the
    # sink holds the txid already (``options``: the field names)
    OutputKind(SINK, each(apply_sink)),
    # a stateful step's writes to a KeyValueState, staged in the state's own namespace (txdag.state.kv), so the seal
    # only counts them; every key-value state is prepared, then committed (``ref``: the step, for its hooks)
    OutputKind(KV, _key_values),
    # numeric partials per hash field (Count, Sum; a job's plain DataFrame), added inside Redis with the state's txid
    # rule per key, one script call per page of fields; last, because ``extra`` and the marker are written with them
    OutputKind(SUM, apply_sums),
)}


def check_sinks(ctx: CommitContext, outputs: Outputs) -> None:
    """Every sink's own record against this commit, before anything is written: a sink ahead of the commit, or more
    than one txid behind it, raises StoreWentBackwards while the states still hold the txid before."""
    for name, (spec, _) in outputs.items():
        if spec.kind == SINK:
            sink_position(ctx, name, spec)


def apply_outputs(ctx: CommitContext, outputs: Outputs) -> tuple[int, int, int]:
    """Every kind's applier in the table's order, each with the outputs of its kind; (applied, skipped, bytes of the
    sums' partials) in all."""
    applied = skipped = staged_bytes = 0
    for kind in KINDS.values():
        a, s, b = kind.apply(ctx, {name: out for name, out in outputs.items() if out[0].kind == kind.name})
        applied, skipped, staged_bytes = applied + a, skipped + s, staged_bytes + b
    return applied, skipped, staged_bytes


__all__ = ["COMBINE", "KINDS", "KV", "PERSIST", "SINK", "SUM", "WINDOW", "OutputKind", "apply_outputs", "check_sinks"]

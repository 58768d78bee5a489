"""Run a topology's phases in this process: the demo, the tests and a laptop without Airflow use it.

It does what the Airflow tasks do (coordinate -> process -> commit), with the processing as a Python function
instead of a Spark job, so the same coordinator, staging and commit code is exercised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from numbers import Number

import redis

from txdag.attempt import TransactionAttempt
from txdag.commit import CommitOutcome, commit_transaction
from txdag.coordinator import Busy, Coordinator, Emission, NotReady, Wait
from txdag.errors import CascadeError, StaleAttemptError
from txdag.rejections import record_rejections
from txdag.spouts.base import Record
from txdag.staging import Staging
from txdag.state.base import Key
from txdag.state.map_state import MapStateBase

log = logging.getLogger("txdag.local")
Processor = Callable[[list[Record]], Mapping[str, Mapping[Key, Number]]]


class LocalTopology:
    """One topology's coordinator, processing function and states, run step by step or drained."""

    def __init__(
        self,
        coordinator: Coordinator,
        client: redis.Redis,
        states: Mapping[str, MapStateBase],
        process: Processor,
        *,
        marker_key: str | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.client = client
        self.states = dict(states)
        self.process_fn = process
        self.marker_key = marker_key
        self.staging = Staging(client, coordinator.name)

    def coordinate(self, run_id: str) -> Emission | NotReady | Busy | Wait:
        return self.coordinator.coordinate(run_id)

    def process(self, emission: Emission) -> int:
        """Emit the batch, stage its partials and seal them; any error fails the txid (and later ones)."""
        tx = emission.tx
        if emission.already_committed:
            log.info("topology=%s %s: already committed; nothing to process", self.coordinator.name, tx)
            return 0
        try:
            batch = self.coordinator.spout.emit_batch(tx, emission.metadata)
            record_rejections(self.client, self.coordinator.name, tx, batch.rejections)
            partials = self.process_fn(batch.records)
            self.staging.stage(tx, {name: self.encode(name, deltas) for name, deltas in partials.items()})
        except Exception as exc:
            self.coordinator.fail(tx, f"{type(exc).__name__}: {exc}")
            raise
        self.coordinator.mark_processed(tx)
        log.info(
            "topology=%s %s: processed %s tuples, %s rejected",
            self.coordinator.name,
            tx,
            len(batch),
            len(batch.rejections),
        )
        return len(batch)

    def encode(self, name: str, deltas: Mapping[Key, Number]) -> dict[str, Number]:
        """The state's hash fields of ``deltas``; keys that encode to one field are summed."""
        codec = self.states[name].backing.key_codec  # type: ignore[attr-defined]
        fields: dict[str, Number] = {}
        for key, delta in deltas.items():  # distinct keys may share a field ("@u:#v" + "#w" = "@u" + "#v:#w")
            field = codec.encode(key)
            fields[field] = fields.get(field, 0) + delta  # type: ignore[operator]
        return fields

    def commit(self, tx: TransactionAttempt) -> CommitOutcome:
        """Commit when ``tx`` is next; a failed commit fails the txid, so it and later ones are re-emitted."""
        try:
            return commit_transaction(
                self.coordinator, self.staging, self.client, tx, self.states, marker_key=self.marker_key
            )
        except (CascadeError, StaleAttemptError):
            raise
        except Exception as exc:
            self.coordinator.fail(tx, f"commit failed: {type(exc).__name__}: {exc}")
            raise

    def drain(self, run_prefix: str = "local", max_runs: int = 1_000_000) -> list[CommitOutcome]:
        """Run txids one after the other until the spout has nothing more to read."""
        outcomes = []
        for n in range(max_runs):
            emission = self.coordinate(f"{run_prefix}__{n}")
            if not isinstance(emission, Emission):
                break
            self.process(emission)
            outcomes.append(self.commit(emission.tx))
        return outcomes

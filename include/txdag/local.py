"""Run a topology's phases in this process: the demo, the tests and a laptop without Airflow use it.

It drives the same steps as the Airflow tasks (``txdag.protocol``: coordinate -> process -> commit), with the
processing as a Python function instead of a Spark job. It has no retries: a step that raises fails its txid
(and the later ones) at once, as Airflow's last retry would. A step refused by the protocol (an attempt
replaced meanwhile, a commit on top of a failed txid or before the processing) raises and fails nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from numbers import Number
from operator import add

import redis

from txdag.attempt import TransactionAttempt
from txdag.commit.rejections import clash_rejection, record_rejections
from txdag.errors import CascadeError, StaleAttemptError, StoreWentBackwards
from txdag.protocol import (
    AlreadyCommitted,
    ClientsRuntime,
    CommitStepOutcome,
    Committed,
    CoordinateOutcome,
    Halted,
    JobReport,
    OwnerChanged,
    Refused,
    Superseded,
    Wait,
    steps,
)
from txdag.spouts.base import Record, Rejection
from txdag.state.base import Key
from txdag.state.keys import KeyClashError
from txdag.state.map_state import MapStateBase
from txdag.txid.coordinator import Coordinator, Emission, TransactionStateError

log = logging.getLogger("txdag.local")
Processor = Callable[[list[Record]], Mapping[str, Mapping[Key, Number]]]


CommitOutcome = Committed | AlreadyCommitted | Wait  # what this runner's commit returns: the protocol's own types


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
        self.runtime = ClientsRuntime(coordinator, client, dict(states), marker_key=marker_key or "")
        self.coordinator, self.client, self.states = coordinator, client, self.runtime.states
        self.staging = self.runtime.staging
        self.process_fn = process
        self.marker_key = self.runtime.marker_key

    def coordinate(self, run_id: str) -> CoordinateOutcome:
        """The run's emission, or why there is none; a store behind ZooKeeper raises StoreWentBackwards."""
        outcome = steps.coordinate(self.runtime, run_id)
        if isinstance(outcome, Halted):
            raise StoreWentBackwards(outcome.reason)
        return outcome

    def process(self, emission: Emission, run_id: str | None = None) -> int:
        """Process the batch (claim, stage, seal, mark processed); returns its tuple count. Raises
        StaleAttemptError when the attempt was replaced meanwhile; any other error fails the txid."""
        tx = emission.tx
        run_id = run_id or self._run_of(tx)
        try:
            outcome = steps.process(self.runtime, run_id, emission, self.run_job, owner=f"{run_id} local")
        except Exception as exc:
            steps.fail(self.runtime, run_id, f"{type(exc).__name__}: {exc}")
            raise
        if isinstance(outcome, Superseded):
            raise StaleAttemptError(outcome.reason)
        if isinstance(outcome, Wait | OwnerChanged):  # neither key-value states nor owners here: for completeness
            raise TransactionStateError(outcome.reason)
        if isinstance(outcome, AlreadyCommitted):
            log.info("topology=%s %s: already committed; nothing to process", self.coordinator.name, tx)
            return 0
        return outcome.tuples or 0

    def run_job(self, emission: Emission) -> JobReport:
        """The job of this runner: emit the batch, record its rejections, run the function, stage and seal. A key
        its state's codec refuses (KeyClashError) is a rejection too, recorded before the staging."""
        tx = emission.tx
        batch = self.coordinator.spout.emit_batch(tx, emission.metadata)
        record_rejections(self.client, self.coordinator.name, tx, batch.rejections)
        partials = self.process_fn(batch.records)
        clashes: list[Rejection] = []
        staged = {name: self.encode(name, deltas, tx.txid, clashes) for name, deltas in partials.items()}
        record_rejections(self.client, self.coordinator.name, tx, clashes)
        self.staging.stage(tx, staged)
        log.info("topology=%s %s: processed %s tuples, %s rejected, %s keys rejected", self.coordinator.name, tx,
                 len(batch), len(batch.rejections), len(clashes))
        return JobReport(len(batch), len(batch.rejections))

    def encode(self, name: str, deltas: Mapping[Key, Number], txid: int, clashes: list[Rejection]) -> dict[str, Number]:
        """The state's hash fields of ``deltas``; keys that encode to one field (one key given as
        ``("a",)`` and as ``"a"``) are summed. A key the codec refuses is left out and added to ``clashes``."""
        codec = self.states[name].key_codec
        fields: dict[str, Number] = {}
        for key, delta in deltas.items():
            try:
                field = codec.encode(key)
            except KeyClashError as exc:
                clashes.append(clash_rejection(name, txid, exc))
                continue
            # numbers.Number declares no "+"; the numbers a processor returns (int, float, Decimal) all have one
            fields[field] = add(fields[field], delta) if field in fields else delta
        return fields

    def commit(self, tx: TransactionAttempt) -> CommitOutcome:
        """Commit when ``tx`` is next: Committed, AlreadyCommitted, or Wait (for the txid before). A refusal is
        raised as its error (CascadeError, StaleAttemptError, StoreWentBackwards, TransactionStateError: never
        processed), failing nothing; any other error fails the txid, so it and later ones are re-emitted."""
        try:
            outcome = steps.commit(self.runtime, tx)
        except Exception as exc:
            steps.fail(self.runtime, self._run_of(tx), f"commit failed: {type(exc).__name__}: {exc}")
            raise
        return raise_refusal(outcome)

    def drain(self, run_prefix: str = "local", max_runs: int = 1_000_000) -> list[CommitOutcome]:
        """Run txids one after the other until the spout has nothing more to read (or cannot be read)."""
        outcomes = []
        for n in range(max_runs):
            emission = self.coordinate(f"{run_prefix}__{n}")
            if not isinstance(emission, Emission):
                break
            self.process(emission, f"{run_prefix}__{n}")
            outcomes.append(self.commit(emission.tx))
        return outcomes

    def _run_of(self, tx: TransactionAttempt) -> str:
        got = self.coordinator.store.read_txid(tx.txid)
        if got is None:
            raise TransactionStateError(f"topology {self.coordinator.name!r}: {tx} has no record in ZooKeeper: "
                                        "coordinate a run first")
        return got[0].run_id


def raise_refusal(outcome: CommitStepOutcome) -> CommitOutcome:
    """The commit step's outcome as this runner returns it: itself, or the error of a refusal raised."""
    if isinstance(outcome, Committed | AlreadyCommitted | Wait):
        return outcome
    if isinstance(outcome, Superseded):
        raise StaleAttemptError(outcome.reason)
    if isinstance(outcome, Halted):
        raise StoreWentBackwards(outcome.reason)
    if isinstance(outcome, Refused) and outcome.failed_txid is not None:
        raise CascadeError(outcome.reason, outcome.failed_txid)
    raise TransactionStateError(outcome.reason)

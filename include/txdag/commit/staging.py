"""The staging area: a batch's partial results, keyed by (txid, attempt), in Redis until the commit applies them.

Its keys (the seal, one hash of partials per state, the claim) are built by ``txdag.state.staging_layout``;
how each state's partials are decoded is its output kind's (``txdag.commit.kinds``).
Partials are written with HSET, not HINCRBY: the processing step aggregates per key first, so every key is
written by exactly one Spark task, and a retried task rewrites the same value instead of adding it twice.
The seal is written last, after the job succeeded; the commit refuses staging without a seal or with fewer
fields than sealed (a Redis restart without persistence lost it), so a lost partial fails loudly instead of
being committed as zero. Keying by attempt keeps a stale attempt's partials from passing for the current one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from numbers import Number
from typing import Any

import redis

from txdag.attempt import TransactionAttempt
from txdag.commit.kinds import KINDS
from txdag.commit.outputs import SUM, OutputSpec, decode_seal, encode_seal
from txdag.errors import BatchReadError
from txdag.faults import crash_if_requested
from txdag.redisio import redis_errors
from txdag.state.staging_layout import claim_key, stage_key
from txdag.state.staging_layout import keys as staging_keys

WRITE_CHUNK = 5000


class Staging:
    """Writes, seals, reads and deletes the staged partials of one topology."""

    def __init__(self, client: redis.Redis, topology: str) -> None:
        self.client = client
        self.topology = topology

    def claim(self, tx: TransactionAttempt, owner: str) -> str:
        """Claim ``tx`` for one processing try (SET NX); returns the owner holding it, ``owner`` if it got it.

        A second try that finds the attempt claimed by another try processes a fresh attempt instead, so two
        jobs (a retry and a job its dead predecessor left running) never write the same attempt's staging."""
        key = claim_key(self.topology, tx)
        with redis_errors(self.client, f"claiming {tx}", topology=self.topology, keys=[key]):
            if self.client.set(key, owner, nx=True):
                return owner
            held = self.client.get(key)
        return held.decode() if held is not None else self.claim(tx, owner)

    def write(self, tx: TransactionAttempt, state: str, partials: Iterable[tuple[str, Number]]) -> int:
        """HSET partials in pipelined chunks (one round trip per chunk); returns how many were written."""
        key, written = stage_key(self.topology, tx, state), 0
        batch: dict[str, str] = {}
        with redis_errors(self.client, f"staging {tx}", topology=self.topology, keys=[key]):
            for field, value in partials:
                batch[field] = str(value)
                if len(batch) >= WRITE_CHUNK:
                    written += self._flush(key, batch)
            written += self._flush(key, batch)
        return written

    def _flush(self, key: str, batch: dict[str, str]) -> int:
        if batch:
            self.client.hset(key, mapping=batch)
        n = len(batch)
        batch.clear()
        return n

    def seal(self, tx: TransactionAttempt, outputs: Mapping[str, int | OutputSpec]) -> None:
        """Record that the attempt's staging is complete: per state its output (a bare number is a ``sum``
        output of that many fields)."""
        key = stage_key(self.topology, tx)
        specs = {s: o if isinstance(o, OutputSpec) else OutputSpec(SUM, o) for s, o in outputs.items()}
        with redis_errors(self.client, f"sealing the staging of {tx}", topology=self.topology, keys=[key]):
            self.client.hset(key, mapping=encode_seal(specs, KINDS))

    def stage(self, tx: TransactionAttempt, partials: Mapping[str, Mapping[str, Number]]) -> None:
        """Write every state's encoded partials, then seal; the ``process`` fault point is after the first state."""
        for i, (state, fields) in enumerate(partials.items()):
            self.write(tx, state, fields.items())
            if i == 0:
                crash_if_requested("process", self.topology, tx)
        self.seal(tx, {state: len(fields) for state, fields in partials.items()})

    def read(self, tx: TransactionAttempt) -> dict[str, dict[str, Any]]:
        """The sealed values per state (see read_outputs)."""
        return {state: values for state, (_, values) in self.read_outputs(tx).items()}

    def read_outputs(self, tx: TransactionAttempt, *, commit: bool = False) -> dict[str, tuple[OutputSpec, Any]]:
        """Per state its sealed output and values, decoded as its kind says (txdag.commit.kinds); for the
        ``commit``, values it applies inside Redis stay there: their key is read, and only their number checked.
        BatchReadError when the seal is missing or a state lost fields."""
        where = f"{tx} of topology {self.topology!r}"
        seal_key = stage_key(self.topology, tx)
        with redis_errors(self.client, f"reading the staging of {tx}", topology=self.topology, keys=[seal_key]):
            raw = {k.decode(): v.decode() for k, v in self.client.hgetall(seal_key).items()}
            seal = decode_seal(raw, where, KINDS)
            if seal is None:
                raise BatchReadError(
                    f"no sealed staging for {where} in Redis (key {seal_key}): the processing "
                    f"step did not finish, or Redis lost it; replay txid {tx.txid} to process it again"
                )
            result: dict[str, tuple[OutputSpec, Any]] = {}
            counted: dict[str, int] = {}
            for state, spec in seal.items():
                kind = KINDS[spec.kind]
                if not kind.in_staging:
                    result[state] = (spec, {})
                elif kind.in_redis and commit:
                    result[state] = (spec, stage_key(self.topology, tx, state))
                    counted[state] = int(self.client.hlen(result[state][1]))
                else:
                    result[state] = (spec, self._read_state(tx, state, kind.decode))
                    counted[state] = len(result[state][1])
        for state, found in counted.items():
            expected = result[state][0].count
            if found != expected:
                raise BatchReadError(
                    f"staging of {where} for state {state!r} holds {found} of {expected} partials "
                    f"(Redis lost some); replay txid {tx.txid} to process it again"
                )
        return result

    def _read_state(self, tx: TransactionAttempt, state: str, decode: Callable[[bytes], Any]) -> dict[str, Any]:
        key = stage_key(self.topology, tx, state)
        return {f.decode(): decode(v) for f, v in self.client.hscan_iter(key, count=WRITE_CHUNK)}

    def delete(self, txid: int, attempts: Iterable[int], states: Iterable[str]) -> int:
        """Delete the staging of ``txid``'s attempts (sealed or not) in one DEL; keys already gone are fine."""
        names = list(states)
        keys = [k for a in attempts for k in staging_keys(self.topology, TransactionAttempt(txid, a), names)]
        if not keys:
            return 0
        with redis_errors(self.client, f"cleaning the staging of txid {txid}", topology=self.topology, keys=keys):
            return int(self.client.delete(*keys))


"""The staging area: a batch's partial results, keyed by (txid, attempt), in Redis until the commit applies them.

Its keys (the seal, one hash of partials per state, the claim) are built by ``txdag.staging.layout``;
how each state's partials are decoded is its output kind's format (``txdag.staging.format``).
Partials are written with HSET, not HINCRBY: the processing step aggregates per key first, so every key is
written by exactly one Spark task, and a retried task rewrites the same value instead of adding it twice.
The seal is written last, after the job succeeded; the commit refuses staging without a seal or with fewer
fields than sealed (a Redis restart without persistence lost it), so a lost partial fails loudly instead of
being committed as zero. Keying by attempt keeps a stale attempt's partials from passing for the current one.

Fencing: each claim raises the txid's fence (``layout.fence_key``) to its attempt, and every staging
write (a partial, a seal, a claim) checks it in the same script: a try that was given up on and woke up later
(a paused process, a job its dead task left running) writes nothing once a newer attempt of its txid is claimed.
The fence is not part of the commit's cleanup: it expires FENCE_TTL after the txid's last claim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from numbers import Number
from typing import Any

import redis

from txdag.attempt import TransactionAttempt
from txdag.errors import BatchReadError, StaleAttemptError
from txdag.faults import crash_if_requested
from txdag.luascripts import declare, run
from txdag.redisio import redis_errors
from txdag.staging.format import FORMATS, SUM, OutputSpec, decode_seal, encode_seal
from txdag.staging.layout import claim_key, fence_key, stage_key
from txdag.staging.layout import keys as staging_keys

WRITE_CHUNK = 5000
FENCE_TTL = 7 * 24 * 3600  # seconds a txid's fence is kept after its last claim: longer than any try is left paused


def _stale(attempt: str, fence: str) -> StaleAttemptError:
    return StaleAttemptError(f"attempt {attempt} is stale: attempt {fence} of its txid was claimed since (a retry "
                             f"took over); this write is refused and nothing of attempt {attempt} is committed")


STALE = {"TXDAG_STALE_ATTEMPT": _stale}

# KEYS[1]: the attempt's claim; KEYS[2]: the txid's fence. ARGV[1]: the owner (a processing try); ARGV[2]: the
# attempt; ARGV[3]: the fence's time to live. Returns the owner holding the claim; raises the fence to the attempt
# when this call took it (SET with EX: a topology's Redis user needs no EXPIRE).
CLAIM_SCRIPT = """
local fence = tonumber(redis.call('GET', KEYS[2]) or '0')
local attempt = tonumber(ARGV[2])
if fence > attempt then error({err = 'TXDAG_STALE_ATTEMPT ' .. ARGV[2] .. ' ' .. fence}) end
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  if fence < attempt then redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3]) end
  return ARGV[1]
end
return redis.call('GET', KEYS[1])
"""
CLAIM = declare("staging.claim", CLAIM_SCRIPT, STALE)

# KEYS[1]: the txid's fence; KEYS[2]: a staging hash. ARGV[1]: the writing attempt; ARGV[2..]: field, value, ...
# HSETs of 1000 pairs each (unpack has a limit); returns the number of fields given.
FENCED_HSET_SCRIPT = """
local fence = tonumber(redis.call('GET', KEYS[1]) or '0')
if fence > tonumber(ARGV[1]) then error({err = 'TXDAG_STALE_ATTEMPT ' .. ARGV[1] .. ' ' .. fence}) end
for i = 2, #ARGV, 2000 do
  redis.call('HSET', KEYS[2], unpack(ARGV, i, math.min(i + 1999, #ARGV)))
end
return (#ARGV - 1) / 2
"""
FENCED_HSET = declare("staging.fenced_hset", FENCED_HSET_SCRIPT, STALE)


def fenced_hset(client: redis.Redis, topology: str, tx: TransactionAttempt, key: str, mapping: Mapping[str, str]
                ) -> int:
    """HSET ``mapping`` into ``key``, a staging hash of ``tx``, unless a newer attempt of its txid was claimed
    (StaleAttemptError); returns how many fields were written."""
    if not mapping:
        return 0
    args = [tx.attempt, *(x for pair in mapping.items() for x in pair)]
    return int(run(client, FENCED_HSET, [fence_key(topology, tx.txid), key], args,
                   where=f"topology {topology!r} {tx}"))


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
            held = run(self.client, CLAIM, [key, fence_key(self.topology, tx.txid)], [owner, tx.attempt, FENCE_TTL],
                       where=f"topology {self.topology!r} claiming {tx}")
        return held.decode() if isinstance(held, bytes) else str(held)

    def holder(self, tx: TransactionAttempt) -> str | None:
        """The processing try that claimed ``tx`` (None: nobody yet)."""
        key = claim_key(self.topology, tx)
        with redis_errors(self.client, f"reading the claim of {tx}", topology=self.topology, keys=[key]):
            held = self.client.get(key)
        return held.decode() if isinstance(held, bytes) else held

    def write(self, tx: TransactionAttempt, state: str, partials: Iterable[tuple[str, Number]]) -> int:
        """HSET partials in pipelined chunks (one round trip per chunk); returns how many were written."""
        key, written = stage_key(self.topology, tx, state), 0
        batch: dict[str, str] = {}
        with redis_errors(self.client, f"staging {tx}", topology=self.topology, keys=[key]):
            for field, value in partials:
                batch[field] = str(value)
                if len(batch) >= WRITE_CHUNK:
                    written += self._flush(tx, key, batch)
            written += self._flush(tx, key, batch)
        return written

    def _flush(self, tx: TransactionAttempt, key: str, batch: dict[str, str]) -> int:
        n = fenced_hset(self.client, self.topology, tx, key, batch)
        batch.clear()
        return n

    def seal(self, tx: TransactionAttempt, outputs: Mapping[str, int | OutputSpec]) -> None:
        """Record that the attempt's staging is complete: per state its output (a bare number is a ``sum``
        output of that many fields)."""
        key = stage_key(self.topology, tx)
        specs = {s: o if isinstance(o, OutputSpec) else OutputSpec(SUM, o) for s, o in outputs.items()}
        with redis_errors(self.client, f"sealing the staging of {tx}", topology=self.topology, keys=[key]):
            fenced_hset(self.client, self.topology, tx, key, encode_seal(specs, FORMATS))

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
        """Per state its sealed output and values, decoded as its kind's format says; for the
        ``commit``, values it applies inside Redis stay there: their key is read, and only their number checked.
        BatchReadError when the seal is missing or a state lost fields."""
        return self.read_staged(tx, commit=commit)[0]

    def read_staged(self, tx: TransactionAttempt, *, commit: bool = False
                    ) -> tuple[dict[str, tuple[OutputSpec, Any]], int]:
        """:meth:`read_outputs`, and the bytes of the fields and values it read as staged (those left in Redis for
        the commit are counted by the script that applies them: txdag.state.redis_commit)."""
        where = f"{tx} of topology {self.topology!r}"
        seal_key = stage_key(self.topology, tx)
        with redis_errors(self.client, f"reading the staging of {tx}", topology=self.topology, keys=[seal_key]):
            raw = {k.decode(): v.decode() for k, v in self.client.hgetall(seal_key).items()}
            seal = decode_seal(raw, where, FORMATS)
            if seal is None:
                raise BatchReadError(
                    f"no sealed staging for {where} in Redis (key {seal_key}): the processing "
                    f"step did not finish, or Redis lost it; replay txid {tx.txid} to process it again"
                )
            keys = {state: stage_key(self.topology, tx, state) for state in seal}
            result: dict[str, tuple[OutputSpec, Any]] = {}
            counted: dict[str, int] = {}
            read_bytes = 0
            for state, spec in seal.items():
                kind = FORMATS[spec.kind]
                if not kind.in_staging:
                    result[state] = (spec, {})
                elif kind.in_redis and commit:
                    result[state] = (spec, keys[state])
                    counted[state] = int(self.client.hlen(keys[state]))
                else:
                    values: dict[str, Any] = {}
                    for f, v in self.client.hscan_iter(keys[state], count=WRITE_CHUNK):
                        values[f.decode()], read_bytes = kind.decode(v), read_bytes + len(f) + len(v)
                    result[state], counted[state] = (spec, values), len(values)
        for state, found in counted.items():
            expected = result[state][0].count
            if found != expected:
                raise BatchReadError(
                    f"staging of {where} for state {state!r} holds {found} of {expected} partials "
                    f"(Redis lost some); replay txid {tx.txid} to process it again"
                )
        return result, read_bytes

    def delete(self, txid: int, attempts: Iterable[int], states: Iterable[str]) -> int:
        """Delete the staging of ``txid``'s attempts (sealed or not) in one DEL; keys already gone are fine."""
        names = list(states)
        keys = [k for a in attempts for k in staging_keys(self.topology, TransactionAttempt(txid, a), names)]
        if not keys:
            return 0
        with redis_errors(self.client, f"cleaning the staging of txid {txid}", topology=self.topology, keys=keys):
            return int(self.client.delete(*keys))


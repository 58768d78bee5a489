"""The window store in Redis: each committed txid's window rows, the windows each txid fired, their results.

Layout (``{topology}`` is the hash tag of the topology's staging too, so one script reaches every key):

    txdag:window:{topology}:<name>                hash    v, spec (JSON), progress (JSON), txid (last appended)
    txdag:window:{topology}:<name>:blocks         hash    txid -> the block (JSON: ordinal, first row, count, max ts)
    txdag:window:{topology}:<name>:rows:<txid>    string  the txid's kept rows, JSON [[ts, field, ...], ...]
    txdag:window:{topology}:<name>:fired:<txid>   string  the ids of the windows the txid fired (JSON list)
    txdag:window:{topology}:<name>:result:<id>    string  a fired window: JSON {id, start, end, txid, rows}

Appending a txid happens at its commit, in txid order, so the blocks are final once written. The first
evaluation of a txid writes its block, its fired windows (seed 001's "in-process trigger key") and their
results in one script call; a retried commit of the txid finds the window's txid already at it and returns the
recorded results, so it fires exactly the windows it fired the first time. ``keys``/``acl_patterns``: the shape of
txdag.keyspace.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import redis

from txdag.errors import ConfigError, FormatVersionError
from txdag.keyspace import below
from txdag.luascripts import declare, run
from txdag.redisio import redis_errors
from txdag.windows.rules import Block, Progress, WindowSpec, fires_when_empty, spec_to_dict

FORMAT_VERSION = "1"
KEEP_RESULTS = 100  # fired windows (and txids' fired lists) kept for an operator after they are superseded

Row = list[Any]  # [ts, field values...]
Evaluate = Callable[[list[Row]], list[list[Any]]]

# KEYS[1]: the window's hash; then the keys to set (ARGV pairs follow), then the keys to delete.
# ARGV[1]: txid, ARGV[2]: number of keys to set, ARGV[3]: the blocks hash field values as JSON object,
#   ARGV[4]: blocks to forget (JSON list), then the window hash's fields (JSON object), then one value per key set.
# Writes nothing (returns 0) when the window already holds this txid or a later one: a retried commit.
APPEND_SCRIPT = """
local window = KEYS[1]
local txid = tonumber(ARGV[1])
local nset = tonumber(ARGV[2])
local last = tonumber(redis.call('HGET', window, 'txid') or '0')
if last >= txid then return 0 end
local blocks = window .. ':blocks'
for field, value in pairs(cjson.decode(ARGV[3])) do redis.call('HSET', blocks, field, value) end
for _, field in ipairs(cjson.decode(ARGV[4])) do redis.call('HDEL', blocks, field) end
for field, value in pairs(cjson.decode(ARGV[5])) do redis.call('HSET', window, field, value) end
for i = 1, nset do redis.call('SET', KEYS[1 + i], ARGV[5 + i]) end
for i = 2 + nset, #KEYS do redis.call('DEL', KEYS[i]) end
return 1
"""
APPEND = declare("windows.append", APPEND_SCRIPT)


def _base(topology: str) -> str:
    return f"txdag:window:{{{topology}}}"


def window_key(topology: str, name: str) -> str:
    return f"{_base(topology)}:{name}"


def blocks_key(window: str) -> str:
    return f"{window}:blocks"


def rows_key(window: str, txid: int) -> str:
    return f"{window}:rows:{txid}"


def fired_key(window: str, txid: int) -> str:
    return f"{window}:fired:{txid}"


def result_key(window: str, window_id: int) -> str:
    return f"{window}:result:{window_id}"


def keys(topology: str, name: str, txid: int, window_id: int) -> list[str]:
    """Every key of window ``name``, with txid ``txid``'s rows and fired list and fired window ``window_id``."""
    window = window_key(topology, name)
    return [window, blocks_key(window), rows_key(window, txid), fired_key(window, txid), result_key(window, window_id)]


def acl_patterns(topology: str) -> list[str]:
    return [below(_base(topology))]


@dataclass(frozen=True)
class Fired:
    """One fired window and its result rows (``[group keys..., aggregate values...]``)."""

    id: int
    start: float
    end: float
    txid: int
    rows: list[list[Any]]

    def to_json(self) -> str:
        return _dumps(asdict(self))


class WindowStore:
    """One window of one topology."""

    def __init__(self, client: redis.Redis, topology: str, name: str, spec: WindowSpec) -> None:
        self.client = client
        self.topology = topology
        self.name = name
        self.spec = spec
        self.key = window_key(topology, name)

    def commit(self, txid: int, rows: Sequence[Row], evaluate: Evaluate) -> tuple[list[Fired], list[int]]:
        """Append ``txid``'s rows (in order), fire the windows they close, store and return the fired windows,
        and the indices of ``rows`` that came late; a retry returns what the first evaluation fired."""
        with self._errors(f"appending txid {txid}"):
            meta = {k.decode(): v.decode() for k, v in self.client.hgetall(self.key).items()}
        self._check(meta)
        if int(meta.get("txid", 0)) >= txid:
            return self.fired(txid), []
        progress = Progress(**json.loads(meta["progress"])) if meta else Progress()
        advance = self.spec.advance(progress, txid, [row[0] for row in rows])
        kept = list(rows) if advance.kept is None else [rows[i] for i in advance.kept]
        block = Block(txid, progress.blocks + 1, progress.rows + 1, len(kept),
                      max((r[0] for r in kept if r[0] is not None), default=None))
        blocks = {**self._blocks(), txid: block}
        fired = self._fire(txid, advance.closed, progress.fired, blocks, {txid: kept}, evaluate)
        after = Progress(**{**asdict(advance.progress), "fired": progress.fired + len(fired)})
        dropped = [t for t, b in blocks.items() if not self.spec.needed(b, after)]
        sets = {rows_key(self.key, txid): _dumps(kept), fired_key(self.key, txid): _dumps([f.id for f in fired]),
                **{result_key(self.key, f.id): f.to_json() for f in fired}}
        deletes = [rows_key(self.key, t) for t in dropped] + [fired_key(self.key, txid - KEEP_RESULTS)]
        deletes += [result_key(self.key, f.id - KEEP_RESULTS) for f in fired if f.id > KEEP_RESULTS]
        window = {"v": FORMAT_VERSION, "spec": _dumps(spec_to_dict(self.spec)), "progress": _dumps(asdict(after)),
                  "txid": str(txid)}
        with self._errors(f"appending txid {txid}"):
            run(self.client, APPEND, [self.key, *sets, *deletes], [
                txid, len(sets), _dumps({str(txid): _dumps(asdict(block))}), _dumps([str(t) for t in dropped]),
                _dumps(window), *sets.values()])
        return fired, advance.late

    def fired(self, txid: int) -> list[Fired]:
        """The windows ``txid`` fired, as recorded when it was first committed."""
        with self._errors(f"reading the windows txid {txid} fired"):
            ids = self.client.get(fired_key(self.key, txid))
            if ids is None:
                return []
            results = self.client.mget([result_key(self.key, i) for i in json.loads(ids)]) if json.loads(ids) else []
        return [Fired(**json.loads(r)) for r in results if r is not None]

    def latest(self) -> Fired | None:
        """The last fired window still kept."""
        with self._errors("reading the last fired window"):
            progress = self.client.hget(self.key, "progress")
            fired = json.loads(progress)["fired"] if progress else 0
            raw = self.client.get(result_key(self.key, fired)) if fired else None
        return Fired(**json.loads(raw)) if raw else None

    def _fire(self, txid: int, closed: Sequence[tuple[float, float]], fired_before: int, blocks: dict[int, Block],
              new_rows: dict[int, list[Row]], evaluate: Evaluate) -> list[Fired]:
        if not closed:
            return []
        rows = {**self._rows([t for t in blocks if t not in new_rows]), **new_rows}
        fired: list[Fired] = []
        for start, end in closed:
            covered = [row for t in sorted(blocks) for i, row in enumerate(rows.get(t, []))
                       if self.spec.covers((start, end), blocks[t], i, row[0])]
            if covered or fires_when_empty(self.spec):
                fired.append(Fired(fired_before + len(fired) + 1, start, end, txid, evaluate(covered)))
        return fired

    def _blocks(self) -> dict[int, Block]:
        with self._errors("reading the window's blocks"):
            raw = self.client.hgetall(blocks_key(self.key))
        return {int(t): Block(**json.loads(b)) for t, b in raw.items()}

    def _rows(self, txids: Sequence[int]) -> dict[int, list[Row]]:
        if not txids:
            return {}
        with self._errors("reading the window's rows"):
            raw = self.client.mget([rows_key(self.key, t) for t in txids])
        missing = [t for t, r in zip(txids, raw) if r is None]
        if missing:
            raise FormatVersionError(f"window {self.name!r} of topology {self.topology!r} lost the rows of txids "
                                     f"{missing} (Redis lost them?); its windows cannot be evaluated: delete the "
                                     f"window's keys ({self.key}*) to start it over")
        return {t: json.loads(r) for t, r in zip(txids, raw)}

    def _check(self, meta: dict[str, str]) -> None:
        if not meta:
            return
        if meta.get("v") != FORMAT_VERSION:
            raise FormatVersionError(f"window store {self.key} has format version {meta.get('v')!r}; this txdag "
                                     f"reads {FORMAT_VERSION}")
        stored, wanted = json.loads(meta["spec"]), spec_to_dict(self.spec)
        if stored != wanted:
            raise ConfigError(f"window {self.name!r} of topology {self.topology!r} holds rows of window {stored}, "
                              f"and the job now asks for {wanted}: give the new window another state name, or delete "
                              f"the old window's keys ({self.key}*) to start it over")

    def _errors(self, doing: str) -> Any:
        return redis_errors(self.client, f"{doing} in window {self.name!r}", topology=self.topology, keys=[self.key])


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

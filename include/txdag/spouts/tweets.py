"""Seed 000's TweetsTransactionalSpout: tweets at Redis keys ``<prefix>1 .. <prefix>N`` with the RQ class's cursors.

``<prefix>NEXT_WRITE`` holds the id the next tweet will be written at and ``<prefix>NEXT_READ`` where the very
first txid starts (1 when absent). Batch metadata is ``{"v": 1, "from": id, "quantity": n}``; a replay reads the
same keys again, so the batch is the same as long as the keys are kept. A hole an operator accepted (``txdag
accept-missing``) adds ``"missing": {"<id>": "<when accepted>"}``: every replay then reads the batch without those
ids and emits a Rejection for each, so the batch stays the same and the hole stays counted (the metadata's rules:
``txdag.spouts.tweet_batches``). ``keys``/``acl_patterns``: the shape of txdag.keyspace (the owner is the prefix;
a topology's user may only read them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis

from txdag.attempt import TransactionAttempt
from txdag.errors import (
    BatchReadError,
    ConfigError,
    FormatVersionError,
    TxdagError,
    source_went_backwards,
    start_over,
)
from txdag.keyspace import glob_escape
from txdag.luascripts import declare, run
from txdag.redisio import NON_LOCAL_KEY, describe, from_portable, is_cluster, is_refusal, portable, redis_errors
from txdag.spouts.base import (
    READ_SCHEMA,
    Batch,
    Metadata,
    Record,
    Rejection,
    SpoutKind,
    TransactionalSpout,
    read_rows,
)
from txdag.spouts.tweet_batches import FORMAT_VERSION as FORMAT_VERSION
from txdag.spouts.tweet_batches import accepted_missing as accepted_missing
from txdag.spouts.tweet_batches import check_metadata, missing_in, missing_reason, next_from, plan_batch, with_missing

MGET_CHUNK = 10_000  # keys per MGET: bounds one reply's size; all chunks still go in one round trip
READ_TASK = 50_000  # ids per Spark task of ``read``: its MGETs in one round trip (bench/batch_read.py chose it)
CONNECTION_ERRORS = (redis.ConnectionError, redis.TimeoutError)


def tweet_key(prefix: str, tweet_id: int) -> str:
    return f"{prefix}{tweet_id}"


def next_read_key(prefix: str) -> str:
    return f"{prefix}NEXT_READ"


def next_write_key(prefix: str) -> str:
    return f"{prefix}NEXT_WRITE"


def keys(prefix: str, tweet_ids: Iterable[int]) -> list[str]:
    """The cursors and the tweets ``tweet_ids``."""
    return [next_read_key(prefix), next_write_key(prefix), *(tweet_key(prefix, i) for i in tweet_ids)]


def acl_patterns(prefix: str) -> list[str]:
    """Ids are decimal, written by APPEND_TWEETS_LUA as ``prefix .. id``."""
    return [f"{glob_escape(prefix)}[0-9]*", glob_escape(next_write_key(prefix)), glob_escape(next_read_key(prefix))]


def require_bytes_client(client: Any, what: str) -> None:
    """Refuse ``decode_responses=True``: one non-UTF-8 value would then fail the whole reply, not one record."""
    if is_cluster(client):
        raise ConfigError(f"{what} reads a single Redis, not a Redis Cluster: keep the source on a Redis server of "
                          f"its own (a connection without \"cluster\": true, the source's redis_conn_id); the "
                          f"states may stay on the cluster")
    if not isinstance(client, redis.Redis):
        raise ConfigError(f"{what} needs a redis.Redis client, got {type(client).__name__}")
    if client.connection_pool.connection_kwargs.get("decode_responses"):
        raise ConfigError(
            f"{what}: create the Redis client without decode_responses=True; the spout decodes each value "
            f"itself so that a value that is not UTF-8 becomes one rejection instead of a failed batch"
        )


def _cursor(
    raw: bytes | None, key: str, default: int, kind: str = "string", topology: str | None = None
) -> int:
    """A cursor's tweet id; ``kind`` is the key's Redis TYPE, so a hash or list there is not taken for absent."""
    where = f"topology {topology!r}: " if topology is not None else ""
    if raw is None and kind not in ("none", "string"):
        raise ConfigError(
            f"{where}Redis key {key!r} holds a Redis {kind}, not a tweet id; DEL it and SET the integer id"
        )
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(
            f"{where}Redis key {key!r} must hold a tweet id (an integer >= 1), got {raw!r}; fix it with SET"
        )
    return value


class TweetsTransactionalSpout(TransactionalSpout):
    """A transactional spout over seed 000's tweets layout; one MGET round trip per batch."""

    kind: SpoutKind = SpoutKind.TRANSACTIONAL

    def __init__(
        self,
        client: redis.Redis,
        *,
        prefix: str = "",
        max_transaction_size: int = 1000,
        topology: str = "tweets",
    ) -> None:
        require_bytes_client(client, f"TweetsTransactionalSpout of topology {topology!r}")
        if (
            isinstance(max_transaction_size, bool)
            or not isinstance(max_transaction_size, int)
            or max_transaction_size < 1
        ):
            raise ConfigError(f"max_transaction_size must be an int >= 1, got {max_transaction_size!r}")
        self.client = client
        self.prefix = prefix
        self.max_transaction_size = max_transaction_size
        self.topology = topology

    def key(self, tweet_id: int) -> str:
        return tweet_key(self.prefix, tweet_id)

    def _cursors(self) -> tuple[int, int]:
        """(NEXT_READ, NEXT_WRITE) in one MGET; NEXT_WRITE absent means nothing was written (next id 1)."""
        read_key, write_key = next_read_key(self.prefix), next_write_key(self.prefix)
        with redis_errors(self.client, "reading the tweet cursors", topology=self.topology, keys=[read_key, write_key]):
            pipe = self.client.pipeline(transaction=False)
            pipe.mget([read_key, write_key])
            pipe.type(read_key)
            pipe.type(write_key)
            (raw_read, raw_write), read_type, write_type = pipe.execute()
        return (
            _cursor(raw_read, read_key, 1, read_type.decode(), self.topology),
            _cursor(raw_write, write_key, 1, write_type.decode(), self.topology),
        )

    def lag(self, prev_metadata: Metadata | None) -> int:
        """Tweets in the source that no batch up to ``prev_metadata`` covers (for the operator's UI). NEXT_WRITE
        below the end of the last batch is a source that went backwards: raises StoreWentBackwards."""
        next_read, next_write = self._cursors()
        with self._metadata_errors("previous txid's"):
            start = next_from(prev_metadata, next_read)
        if next_write < start:
            raise source_went_backwards(
                self.topology, f"Redis {describe(self.client)} key {self.prefix}NEXT_WRITE is {next_write}, but the "
                f"last emitted batch ended at tweet {start - 1} (NEXT_WRITE must be past it)")
        return next_write - start

    def is_ready(self, prev_metadata: Metadata | None) -> bool:
        return self.lag(prev_metadata) > 0

    def initialize_transaction(self, txid: int, prev_metadata: Metadata | None) -> Metadata:
        next_read, next_write = self._cursors()
        with self._metadata_errors(f"txid {txid - 1}'s"):
            return plan_batch(prev_metadata, next_read, next_write, self.max_transaction_size)

    def batch_size(self, metadata: Metadata) -> int:
        return check_metadata(metadata)[1]

    def emit_batch(self, tx: TransactionAttempt, metadata: Metadata) -> Batch:
        """Read exactly keys ``from .. from+quantity-1``; a missing key halts, a bad value is one rejection."""
        ids = self._batch_ids(tx, metadata)
        records, rejections = read_tweets(self.client, ids, ids.start, ids.end)
        return Batch(tx, records, rejections)

    def read(self, spark: Any, tx: TransactionAttempt, metadata: Metadata) -> Any:
        """The batch read on the executors: one Spark task per READ_TASK ids, each one round trip (``read_tweets``, as
        ``emit_batch`` reads them), its rejections as rows with a ``rejected`` reason; the executors must reach
        the source's Redis. The driver holds only the metadata."""
        ids = self._batch_ids(tx, metadata)
        tasks = max(1, -(-ids.quantity // READ_TASK))
        reader = ReadOnExecutor(portable(self.client), ids, READ_TASK)
        return spark.range(0, tasks, 1, tasks).mapInArrow(reader, READ_SCHEMA)

    def _batch_ids(self, tx: TransactionAttempt, metadata: Metadata) -> BatchIds:
        with self._metadata_errors(str(tx)):
            start, quantity = check_metadata(metadata)
            accepted = missing_in(metadata, start, quantity)
        return BatchIds(self.prefix, self.topology, tx, start, quantity, accepted)

    def missing_ids(self, metadata: Metadata) -> list[int]:
        """The ids of the batch whose key is missing in Redis now, except those accepted as missing already."""
        start, quantity = check_metadata(metadata)
        accepted = missing_in(metadata, start, quantity)
        keys = {self.key(i): i for i in range(start, start + quantity) if i not in accepted}
        with redis_errors(self.client, "looking for missing tweets", topology=self.topology, keys=list(keys)):
            values = mget(self.client, list(keys))
            types = types_of(self.client, [key for key, value in zip(keys, values) if value is None])
        return sorted(keys[key] for key, kind in types.items() if kind == "none")

    def accept_missing(self, metadata: Metadata, ids: list[int], at: str) -> Metadata:
        """``metadata`` with ``ids`` accepted as missing (txdag.txid.holes)."""
        return with_missing(metadata, ids, at)

    @contextmanager
    def _metadata_errors(self, whose: str) -> Iterator[None]:
        """Stored metadata the spout cannot read: say which topology and txid, and where to fix it."""
        try:
            yield
        except FormatVersionError as exc:
            raise FormatVersionError(
                f"topology {self.topology!r}, {whose} metadata: {exc}; correct that txid's znode in ZooKeeper "
                f"(`txdag status {self.topology}` lists them), or {start_over(self.topology)}"
            ) from None


@dataclass(frozen=True)
class BatchIds:
    """The tweet ids a txid's metadata covers, ``start .. end - 1``, and those accepted as missing."""

    prefix: str
    topology: str
    tx: TransactionAttempt
    start: int
    quantity: int
    accepted: dict[int, str]

    @property
    def end(self) -> int:
        return self.start + self.quantity


def read_tweets(client: redis.Redis, ids: BatchIds, low: int, high: int) -> tuple[list[Record], list[Rejection]]:
    """Tweets ``low .. high - 1`` of a batch, all in one round trip: a value that is not a UTF-8 string is a
    rejection, an id accepted as missing too; a key missing (or changed while read) raises BatchReadError."""
    accepted = {i: at for i, at in ids.accepted.items() if low <= i < high}
    numbers = [i for i in range(low, high) if i not in accepted]
    keys = [tweet_key(ids.prefix, i) for i in numbers]
    with redis_errors(client, f"reading the batch of {ids.tx}", topology=ids.topology, keys=keys):
        values = mget(client, keys)
        types = types_of(client, [key for key, value in zip(keys, values) if value is None])
    check_present(client, ids, types, low, high)
    records: list[Record] = []
    rejections = [Rejection(str(i), missing_reason(at)) for i, at in sorted(accepted.items())]
    for tweet_id, key, raw in zip(numbers, keys, values):
        if raw is None:
            rejections.append(Rejection(str(tweet_id), f"key {key!r} holds a Redis {types[key]}, not a string"))
            continue
        try:
            records.append(Record(str(tweet_id), raw.decode("utf-8")))
        except UnicodeDecodeError as exc:
            rejections.append(
                Rejection(str(tweet_id), f"key {key!r} is not valid UTF-8 ({exc.reason} at byte {exc.start})")
            )
    return records, rejections


class ReadOnExecutor:
    """The ``mapInArrow`` function of ``read``: each input row is a task number, read as the ``per_task`` ids from
    ``start + number * per_task`` with ``read_tweets`` through a client of its own (txdag.redisio.portable)."""

    def __init__(self, client_spec: dict[str, object], ids: BatchIds, per_task: int) -> None:
        self.client_spec, self.ids, self.per_task = client_spec, ids, per_task

    def __call__(self, tasks: Iterator[Any]) -> Iterator[Any]:
        client = from_portable(self.client_spec)
        try:
            for task in tasks:
                for number in task.column(0).to_pylist():
                    low = self.ids.start + number * self.per_task
                    yield read_rows(*read_tweets(client, self.ids, low, min(low + self.per_task, self.ids.end)))
        finally:
            client.close()


def mget(client: redis.Redis, keys: list[str]) -> list[bytes | None]:
    """All keys in one round trip: MGETs of MGET_CHUNK keys each, pipelined."""
    pipe = client.pipeline(transaction=False)
    for i in range(0, len(keys), MGET_CHUNK):
        pipe.mget(keys[i : i + MGET_CHUNK])
    return [value for chunk in pipe.execute() for value in chunk]


def types_of(client: redis.Redis, keys: list[str]) -> dict[str, str]:
    """TYPE of the keys MGET returned nil for (nil means missing *or* not a string)."""
    if not keys:
        return {}
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.type(key)
    return {key: kind.decode() for key, kind in zip(keys, pipe.execute())}


def check_present(client: redis.Redis, ids: BatchIds, types: dict[str, str], low: int, high: int) -> None:
    """Raise BatchReadError, with the ways out, when a key of the batch is missing or changed while read."""
    gone = [key for key, kind in types.items() if kind in ("none", "string")]
    if not gone:
        return
    changed = [key for key in gone if types[key] == "string"]
    what = "changed while it was being read" if changed else "is missing"
    name, txid = ids.topology, ids.tx.txid
    raise BatchReadError(
        f"topology {name!r} {ids.tx}: the source no longer holds the batch described by the metadata "
        f"(tweets {ids.start}..{ids.end - 1} at Redis {describe(client)}): key {gone[0]!r} {what}"
        f" ({len(gone)} such key(s) among tweets {low}..{high - 1}: {', '.join(gone[:5])}); a transactional spout "
        f"must replay exactly the same batch. Ways out: restore key {gone[0]!r} (and the others) from a backup, then "
        f"`txdag replay {name} --from {txid}`; or, if the tweets are lost for good, accept them as missing "
        f"(they become rejected entries of txid {txid}) with `txdag accept-missing {name} {txid} --confirm "
        f"--replay`; or start over with `txdag reset {name} --confirm`"
    )


# KEYS[1]: the NEXT_WRITE key.  ARGV[1]: the tweet key prefix; ARGV[2..]: the tweets, in order.
# Returns the id of the first tweet written. Ids are formatted with %d (tostring would give 1e+14).
APPEND_TWEETS_LUA = """
local first = tonumber(redis.call('GET', KEYS[1]) or '1')
if not first then error({err = 'TXDAG_NOT_INTEGER ' .. KEYS[1]}) end
for i = 2, #ARGV do
  redis.call('SET', ARGV[1] .. string.format('%d', first + i - 2), ARGV[i])
end
redis.call('SET', KEYS[1], string.format('%d', first + #ARGV - 1))
return first
"""


def _not_integer(*key: str) -> TxdagError:
    name = " ".join(key)
    return ConfigError(f"cannot append tweets: {name} does not hold an integer; {name} must hold an integer tweet id "
                       f"(the id the next tweet gets)")


APPEND_TWEETS = declare("tweets.append", APPEND_TWEETS_LUA, {"TXDAG_NOT_INTEGER": _not_integer})


def append_tweets(client: redis.Redis, tweets: Iterable[str | bytes], prefix: str = "") -> list[int]:
    """Write tweets the seed's way at NEXT_WRITE, NEXT_WRITE+1, ... and return their ids.

    Atomic in one Lua script, which prevents this race of an INCRBY-then-SET writer:
    writer INCRBY NEXT_WRITE -> coordinator sees the new NEXT_WRITE and allocates the ids -> emitter MGETs the
    keys before the writer's SETs land -> the batch finds keys missing. With the script, ids and values
    appear together. Large lists go in chunks of MGET_CHUNK; each chunk is contiguous.
    """
    items = list(tweets)
    ids: list[int] = []
    with redis_errors(client, f"appending tweets under prefix {prefix!r}", keys=[next_write_key(prefix)]):
        for i in range(0, len(items), MGET_CHUNK):
            chunk = items[i : i + MGET_CHUNK]
            try:
                first = int(run(client, APPEND_TWEETS, [next_write_key(prefix)], [prefix, *chunk]))
            except redis.ResponseError as exc:
                if is_refusal(exc) or NON_LOCAL_KEY in str(exc):
                    raise
                raise ConfigError(
                    f"cannot append tweets: {exc}; {next_write_key(prefix)} must hold an integer tweet id"
                ) from exc
            ids.extend(range(first, first + len(chunk)))
    return ids

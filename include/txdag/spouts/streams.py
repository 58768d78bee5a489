"""Partitioned spouts over Redis Streams: seed 000's "several Redis databases", one stream per partition.

Metadata: ``{"v": 1, "partitions": {name: {"after": id, "last": id | None, "count": n}}}``: the batch holds, per
partition, the ``count`` entries in ``(after, last]``; an opaque spout adds ``"unavailable": true`` to a
partition it could not reach (count 0, position unchanged). Partition clients should fail fast: build them with
``StreamPartition.from_url`` (or ``socket_timeout``/``socket_connect_timeout`` and a short ``retry``), since
redis-py 8 retries a refused connection ten times (~5 s) by default. The keys are the streams the user names;
``keys``/``acl_patterns``: the shape of txdag.keyspace (the owner is the list of streams).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from txdag.attempt import TransactionAttempt
from txdag.errors import (
    BatchReadError,
    ConfigError,
    FormatVersionError,
    SourceUnavailable,
    source_went_backwards,
    start_over,
)
from txdag.keyspace import glob_escape
from txdag.redisio import access_denied, describe, from_portable, is_refusal, portable, redis_errors
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
from txdag.spouts.tweets import CONNECTION_ERRORS, FORMAT_VERSION, require_bytes_client

XRANGE_CHUNK = 10_000  # entries per XRANGE reply when reading a very large partition batch
ENTRY_ID = re.compile(r"\d+-\d+")
PartitionMeta = dict[str, Any]


def keys(streams: Sequence[str]) -> list[str]:
    return list(streams)


def acl_patterns(streams: Sequence[str]) -> list[str]:
    return [glob_escape(s) for s in streams]


@dataclass(frozen=True, eq=False)
class StreamPartition:
    """One partition: a stream key on a Redis server; partitions may live on different servers.

    Partitions that share a client object share one pipeline per batch, so give partitions on the same
    server the same client.
    """

    name: str
    client: redis.Redis
    stream: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"a StreamPartition needs a non-empty name, got {self.name!r}")
        if not isinstance(self.stream, str) or not self.stream:
            raise ConfigError(f"partition {self.name!r} needs a non-empty stream key, got {self.stream!r}")
        require_bytes_client(self.client, f"partition {self.name!r}")

    @classmethod
    def from_url(cls, name: str, url: str, stream: str, *, timeout: float = 2.0) -> StreamPartition:
        """A partition whose client detects a down or hung server within ~2 x ``timeout`` seconds."""
        client = redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(ExponentialBackoff(cap=0.2), 1),
        )
        return cls(name, client, stream)


def append_entries(
    partition: StreamPartition, values: Sequence[str | bytes], field: str = "value"
) -> list[str]:
    """XADD each value as ``{field: value}`` in one pipelined round trip; returns the entry ids."""
    pipe = partition.client.pipeline(transaction=False)
    for value in values:
        pipe.xadd(partition.stream, {field: value})
    with redis_errors(partition.client, f"appending to partition {partition.name!r}", keys=[partition.stream]):
        return [_text(entry_id) for entry_id in pipe.execute()]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _bad(why: str) -> FormatVersionError:
    return FormatVersionError(f"stream spout metadata {why}; this txdag reads version {FORMAT_VERSION} only")


def check_partition_meta(name: str, part: Any) -> PartitionMeta:
    """One partition's entry of the metadata, validated: ids look like ``ms-seq``, count 0 iff last is None."""
    if not isinstance(part, dict):
        raise _bad(f"has {part!r} for partition {name!r}, not a dict")
    after, last, count = part.get("after"), part.get("last"), part.get("count")
    if not isinstance(after, str) or not ENTRY_ID.fullmatch(after):
        raise _bad(f"has after={after!r} for partition {name!r}, not a stream entry id")
    if last is not None and (not isinstance(last, str) or not ENTRY_ID.fullmatch(last)):
        raise _bad(f"has last={last!r} for partition {name!r}, not a stream entry id")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0 or (count == 0) != (last is None):
        raise _bad(
            f"has count={count!r} with last={last!r} for partition {name!r} (count 0 iff last is null)"
        )
    return part


def check_metadata(metadata: Any) -> dict[str, PartitionMeta]:
    """The ``partitions`` of a stream spout's metadata; refuses unknown versions and shapes."""
    if not isinstance(metadata, dict) or metadata.get("v") != FORMAT_VERSION:
        version = metadata.get("v") if isinstance(metadata, dict) else type(metadata).__name__
        raise _bad(f"has format version {version!r} (upgrade txdag, or start the topology over with `txdag reset "
                   "TOPOLOGY --confirm`)")
    parts = metadata.get("partitions")
    if not isinstance(parts, dict):
        raise _bad(f"has partitions={parts!r}, not a dict")
    return {name: check_partition_meta(name, part) for name, part in parts.items()}


def _entry_id(text: str) -> tuple[int, int]:
    """A stream entry id as a number pair, so ids compare as Redis orders them (``"10-0" > "9-0"``)."""
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def partition_start(prev_metadata: Metadata | None, name: str) -> str:
    """Where ``name``'s next batch starts: after prev's last entry, or prev's start when its batch was empty."""
    if prev_metadata is None:
        return "0-0"
    part = check_metadata(prev_metadata).get(name)
    if part is None:
        return "0-0"  # a partition added to the topology starts at the beginning of its stream
    return part["last"] if part["last"] is not None else part["after"]


def parse_entry(partition: str, entry_id: str, fields: dict[Any, Any], field: str) -> Record | Rejection:
    """A stream entry as a Record, or a Rejection that says what is wrong with it."""
    record_id = f"{partition}:{entry_id}"
    raw = fields.get(field.encode(), fields.get(field))
    if raw is None:
        names = ", ".join(sorted(str(name)[2:-1] if isinstance(name, bytes) else name for name in fields))
        return Rejection(
            record_id, f"entry has no field {field!r} (its fields: {names or 'none'})", partition
        )
    try:
        return Record(record_id, raw.decode("utf-8") if isinstance(raw, bytes) else raw, partition)
    except UnicodeDecodeError as exc:
        return Rejection(
            record_id, f"field {field!r} is not valid UTF-8 ({exc.reason} at byte {exc.start})", partition
        )


# KEYS[1]: the stream.  ARGV[1]: exclusive start "(id"; ARGV[2]: max entries.
# Returns {count, last id or nil}: sizes a batch without sending payloads over the network. Sent with EVAL_RO:
# a read-only script runs on a replica, and for a user whose ACL gives it the stream read-only (%R~).
COUNT_AFTER_LUA = """
local r = redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2])
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local newest = false
if #top > 0 then newest = top[1][1] end
if #r == 0 then return {0, false, newest} end
return {#r, r[#r][1], newest}
"""  # how many entries after ARGV[1] (up to ARGV[2]), the last of them, and the stream's newest entry


class _StreamSpout(TransactionalSpout):
    """What both partitioned spouts share: planning per partition and reading ``(after, last]`` ranges."""

    kind: SpoutKind
    _plan_hint = ""  # transactional only: why planning halts when a partition is unreachable
    _emit_hint = ""  # what happens when a partition is unreachable at emit time
    _trim_hint = ""  # what happens when a partition no longer holds its batch

    def __init__(
        self,
        partitions: Sequence[StreamPartition],
        *,
        max_per_partition: int = 1000,
        field: str = "value",
        topology: str = "streams",
    ) -> None:
        names = [p.name for p in partitions if isinstance(p, StreamPartition)]
        if not partitions or len(names) != len(partitions):
            raise ConfigError(
                f"{type(self).__name__} needs a non-empty list of StreamPartition, got {partitions!r}"
            )
        if len(set(names)) != len(names):
            raise ConfigError(f"partition names must be unique, got {names}")
        if (
            isinstance(max_per_partition, bool)
            or not isinstance(max_per_partition, int)
            or max_per_partition < 1
        ):
            raise ConfigError(f"max_per_partition must be an int >= 1, got {max_per_partition!r}")
        if not isinstance(field, str) or not field:
            raise ConfigError(f"field must be the non-empty name of the entries' value field, got {field!r}")
        self.topology = topology
        self.partitions = {p.name: p for p in partitions}
        self.max_per_partition = max_per_partition
        self.field = field

    def _groups(self, names: Sequence[str]) -> list[list[StreamPartition]]:
        """Partitions grouped by client, so that each Redis server gets one pipeline."""
        groups: dict[int, list[StreamPartition]] = {}
        for name in names:
            groups.setdefault(id(self.partitions[name].client), []).append(self.partitions[name])
        return list(groups.values())

    def _unreachable(self, group: list[StreamPartition], exc: Exception, why: str) -> SourceUnavailable:
        names = ", ".join(repr(p.name) for p in group)
        return SourceUnavailable(
            f"topology {self.topology!r}: partition(s) {names} at Redis {describe(group[0].client)} "
            f"unreachable ({exc}); {why}"
        )

    def _refused(self, group: list[StreamPartition], exc: Exception) -> Exception:
        what = f"reading partition(s) {', '.join(repr(p.name) for p in group)}"
        return access_denied(group[0].client, exc, what, topology=self.topology, keys=[p.stream for p in group])

    def _execute(self, group: list[StreamPartition], pipe: Any) -> list[Any]:
        """Run one server's pipeline; a wrong key type is a configuration mistake naming the partition, a
        refused user or key is AccessDenied."""
        try:
            results = pipe.execute(raise_on_error=False)
        except redis.AuthenticationError as exc:
            raise self._refused(group, exc) from exc
        for part, result in zip(group, results):
            if is_refusal(result):
                raise self._refused([part], result) from result
            if isinstance(result, CONNECTION_ERRORS):
                raise result
            if isinstance(result, redis.ResponseError):
                raise ConfigError(
                    f"topology {self.topology!r}: partition {part.name!r}: Redis {describe(part.client)} "
                    f"key {part.stream!r} is not a "
                    f"stream ({result}); point the partition at a stream key"
                )
        return results

    def _scan_group(
        self, group: list[StreamPartition], prev: Metadata | None, limit: int
    ) -> dict[str, PartitionMeta]:
        """Plan ``group``'s partitions: up to ``limit`` entries each after prev's position."""
        pipe = group[0].client.pipeline(transaction=False)
        starts = [partition_start(prev, part.name) for part in group]
        for part, start in zip(group, starts):
            pipe.eval_ro(COUNT_AFTER_LUA, 1, part.stream, f"({start}", limit)
        results = self._execute(group, pipe)
        plan: dict[str, PartitionMeta] = {}
        for part, start, (count, last, newest) in zip(group, starts, results):
            self._check_not_behind(part, start, _text(newest) if newest else None)
            plan[part.name] = {"after": start, "last": _text(last) if count else None, "count": int(count)}
        return plan

    def _check_not_behind(self, part: StreamPartition, start: str, newest: str | None) -> None:
        """The stream must still reach where the last batch read it up to: an entry id only grows, so a newest
        entry below ``start`` (or no stream at all) is a stream deleted or restored from an older backup."""
        if start == "0-0" or (newest is not None and _entry_id(newest) >= _entry_id(start)):
            return
        holds = f"its newest entry is {newest}" if newest else "it holds no entry (or does not exist)"
        raise source_went_backwards(
            self.topology, f"partition {part.name!r} (Redis {describe(part.client)} stream {part.stream!r}): "
            f"{holds}, but the last emitted batch read it up to entry {start}")

    def _plan(self, prev: Metadata | None, limit: int) -> dict[str, PartitionMeta]:
        """Every partition's next range; an unreachable one halts (transactional) or is carried over (opaque)."""
        plan: dict[str, PartitionMeta] = {}
        for group in self._groups(list(self.partitions)):
            try:
                plan.update(self._scan_group(group, prev, limit))
            except CONNECTION_ERRORS as exc:
                if self.kind is SpoutKind.TRANSACTIONAL:
                    raise self._unreachable(group, exc, self._plan_hint) from exc
                for part in group:  # count 0, same position, flagged for the operator
                    after = partition_start(prev, part.name)
                    plan[part.name] = {"after": after, "last": None, "count": 0, "unavailable": True}
        if all(part.get("unavailable") for part in plan.values()):
            raise SourceUnavailable(
                f"topology {self.topology!r}: every partition ({', '.join(map(repr, self.partitions))}) is "
                f"unreachable; start their Redis "
                f"servers ({', '.join(describe(group[0].client) for group in self._groups(list(plan)))})"
            )
        return plan

    def is_ready(self, prev_metadata: Metadata | None) -> bool:
        return any(part["count"] for part in self._plan(prev_metadata, 1).values())

    def lag(self, prev_metadata: Metadata | None, cap: int = 100_000) -> int:
        """Entries no batch up to ``prev_metadata`` covers (for the operator's UI), counted up to ``cap`` per
        partition (a count walks the entries). Any unreachable partition raises: a partial lag would mislead."""
        total = 0
        for group in self._groups(list(self.partitions)):
            try:
                total += sum(part["count"] for part in self._scan_group(group, prev_metadata, cap).values())
            except CONNECTION_ERRORS as exc:
                raise self._unreachable(group, exc, "the lag is unknown until it is back") from exc
        return total

    def initialize_transaction(self, txid: int, prev_metadata: Metadata | None) -> Metadata:
        return {"v": FORMAT_VERSION, "partitions": self._plan(prev_metadata, self.max_per_partition)}

    def batch_size(self, metadata: Metadata) -> int:
        return sum(part["count"] for part in check_metadata(metadata).values())

    def emit_batch(self, tx: TransactionAttempt, metadata: Metadata) -> Batch:
        """Re-read ``(after, last]`` of every partition: one XRANGE per partition, one pipeline per server."""
        parts = self._batch_parts(tx, metadata)
        records: list[Record] = []
        rejections: list[Rejection] = []
        for group in self._groups(sorted(parts)):
            try:
                entries = self._read_group(group, parts)
            except CONNECTION_ERRORS as exc:
                raise self._unreachable(group, exc, f"{tx} cannot be read: {self._emit_hint}") from exc
            for part in group:
                self._check_range(tx, part, parts[part.name], entries[part.name])
                for entry_id, fields in entries[part.name]:
                    item = parse_entry(part.name, _text(entry_id), fields, self.field)
                    if isinstance(item, Record):
                        records.append(item)
                    else:
                        rejections.append(item)
        return Batch(tx, records, rejections)

    def read(self, spark: Any, tx: TransactionAttempt, metadata: Metadata) -> Any:
        """The batch read on the executors: one Spark task per partition with entries, each running the built-in
        spout's ``emit_batch`` over its own partition through a connection of its own (the same checks, errors and
        hints); the executors must reach the partitions' Redis servers. The driver holds only the metadata."""
        parts = self._batch_parts(tx, metadata)
        tasks = [(p.name, p.stream, portable(p.client), parts[p.name]) for group in self._groups(sorted(parts))
                 for p in group]  # emit_batch's order: the rows' order numbers windows, sinks and updaters
        builtin = next(c for c in type(self).__mro__ if c.__module__ == __name__)  # importable on the executors
        reader = PartitionOnExecutor(builtin, self.field, self.topology, tx, tasks)
        return spark.range(0, len(tasks), 1, max(1, len(tasks))).mapInArrow(reader, READ_SCHEMA)

    def _batch_parts(self, tx: TransactionAttempt, metadata: Metadata) -> dict[str, PartitionMeta]:
        """The metadata's partitions with entries, checked: its format, and that this spout has them."""
        try:
            parts = {name: part for name, part in check_metadata(metadata).items() if part["count"]}
        except FormatVersionError as exc:
            raise FormatVersionError(
                f"topology {self.topology!r} {tx}: {exc}; correct that txid's znode in ZooKeeper "
                f"(`txdag status {self.topology}` lists them), or {start_over(self.topology)}"
            ) from None
        unknown = sorted(set(parts) - set(self.partitions))
        if unknown:
            raise ConfigError(
                f"topology {self.topology!r} {tx}: the metadata names partition(s) {unknown} that this spout "
                f"does not have; "
                f"it has {sorted(self.partitions)} (were partitions removed while txids were pending?)"
            )
        return parts

    def _read_group(
        self, group: list[StreamPartition], parts: dict[str, PartitionMeta]
    ) -> dict[str, list[Any]]:
        """XRANGE (after, last] per partition, pipelined; very large ranges continue in XRANGE_CHUNK pieces."""
        entries: dict[str, list[Any]] = {part.name: [] for part in group}
        pending = {part.name: parts[part.name]["after"] for part in group}
        while pending:
            todo = [self.partitions[name] for name in pending]
            pipe = group[0].client.pipeline(transaction=False)
            for part in todo:
                pipe.xrange(
                    part.stream, f"({pending[part.name]}", parts[part.name]["last"], count=XRANGE_CHUNK
                )
            results = self._execute(todo, pipe)
            pending = {}
            for part, chunk in zip(todo, results):
                entries[part.name].extend(chunk)
                if len(chunk) == XRANGE_CHUNK and _text(chunk[-1][0]) != parts[part.name]["last"]:
                    pending[part.name] = _text(chunk[-1][0])
        return entries

    def _check_range(
        self, tx: TransactionAttempt, part: StreamPartition, meta: PartitionMeta, got: list[Any]
    ) -> None:
        """The stream must still hold the ``count`` entries of ``(after, last]`` (XTRIM/XDEL remove them)."""
        if len(got) == meta["count"] and _text(got[-1][0]) == meta["last"]:
            return
        raise BatchReadError(
            f"topology {self.topology!r} {tx}: partition {part.name!r} (stream {part.stream!r} at Redis "
            f"{describe(part.client)}) holds "
            f"{len(got)} entries in ({meta['after']}, {meta['last']}] but the batch has {meta['count']}: entries "
            f"were trimmed or deleted (XTRIM/XDEL/MAXLEN) before the batch was read; "
            f"{self._trim_hint.format(topology=self.topology, txid=tx.txid)}"
        )


class PartitionOnExecutor:
    """The ``mapInArrow`` function of a stream spout's ``read``: each input row is a task number, the partition of
    ``tasks`` at that index (name, stream, client as txdag.redisio.portable gives it, its metadata), read by a spout
    of ``kind`` over that partition alone."""

    def __init__(self, kind: type[_StreamSpout], field: str, topology: str, tx: TransactionAttempt,
                 tasks: list[tuple[str, str, dict[str, object], PartitionMeta]]) -> None:
        self.kind, self.field, self.topology, self.tx, self.tasks = kind, field, topology, tx, tasks

    def __call__(self, numbers: Iterator[Any]) -> Iterator[Any]:
        for task in numbers:
            for number in task.column(0).to_pylist():
                name, stream, client_spec, meta = self.tasks[number]
                client = from_portable(client_spec)
                try:
                    spout = self.kind([StreamPartition(name, client, stream)], field=self.field,
                                      topology=self.topology)
                    batch = spout.emit_batch(self.tx, {"v": FORMAT_VERSION, "partitions": {name: meta}})
                finally:
                    client.close()
                yield read_rows(batch.records, batch.rejections)


class PartitionedTransactionalStreamSpout(_StreamSpout):
    """Storm's partitioned transactional spout: a txid's batch never changes, so a replay is identical.

    An unreachable partition makes ``is_ready``/``initialize_transaction`` raise SourceUnavailable rather
    than plan a batch without it: that txid would be fixed for ever without the partition's entries of that
    span, and later txids would have to catch up, which is the opaque spout's contract, not this one's.
    Raising allocates no txid; the coordinator tries again on its next run.
    """

    kind = SpoutKind.TRANSACTIONAL
    _plan_hint = (
        "a transactional spout allocates no txid until every partition is reachable (start that Redis "
        "server, or use OpaquePartitionedStreamSpout to keep going without it)"
    )
    _emit_hint = (
        "a transactional spout cannot replay this batch without it, so processing halts until the "
        "partition is reachable again"
    )
    _trim_hint = (
        "a transactional spout cannot replay a different batch. Ways out: restore the entries, then `txdag replay "
        "{topology} --from {txid}`; or start over with `txdag reset {topology} --confirm`. (`txdag accept-missing` "
        "refuses a stream: a batch is an id range, so lost entries cannot be listed.) Keep stream retention longer "
        "than the replay window"
    )


class OpaquePartitionedStreamSpout(_StreamSpout):
    """Storm's opaque partitioned spout: a replay recomputes the batch, carrying over partitions that are down.

    Seed 004: it tolerates losing a source node. A down partition keeps its position (count 0,
    ``"unavailable": true``) while the others keep emitting; its entries go into a later batch once it is back.
    One exception, on purpose (a gap of Trident's closed): once a txid's commit has begun its batch is frozen,
    so a partition of that batch that is down halts the topology at that txid until it is back.
    """

    kind = SpoutKind.OPAQUE
    _emit_hint = (
        "this attempt fails. If the txid's commit has not begun, its re-emission recomputes its batch without "
        "the unreachable partition, whose entries go into a later batch once it is back, and the topology goes "
        "on. Once its commit has begun, its batch is frozen (a half-applied commit is finished with the same "
        "batch), so the topology halts at this txid until the partition is reachable again (`txdag show` says "
        "whether the commit began)"
    )
    _trim_hint = ("this attempt fails; if the txid's commit has not begun, its re-emission recomputes its batch "
                  "from the entries still held; once it has begun, the batch is frozen and the topology halts: "
                  "restore the entries, then `txdag replay {topology} --from {txid}`, or start over with "
                  "`txdag reset {topology} --confirm`")

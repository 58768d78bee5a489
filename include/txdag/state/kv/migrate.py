"""``txdag state migrate``: rewrite a namespace from one pair of serializers to another, in place, resumably
(seed 002's Base64-to-binary migration tool is the model).

1. begin (one script): refuse a prepared txid; record ``migrating = <key>,<value>`` in the namespace's meta.
   From then on the namespace refuses to open, prepare or commit until the migration finishes.
2. for the committed hash and each staged attempt: HSCAN a chunk, convert it in Python with the old and new
   serializers, and move it with one script per chunk: a field moves to the hash's ``:migrating`` half only if it
   still holds the value that was read, and leaves the old hash in the same step. A rerun, or HSCAN returning a
   field twice, finds it gone, so no value is ever converted twice; ``moved`` in the meta counts them.
3. finish (one script): every old hash empty, every staged attempt converted -> rename each converted half over
   its old hash and record the new serializers.

An interrupted run (a crash, Ctrl-C, ``max_chunks``) leaves the meta saying ``migrating``; the same command run
again resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import redis

from txdag.attempt import parse_attempt_id
from txdag.luascripts import run
from txdag.state.kv import scripts
from txdag.state.kv.errors import KeyCollision, KVStateError
from txdag.state.kv.layout import PUT_TAG, TOMBSTONE, KVNamespace, migrating_key
from txdag.state.kv.protocol import kv_errors
from txdag.state.kv.serializers import SerializationError, Serializer, get_serializer

Progress = Callable[[int, int, str], None]  # (converted so far, total, what)


@dataclass(frozen=True)
class MigrationResult:
    namespace: str
    source: str  # "<key serializer>,<value serializer>"
    target: str
    outcome: str  # "migrated", "nothing to do" or "interrupted"
    moved: int  # values converted by this run
    total_moved: int  # values converted by every run of this migration
    remaining: int  # values left to convert (0 unless interrupted)


@dataclass(frozen=True)
class _Codecs:
    old_key: Serializer
    old_value: Serializer
    new_key: Serializer
    new_value: Serializer


def migrate(client: redis.Redis, namespace: str, key_serializer: str, value_serializer: str, *,
            from_key_serializer: str = "", from_value_serializer: str = "", chunk: int = 500,
            max_chunks: int | None = None, progress: Progress | None = None) -> MigrationResult:
    """Convert ``namespace`` to the given serializers; ``from_*`` only for a namespace without a meta record."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    target_spec = KVNamespace(namespace, key_serializer, value_serializer)
    target = f"{key_serializer},{value_serializer}"
    if bool(from_key_serializer) != bool(from_value_serializer):
        raise KVStateError("give both --from-key-serializer and --from-value-serializer, or neither")
    for name in (from_key_serializer, from_value_serializer):
        if name:
            get_serializer(name)
    with kv_errors(client, "starting the migration", target_spec):
        outcome, source = run(client, scripts.MIGRATE_BEGIN, [target_spec.meta],
                              [namespace, target, from_key_serializer, from_value_serializer])
    source = source.decode() if isinstance(source, bytes) else str(source)
    if (outcome.decode() if isinstance(outcome, bytes) else outcome) == "nothing to do":
        return MigrationResult(namespace, source, target, "nothing to do", 0, 0, 0)
    old_key, old_value = source.split(",")
    codecs = _Codecs(get_serializer(old_key, for_keys=True), get_serializer(old_value),
                     get_serializer(key_serializer, for_keys=True), get_serializer(value_serializer))
    return _Migration(client, target_spec, source, target, codecs, chunk, max_chunks, progress).run()


class _Migration:
    """One run of a migration. Its client is made without decode_responses (make_client, the CLI's), so every
    reply is bytes; redis-py's hints say ``bytes | str`` for either kind of client, hence the casts."""

    def __init__(self, client: redis.Redis, spec: KVNamespace, source: str, target: str, codecs: _Codecs,
                 chunk: int, max_chunks: int | None, progress: Progress | None) -> None:
        self.client, self.spec, self.source, self.target, self.codecs = client, spec, source, target, codecs
        self.chunk, self.max_chunks, self.progress = chunk, max_chunks, progress
        self.moved = self.chunks = 0

    def run(self) -> MigrationResult:
        spec = self.spec
        with kv_errors(self.client, "migrating", spec):
            ids = sorted(k.decode() for k in cast(list[bytes], self.client.hkeys(spec.stages)))
            hashes = [(spec.committed, False)] + [(spec.stage(parse_attempt_id(i)), True) for i in ids]
            pipe = self.client.pipeline(transaction=False)
            for key, _ in hashes:
                pipe.hlen(key)
            pipe.hget(spec.meta, "moved")
            *sizes, already = pipe.execute()
            already, remaining = int(already or 0), sum(sizes)
            self.already, self.total = already, already + remaining
            for key, tagged in hashes:
                if not self._convert(key, tagged):
                    return self._result("interrupted", already)
            pairs = [k for key, _ in hashes for k in (key, migrating_key(key))]
            run(self.client, scripts.MIGRATE_FINISH, [spec.meta, spec.stages, *pairs],
                [spec.namespace, self.target, *ids])
        return self._result("migrated", already)

    def _result(self, outcome: str, already: int) -> MigrationResult:
        return MigrationResult(self.spec.namespace, self.source, self.target, outcome, self.moved,
                               already + self.moved, self.total - already - self.moved)

    def _convert(self, key: str, tagged: bool) -> bool:
        """Move every field of ``key`` to its converted half; False when ``max_chunks`` stopped it first."""
        while self.client.hlen(key):
            cursor, before = 0, self.moved
            while True:
                if self.max_chunks is not None and self.chunks >= self.max_chunks:
                    return False
                cursor, page = cast(tuple[int, dict[bytes, bytes]], self.client.hscan(key, cursor, count=self.chunk))
                if page:
                    self._move(key, tagged, list(page.items()))
                if cursor == 0:
                    break
            if self.moved == before:  # a whole pass moved nothing: someone keeps rewriting the fields read
                raise KVStateError(f"KeyValueState {self.spec.namespace!r}: {self.client.hlen(key)} fields of {key} "
                                   f"changed under the migration on every try; stop whatever writes them (raw "
                                   f"HSETs bypass txdag), then run the same migrate again")
        return True

    def _move(self, key: str, tagged: bool, page: list[tuple[bytes, bytes]]) -> None:
        args: list[bytes | str] = [self.spec.namespace, self.target]
        firsts: dict[bytes, bytes] = {}
        for field, value in page:
            new_field, new_value = self._converted(key, field, value, tagged)
            if firsts.setdefault(new_field, field) != field:
                raise self._collision(key, field, firsts[new_field])
            args += [field, value, new_field, new_value]
        try:
            moved, _ = run(self.client, scripts.MIGRATE_MOVE, [self.spec.meta, key, migrating_key(key)], args)
        except KeyCollision as exc:
            raise self._collision(key, page[exc.index][0], None) from exc
        self.moved += int(moved)
        self.chunks += 1
        if self.progress is not None:
            self.progress(self.already + self.moved, self.total, key)

    def _converted(self, key: str, field: bytes, value: bytes, tagged: bool) -> tuple[bytes, bytes]:
        c = self.codecs
        try:
            new_field = c.new_key.encode(c.old_key.decode(field))
            if not tagged:
                return new_field, c.new_value.encode(c.old_value.decode(value))
            if value == TOMBSTONE:
                return new_field, value
            return new_field, PUT_TAG + c.new_value.encode(c.old_value.decode(value[1:]))
        except SerializationError as exc:
            raise KVStateError(f"KeyValueState {self.spec.namespace!r}: field {field[:60]!r} of {key} cannot be "
                               f"converted from {self.source} to {self.target} ({exc}); {self.moved} values were "
                               f"converted by this run and stay converted: fix or delete that field (HDEL), then "
                               f"run the same migrate again") from exc

    def _collision(self, key: str, field: bytes, other: bytes | None) -> KVStateError:
        which = f"field {other[:60]!r}" if other is not None else "a field converted earlier"
        return KVStateError(f"KeyValueState {self.spec.namespace!r}: field {field[:60]!r} of {key} and {which} "
                            f"both become one key under {self.target}: two keys would merge. The migration stopped "
                            f"before converting it; delete one of the two (HDEL), then run the same migrate again")

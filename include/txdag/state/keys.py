"""How a key tuple becomes a Redis hash field and back.

DefaultKeyCodec keeps one-string keys readable (``("hello",)`` -> ``hello``) and writes anything else as a
compact JSON array (``("@bob", 3)`` -> ``["@bob",3]``). JoinedKeyCodec writes seed 000's ``user:hashtag``.

Two different key tuples never share a field. A joined field is cut at the first ``arity - 1`` separators, so a
separator inside any field but the last would move a cut (``("a:b", "c")`` and ``("a", "b:c")`` both join to
``a:b:c``): JoinedKeyCodec refuses such a key (KeyClashError, naming the field), and the jobs and the commit record
it as a rejection of that key (txdag.commit.rejections.clash_rejection) instead of adding two keys into one field.
Escaping was not chosen: it would change the bytes of fields that hold the escape character, and fields already
stored would decode to other tuples.
"""

from __future__ import annotations

import json
from typing import Protocol

from txdag.state.base import Key


class KeyCodec(Protocol):
    def encode(self, key: Key) -> str:
        ...

    def decode(self, field: str) -> Key:
        ...


class DefaultKeyCodec:
    """A single string that does not start with ``[`` is stored as is; everything else as a JSON array."""

    def encode(self, key: Key) -> str:
        if len(key) == 1 and isinstance(key[0], str) and not key[0].startswith("["):
            return key[0]
        return json.dumps(list(key), separators=(",", ":"), ensure_ascii=False)

    def decode(self, field: str) -> Key:
        return tuple(json.loads(field)) if field.startswith("[") else (field,)


class KeyClashError(ValueError):
    """A key JoinedKeyCodec refuses: field ``index`` holds the separator, so the joined field would read back as
    another tuple."""

    def __init__(self, key: Key, index: int, sep: str) -> None:
        how = "contains the separator" if sep in str(key[index]) else "ends with the start of the separator"
        super().__init__(f"key field {index} {key[index]!r} of {key!r} {how} {sep!r}, so the stored field would read "
                         f"back as another key")
        self.key, self.index, self.sep = key, index, sep


class JoinedKeyCodec:
    """String parts joined by ``sep``; decoding splits into ``arity`` parts (the last part keeps any ``sep``).

    Any field but the last that contains ``sep`` is refused (KeyClashError); for a separator of several characters,
    so is such a field that ends with the start of it (``("a:", "b")`` with ``::`` joins to ``a:::b``, which reads
    back as ``("a", ":b")``). The last field may hold ``sep``: nothing is cut after it."""

    def __init__(self, sep: str = ":", arity: int = 2) -> None:
        if not sep or arity < 1:
            raise ValueError("JoinedKeyCodec needs a non-empty separator and arity >= 1")
        self.sep = sep
        self.arity = arity

    def encode(self, key: Key) -> str:
        if len(key) != self.arity or not all(isinstance(part, str) for part in key):
            raise ValueError(f"JoinedKeyCodec(arity={self.arity}) encodes tuples of {self.arity} strings, got {key!r}")
        clash = self.clash(key)
        if clash is not None:
            raise KeyClashError(key, clash, self.sep)
        return self.sep.join(key)

    def clash(self, key: Key) -> int | None:
        """The first field that would move a cut of the joined field (None: the key reads back as itself)."""
        tail = self.sep[:-1]
        return next((i for i, part in enumerate(key[:-1]) if self.sep in str(part) + tail), None)

    def decode(self, field: str) -> Key:
        return tuple(field.split(self.sep, self.arity - 1))


DEFAULT_KEY_CODEC = DefaultKeyCodec()

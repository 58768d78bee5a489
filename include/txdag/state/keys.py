"""How a key tuple becomes a Redis hash field and back.

DefaultKeyCodec keeps one-string keys readable (``("hello",)`` -> ``hello``) and writes anything else as a
compact JSON array (``("@bob", 3)`` -> ``["@bob",3]``). JoinedKeyCodec writes seed 000's ``user:hashtag``.
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


class JoinedKeyCodec:
    """String parts joined by ``sep``; decoding splits into ``arity`` parts (the last part keeps any ``sep``)."""

    def __init__(self, sep: str = ":", arity: int = 2) -> None:
        if not sep or arity < 1:
            raise ValueError("JoinedKeyCodec needs a non-empty separator and arity >= 1")
        self.sep = sep
        self.arity = arity

    def encode(self, key: Key) -> str:
        if len(key) != self.arity or not all(isinstance(part, str) for part in key):
            raise ValueError(f"JoinedKeyCodec(arity={self.arity}) encodes tuples of {self.arity} strings, got {key!r}")
        return self.sep.join(key)

    def decode(self, field: str) -> Key:
        return tuple(field.split(self.sep, self.arity - 1))


DEFAULT_KEY_CODEC = DefaultKeyCodec()

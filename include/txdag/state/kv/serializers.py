"""Key and value serializers of a KeyValueState, by name (seed 002's ``keySerializerClass`` /
``valueSerializerClass``), so that a namespace can record which ones wrote it and refuse to be read with others.

Shipped: ``json`` (the default: compact, sorted object keys, so equal keys give equal hash fields), ``utf8``
(str only), ``bytes`` (bytes only) and ``base64``: JSON text, Base64-encoded, standing for the representation
Storm <= 1.1 wrote (its values were Base64 strings); ``txdag state migrate`` rewrites it to another serializer.
A serializer is any object with a ``name`` and ``encode``/``decode``; :func:`register_serializer` adds one. It
must be importable where the state is used (Spark executors included).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Protocol, runtime_checkable

from txdag.errors import ConfigError, TxdagError

DEFAULT_SERIALIZER = "json"


class SerializationError(TxdagError, ValueError):
    """A value cannot be encoded by a serializer, or stored bytes are not what the serializer wrote."""


@runtime_checkable
class Serializer(Protocol):
    name: str

    def encode(self, obj: Any) -> bytes:
        ...

    def decode(self, data: bytes) -> Any:
        ...


def _tuples(obj: Any) -> Any:
    """JSON arrays as tuples, so a decoded key is hashable like the key that was encoded."""
    return tuple(_tuples(x) for x in obj) if isinstance(obj, list) else obj


class JsonSerializer:
    """JSON as UTF-8; a key that was a tuple comes back as a tuple (``decode_tuples``), a value as a list."""

    def __init__(self, name: str = "json", *, decode_tuples: bool = False) -> None:
        self.name = name
        self.decode_tuples = decode_tuples

    def encode(self, obj: Any) -> bytes:
        try:
            text = json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"serializer {self.name!r} cannot encode {obj!r}: {exc}") from exc
        return text.encode()

    def decode(self, data: bytes) -> Any:
        try:
            obj = json.loads(bytes(data).decode())
        except (UnicodeDecodeError, ValueError) as exc:
            raise SerializationError(f"serializer {self.name!r}: {bytes(data)[:40]!r} is not JSON ({exc})") from exc
        return _tuples(obj) if self.decode_tuples else obj


class Utf8Serializer:
    """Strings as their UTF-8 bytes (readable as is in redis-cli); anything else is refused."""

    name = "utf8"

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, str):
            raise SerializationError(f"serializer 'utf8' encodes str only, got {type(obj).__name__} {obj!r}")
        return obj.encode()

    def decode(self, data: bytes) -> Any:
        try:
            return bytes(data).decode()
        except UnicodeDecodeError as exc:
            raise SerializationError(f"serializer 'utf8': {bytes(data)[:40]!r} is not UTF-8 ({exc})") from exc


class BytesSerializer:
    """Raw bytes, unchanged (binary-safe); anything else is refused."""

    name = "bytes"

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, bytes | bytearray | memoryview):
            raise SerializationError(f"serializer 'bytes' encodes bytes only, got {type(obj).__name__} {obj!r}")
        return bytes(obj)

    def decode(self, data: bytes) -> Any:
        return bytes(data)


class Base64Serializer:
    """The legacy flavour: JSON text, Base64-encoded (Storm <= 1.1 stored Base64 strings, at ~4/3 the size)."""

    name = "base64"

    def __init__(self, inner: JsonSerializer) -> None:
        self.inner = inner

    def encode(self, obj: Any) -> bytes:
        return base64.b64encode(self.inner.encode(obj))

    def decode(self, data: bytes) -> Any:
        try:
            raw = base64.b64decode(bytes(data), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise SerializationError(f"serializer 'base64': {bytes(data)[:40]!r} is not Base64 ({exc})") from exc
        return self.inner.decode(raw)


_KEY_REGISTRY: dict[str, Serializer] = {}
_VALUE_REGISTRY: dict[str, Serializer] = {}


def register_serializer(serializer: Serializer, *, for_keys: Serializer | None = None) -> None:
    """Make ``serializer`` usable by name; ``for_keys`` is the instance used for keys if it differs."""
    if not isinstance(serializer, Serializer) or not isinstance(serializer.name, str) or not serializer.name:
        raise ConfigError(f"a serializer needs a non-empty name and encode/decode methods, got {serializer!r}")
    if "," in serializer.name or any(c.isspace() for c in serializer.name):
        raise ConfigError(f"serializer name {serializer.name!r} must not hold commas or spaces")
    _VALUE_REGISTRY[serializer.name] = serializer
    _KEY_REGISTRY[serializer.name] = for_keys or serializer


def serializer_names() -> list[str]:
    return sorted(_VALUE_REGISTRY)


def get_serializer(name: str, *, for_keys: bool = False) -> Serializer:
    """The registered serializer ``name``, or a ConfigError listing the known ones."""
    registry = _KEY_REGISTRY if for_keys else _VALUE_REGISTRY
    if not isinstance(name, str) or name not in registry:
        raise ConfigError(f"unknown serializer {name!r}; known: {', '.join(serializer_names())} "
                          f"(register your own with txdag.state.kv.serializers.register_serializer)")
    return registry[name]


register_serializer(JsonSerializer(), for_keys=JsonSerializer(decode_tuples=True))
register_serializer(Utf8Serializer())
register_serializer(BytesSerializer())
register_serializer(Base64Serializer(JsonSerializer("base64")),
                    for_keys=Base64Serializer(JsonSerializer("base64", decode_tuples=True)))

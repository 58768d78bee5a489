"""Every Lua script of txdag, declared once, and the one translator of their error replies.

The module that owns a script keeps its source (with its ``KEYS``/``ARGV`` header) and declares it here once::

    EMIT = declare("newvalues.emit", EMIT_SCRIPT)
    n = run(client, EMIT, keys=[...], args=[...])

:func:`run` registers a script once per client (EVALSHA; redis-py loads it again on NOSCRIPT), so no call
re-registers it. A script refuses with one convention, ``error({err = 'TXDAG_<CODE> word word ...'})``: the words
are the arguments of the code's builder in the table the script was declared with, which returns the TxdagError
that names the namespace, txid and attempt and says what to do. :func:`run` raises that error; any other error
reply (WRONGTYPE, an ACL refusal, which ``txdag.redisio.redis_errors`` turns into AccessDenied) is raised as is.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from txdag.errors import TxdagError
from txdag.redisio import is_refusal

ERROR_PREFIX = "TXDAG_"  # every code a script raises starts with it: TXDAG_<CODE>
ErrorBuilder = Callable[..., TxdagError]  # the reply's words after the code -> the error to raise


@dataclass(frozen=True)
class LuaScript:
    """A declared script: its unique name, its source, and the codes it may raise with their builders."""

    name: str
    source: str = field(repr=False)
    errors: Mapping[str, ErrorBuilder] = field(default_factory=dict, repr=False)


_DECLARED: dict[str, LuaScript] = {}
_REGISTERED: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def declare(name: str, source: str, errors: Mapping[str, ErrorBuilder] | None = None) -> LuaScript:
    """Declare a script once; a second script under the same name is refused (its owner would be ambiguous)."""
    script = LuaScript(name, source, dict(errors or {}))
    wrong = [code for code in script.errors if not code.startswith(ERROR_PREFIX)]
    if wrong:
        raise ValueError(f"Lua script {name!r}: error codes {wrong} must start with {ERROR_PREFIX!r}")
    known = _DECLARED.setdefault(name, script)
    if known.source != source:
        raise ValueError(f"Lua script {name!r} is declared twice with different sources: give one of them "
                         f"another name")
    return known


def declared() -> dict[str, LuaScript]:
    """Every script declared so far (those of the modules imported), by name."""
    return dict(_DECLARED)


def run(client: redis.Redis, script: LuaScript, keys: Sequence[Any], args: Sequence[Any], *,
        where: str = "") -> Any:
    """Run ``script`` on ``client`` (registered once per client); a ``TXDAG_`` error reply is raised as the
    TxdagError its builder makes, prefixed with ``where`` (e.g. the topology and txid) when given."""
    per_client = _REGISTERED.setdefault(client, {})
    registered = per_client.get(script.name)
    if registered is None:
        registered = per_client[script.name] = client.register_script(script.source)
    try:
        return registered(keys=list(keys), args=list(args))
    except redis.ResponseError as exc:
        error = translate(exc, script, where=where)
        if error is exc:
            raise
        raise error from exc


def parse(exc: BaseException) -> tuple[str, list[str]] | None:
    """(code, words) of a script's ``TXDAG_`` error reply; None for any other error."""
    if not isinstance(exc, redis.ResponseError) or is_refusal(exc):
        return None
    words = str(exc).split(" script: ")[0].split()  # Redis appends " script: <sha>, on @user_script:<line>."
    code = next((w for w in words if w.startswith(ERROR_PREFIX)), None)
    return None if code is None else (code, words[words.index(code) + 1:])


def translate(exc: redis.ResponseError, script: LuaScript, *, where: str = "") -> Exception:
    """The TxdagError of a ``TXDAG_`` reply of ``script``; ``exc`` itself for any other reply."""
    parsed = parse(exc)
    if parsed is None:
        return exc
    code, words = parsed
    builder = script.errors.get(code)
    if builder is None:
        error = TxdagError(f"Lua script {script.name!r} refused with {code} {' '.join(words)}, a code it does not "
                           f"declare ({', '.join(sorted(script.errors)) or 'none'}): the script and txdag's Python "
                           f"side are out of step, a bug of txdag; report it with this message")
    else:
        try:
            error = builder(*words)
        except (TypeError, ValueError, IndexError) as bad:
            error = TxdagError(f"Lua script {script.name!r} refused with {code} {' '.join(words)}, words its "
                               f"translator cannot read ({bad}): a bug of txdag; report it with this message")
    if where:
        error.args = (f"{where}: {error}", *error.args[1:])
    return error

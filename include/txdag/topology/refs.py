"""References to the user classes a commit must rebuild (a combiner's ``combine``), by name, never by pickle.

A processing step records ``{"module": ..., "name": ..., "params": {...}}`` in the staging seal; the commit task
rebuilds the object from it. ``module`` is ``"job"`` for anything the job file defines or imports (looked up by
name in the job module), or a ``txdag.*`` module for txdag's own classes. Nothing else is imported, and the
rebuilt class must be a subclass of what the caller expects, so a value in Redis cannot make the commit task
build arbitrary objects. ``params`` are a dataclass's fields (JSON values); any other class is built without
arguments, unless its constructor's parameters are attributes of the same names (``Sum("score")`` keeps
``self.field``), which are then its params.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

from txdag.errors import ConfigError

JOB = "job"


def ref_of(obj: Any) -> dict[str, Any]:
    """The reference of ``obj``'s class and parameters; ConfigError when the commit could not rebuild it."""
    cls = type(obj)
    if "<locals>" in cls.__qualname__:
        raise ConfigError(f"{cls.__qualname__} is defined inside a function: define it at the top level of the job "
                          f"file, so that the commit task can rebuild it")
    params = _params(obj)
    try:
        json.dumps(params)
    except (TypeError, ValueError):
        raise ConfigError(f"{cls.__qualname__}'s parameters {params!r} are not JSON values; the commit task rebuilds "
                          f"it from them, so give it JSON-able ones (numbers, strings, lists, dicts)") from None
    module = cls.__module__ if cls.__module__.startswith("txdag.") else JOB
    return {"module": module, "name": cls.__qualname__, "params": params}


def resolve_ref(ref: Any, load_job: Callable[[], ModuleType], base: type | tuple[type, ...]) -> Any:
    """Rebuild the object ``ref`` names; it must be an instance of ``base``."""
    if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) or not isinstance(ref.get("params"), dict):
        raise ConfigError(f"malformed class reference {ref!r} in the staging: replay the txid to process it again")
    module_name = ref.get("module")
    if module_name == JOB:
        module = load_job()
    elif isinstance(module_name, str) and module_name.startswith("txdag."):
        module = importlib.import_module(module_name)
    else:
        raise ConfigError(f"class reference {ref!r} names module {module_name!r}; only the job file and txdag's "
                          f"own modules are looked up")
    found: Any = module
    for part in ref["name"].split("."):
        found = getattr(found, part, None)
    if not isinstance(found, type) or not issubclass(found, base):
        raise ConfigError(f"{ref['name']} is not a {_names(base)} in {getattr(module, '__file__', module_name)}: "
                          f"the job file changed since this txid was processed; replay the txid")
    return found(**ref["params"])


def _names(base: type | tuple[type, ...]) -> str:
    return " or ".join(b.__name__ for b in (base if isinstance(base, tuple) else (base,)))


def _params(obj: Any) -> dict[str, Any]:
    """A dataclass's init fields, else the constructor's parameters read back from same-named attributes."""
    if dataclasses.is_dataclass(obj):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}
    params: dict[str, Any] = {}
    for name, param in inspect.signature(type(obj).__init__).parameters.items():
        if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if not hasattr(obj, name):
            if param.default is param.empty:
                raise ConfigError(f"{type(obj).__qualname__}({name}=...) keeps no attribute {name!r}: the commit task "
                                  f"rebuilds it from its constructor's parameters, so store each as an attribute of "
                                  f"the same name, or make the class a dataclass")
            continue
        params[name] = getattr(obj, name)
    return params

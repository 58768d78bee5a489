"""The job being run, for the operations a ``process`` calls that need it (a stateful step reads its key-value
state as of the txid before, and stages its writes under the txid's attempt)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from txdag.errors import ConfigError
from txdag.state.kv import KVNamespace, ProviderConfig
from txdag.topology.definition import JobSpec, KeyValue


@dataclass(frozen=True)
class JobContext:
    spec: JobSpec
    client_spec: dict[str, Any]  # the Redis of the states and the staging, portable to executors
    kv_configs: Mapping[str, ProviderConfig] = field(default_factory=dict)

    def key_value(self, name: str) -> tuple[KeyValue, ProviderConfig, KVNamespace]:
        from txdag.topology.kvstates import namespace

        found = {k.name: k for k in self.spec.key_values}
        if name not in found:
            raise ConfigError(f"topology {self.spec.topology!r} has no key-value state {name!r} (its key-value "
                              f"states: {sorted(found)}); add KeyValue({name!r}) to the topology's key_values")
        if name not in self.kv_configs:
            raise ConfigError(f"topology {self.spec.topology!r}: no provider config for key-value state {name!r}")
        kv, config = found[name], self.kv_configs[name]
        return kv, config, namespace(kv, self.spec.topology, config)


_CURRENT: ContextVar[JobContext | None] = ContextVar("txdag_job", default=None)


def current_job() -> JobContext:
    job = _CURRENT.get()
    if job is None:
        raise ConfigError("this operation needs the txid being processed: call it inside a txdag job's "
                          "process(batch), run by txdag (spark-submit, warm mode or run_job)")
    return job


@contextlib.contextmanager
def running(job: JobContext) -> Iterator[None]:
    token = _CURRENT.set(job)
    try:
        yield
    finally:
        _CURRENT.reset(token)

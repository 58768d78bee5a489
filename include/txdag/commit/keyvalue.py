"""The commit of a txid's key-value states (seed 002's checkpoint): recover, prepare every state, commit every
state, each step idempotent, hooks first.

Recovery runs first (seed 002's "Recovery"): a crash between the prepare and the commit of every state leaves
the txid prepared everywhere, and it is committed; a crash in the middle of the prepares leaves it prepared in
some states only, and it is rolled back, then prepared again. Every key-value state of the topology is prepared
and committed at every txid, also one the job wrote nothing to (an empty attempt), so that each state's committed
txid follows the topology's and the next txid reads each of them as of this one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from txdag.commit.apply import CommitContext, KVTarget
from txdag.errors import ConfigError
from txdag.faults import crash_if_requested
from txdag.staging.format import OutputSpec
from txdag.state.kv import ProviderConfig, commit, make_client, prepare, recover, seal_stage
from txdag.state.kv.protocol import stage_encoded
from txdag.state.kv.step import StatefulStep

log = logging.getLogger("txdag.commit.phase")


def commit_key_values(ctx: CommitContext, staged: Mapping[str, OutputSpec]) -> int:
    """Prepare then commit every key-value state of the topology (``ctx.key_values``) for ``ctx.tx``, with the
    ``kv`` outputs the job staged (``staged``, by state); returns the states committed."""
    targets = ctx.key_values
    unknown = sorted(set(staged) - set(targets))
    if unknown:
        raise ConfigError(f"topology {ctx.topology!r} {ctx.tx}: staged key-value states {unknown} that the topology "
                          f"does not declare (declared: {sorted(targets)})")
    if not targets:
        return 0
    clients: dict[ProviderConfig, Any] = {}
    for target in targets.values():
        if target.config not in clients:
            clients[target.config] = make_client(target.config)
    try:
        for config, client in clients.items():
            plan = recover(client, [t.namespace for t in targets.values() if t.config == config])
            if plan.action != "nothing":
                log.info("topology=%s txid=%s attempt=%s: key-value recovery: %s", ctx.topology, ctx.tx.txid,
                         ctx.tx.attempt, plan)
        steps = {name: ctx.rebuild(name, spec, StatefulStep) for name, spec in staged.items()}
        for name, target in targets.items():
            client = clients[target.config]
            if name not in staged:  # nothing written this txid: an empty attempt keeps the state in step
                stage_encoded(client, target.namespace, ctx.tx, {})
                seal_stage(client, target.namespace, ctx.tx, 0)
            prepare(client, target.namespace, ctx.tx, hooks=steps.get(name))
        crash_if_requested("prepared", ctx.topology, ctx.tx)  # prepared everywhere, committed nowhere
        for name, target in targets.items():
            commit(clients[target.config], target.namespace, ctx.tx.txid, hooks=steps.get(name))
    finally:
        for client in clients.values():
            client.close()
    return len(targets)


__all__ = ["KVTarget", "commit_key_values"]

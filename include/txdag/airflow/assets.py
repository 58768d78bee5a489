"""A topology's states as Airflow assets, updated by the commit task once per committed txid.

A DAG scheduled on ``state_asset(topology, state)`` (the asset ``txdag://<topology_id>/<state>``) runs after each
commit, with the txid, its attempt and the keys written in the triggering event's extra. The commit task's outlet
is an ``AssetAlias``, not the assets: Airflow adds an event for every asset outlet at every success, so a replay of
a committed txid (a cleared run, whose commit changes nothing) would update them again; through the alias the task
adds an event only for a txid it committed (Airflow 3.3: ``TaskInstance.register_asset_changes_in_db``).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import Asset, AssetAlias, AssetWatcher

from txdag.errors import ConfigError
from txdag.protocol import CommitStepOutcome, Committed
from txdag.topology.assets import commit_extra, source_uri, state_uri
from txdag.topology.topology import TransactionalTopology

log = logging.getLogger("txdag.airflow")


def state_asset(topology: TransactionalTopology | str, state: str) -> Asset:
    """The asset of ``state`` of ``topology`` (its definition, or its id): ``schedule=[state_asset("tweets",
    "hashtags")]`` runs a DAG once per committed txid. Its name is its URI, so ``Asset("txdag://tweets/hashtags")``
    is the same asset."""
    if isinstance(topology, TransactionalTopology) and state not in state_names(topology):
        raise ConfigError(f"topology {topology.topology_id!r} has no state {state!r}: its states are "
                          f"{state_names(topology)}")
    topology_id = topology.topology_id if isinstance(topology, TransactionalTopology) else topology
    uri = state_uri(topology_id, state)
    return Asset(name=uri, uri=uri)


def source_asset(topology_id: str, watcher: Any = None) -> Asset:
    """The asset of the topology's source, ``txdag://<topology_id>``: with ``drain``, the triggerer's ``watcher``
    adds an event to it when the source has a backlog, and the topology's DAG, scheduled on it, starts a run."""
    uri = source_uri(topology_id)
    watchers = [] if watcher is None else [AssetWatcher(name=f"txdag-{topology_id}-backlog", trigger=watcher)]
    return Asset(name=uri, uri=uri, watchers=watchers)


def state_names(topology: TransactionalTopology) -> list[str]:
    """Every state the commit writes: the map states, then the key-value states."""
    return [s.name for s in topology.states] + [k.name for k in topology.key_values]


def commits_alias(topology_id: str) -> AssetAlias:
    """The commit task's outlet, through which it adds its states' events."""
    return AssetAlias(name=f"txdag:{topology_id}:commits")


def announce(context: Any, topology: TransactionalTopology, outcome: CommitStepOutcome) -> None:
    """One event per state for a txid this try committed; none for any other outcome (already committed: a replay,
    or waiting, refused...). Airflow records them when the task succeeds."""
    if not isinstance(outcome, Committed):
        return
    events = context["outlet_events"][commits_alias(topology.topology_id)]
    names = state_names(topology)
    for name in names:
        events.add(state_asset(topology, name),
                   extra=commit_extra(outcome.tx, topology.topology_id, name, outcome.applied + outcome.skipped))
    log.info("topology=%s txid=%s attempt=%s: an event for the asset of each state (%s), once this task succeeds",
             topology.topology_id, outcome.tx.txid, outcome.tx.attempt, ", ".join(state_uri(topology.topology_id, n)
                                                                                  for n in names))

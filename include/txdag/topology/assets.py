"""The Airflow assets of a topology's states, as data: the ``txdag://`` URI scheme and what a commit's event says.

Each state of a topology (a map state or a key-value state) is the asset ``txdag://<topology_id>/<state>``. The
commit task updates every one of them once per committed txid, and not again when a committed txid is replayed
(``txdag.airflow.assets``). A topology's source is the asset ``txdag://<topology_id>``: with ``drain=Backlog(...)``
Airflow's triggerer updates it when the source has a backlog, which starts the topology's next run
(``txdag.txid.backlog``). Airflow-free: the provider's URI handler and the unit tests use it as it is.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult, urlunsplit

from txdag.attempt import TransactionAttempt
from txdag.topology.definition import NAME, check_name

SCHEME = "txdag"
SHAPE = ("txdag://<topology_id>/<state> (letters, digits, '_', '.' or '-' in each), e.g. txdag://tweets/hashtags, "
         "or txdag://<topology_id> for its source")


def state_uri(topology_id: str, state: str) -> str:
    """The URI of ``state``'s asset: a state name is unique in its topology, a topology id in its Airflow."""
    return f"{SCHEME}://{check_name('topology_id', topology_id)}/{check_name('a state name', state)}"


def source_uri(topology_id: str) -> str:
    """The URI of the topology's source asset, whose events start its runs when it drains a backlog."""
    return f"{SCHEME}://{check_name('topology_id', topology_id)}"


def check_uri(parts: SplitResult) -> SplitResult:
    """Airflow's handler of the ``txdag`` scheme (the provider's ``asset-uris``; Airflow has lower-cased the scheme
    and dropped trailing slashes and the fragment): a URI that names no state fails the DAG file that wrote it,
    rather than scheduling a DAG on an asset no commit ever updates. No path: the topology's source."""
    state = parts.path.removeprefix("/")
    if parts.query or not NAME.match(parts.netloc) or not (state == "" or NAME.match(state)):
        raise ValueError(f"asset URI {urlunsplit(parts)!r} names no txdag state or source: write {SHAPE}, or "
                         "txdag.airflow.state_asset(topology, state)")
    return parts


def commit_extra(tx: TransactionAttempt, topology_id: str, state: str, keys: int) -> dict[str, Any]:
    """The extra of the event that the commit of ``tx`` adds to ``state``'s asset. ``keys``: what the committing try
    wrote or found written already, the topology's states together (docs/topologies.md: 0 when an interrupted
    earlier try had written everything but the commit's record)."""
    return {"topology": topology_id, "state": state, "txid": tx.txid, "attempt": tx.attempt, "keys": keys}

"""One owner per topology: the fingerprint of a definition, what changed between two, and the DAG files that
define a topology id.

The fingerprint covers what a txid writes and where it reads from: the source (its type, kind, streams or prefix,
connections), every state (name, kind, Redis namespace, key fields, separator), the key-value states, the Redis
connection of the states and the marker key. Two definitions with the same fingerprint write the same txids into
the same places, so either may run the topology; a different fingerprint would put one set of txids into two
states, and the coordinate task refuses it until ``txdag topology accept`` records it (``txdag.protocol.ownership``).

Left out on purpose, so that they change without a confirmation: the batch size (``max_transaction_size``,
``max_per_partition``: a txid's batch is planned once and kept in ZooKeeper, so a new size applies to new txids
and replays keep theirs), ``max_active_transactions``, the schedule, retries, the Spark job and its settings.

Duplicates are found without running anything: a DAG file defines a topology id when it calls
``TransactionalTopology`` with that id as a literal (first argument or ``topology_id=``), or passes it as
``topology_id=`` to any call (``dataclasses.replace``). A file is read only when its text holds the id.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txdag.errors import ConfigError
from txdag.topology.topology import TransactionalTopology

FINGERPRINT_SCHEME = 1  # bump when what the fingerprint covers changes (see txdag.zk.records.OwnerRecord)
BATCH_SIZES = ("max_transaction_size", "max_per_partition")  # tuning, not identity (see the module docstring)
WHERE = ("file",)  # where a user's source class was read from: the same class moved with its project is the same
ABSENT = object()


def definition_of(t: TransactionalTopology) -> dict[str, Any]:
    """The fingerprinted parts of ``t``, flat: ``"<group>.<field>": value`` (groups: ``source``, ``topology``,
    ``state <name>``, ``key_value <name>``, ``sink <name>``), so that a difference reads as what changed."""
    source = {k: v for k, v in t.source.to_dict().items() if k not in BATCH_SIZES + WHERE}
    if isinstance(source.get("params"), Mapping):  # a source class's fields (txdag.spouts.base.Source.to_dict)
        source["params"] = without_batch_sizes(source["params"])
    parts: dict[str, Any] = {f"source.{k}": v for k, v in {**source, "kind": t.source.kind.value}.items()}
    parts.update({"topology.redis_conn_id": t.redis_conn_id, "topology.marker_key": t.marker_key})
    for s in t.states:
        parts.update({f"state {s.name}.{k}": v for k, v in
                      {"kind": s.kind, "namespace": s.redis_key, "key_fields": s.key_fields,
                       "separator": s.separator}.items()})
        if s.store is not None:
            parts[f"state {s.name}.store"] = s.store_ref
    for k in t.key_values:
        parts.update({f"key_value {k.name}.{f}": v for f, v in
                      {**k.to_dict(), "namespace": k.namespace_of(t.topology_id)}.items() if f != "name"})
    parts.update({f"sink {s.name}.declared": True for s in t.sinks})
    return json.loads(json.dumps(parts))  # as ZooKeeper gives it back: lists, not tuples


def as_now(definition: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded definition as :func:`definition_of` writes it now: a record made before a source class's batch
    size (under ``source.params``) left the fingerprint still holds it, and is the same definition without it."""
    params = definition.get("source.params")
    if not isinstance(params, Mapping):
        return dict(definition)
    return {**definition, "source.params": without_batch_sizes(params)}


def without_batch_sizes(params: Mapping[str, Any]) -> dict[str, Any]:
    """A source class's fields without its batch size (tuning, not identity)."""
    return {k: v for k, v in params.items() if k not in BATCH_SIZES}


def same_definition(recorded: Mapping[str, Any], recorded_fingerprint: str, owner: Owner) -> bool:
    """Whether ``owner`` is the recorded definition (its fingerprint, or what the record holds read as now)."""
    return recorded_fingerprint == owner.fingerprint or fingerprint(as_now(recorded)) == owner.fingerprint


def fingerprint(definition: Mapping[str, Any]) -> str:
    """A stable short hash of :func:`definition_of`'s parts (key order does not matter)."""
    text = json.dumps(definition, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs from ``old`` to ``new``, one phrase per change: a state added or removed as a whole, else
    each field (``state 'words' namespace: 'word_count' -> 'words2'``)."""
    groups = sorted({k.split(".", 1)[0] for k in (*old, *new)})
    out: list[str] = []
    for group in groups:
        before = {k: v for k, v in old.items() if k.split(".", 1)[0] == group}
        after = {k: v for k, v in new.items() if k.split(".", 1)[0] == group}
        label = _label(group)
        if not before or not after:
            out.append(f"{label} {'added' if after else 'removed'}")
            continue
        for key in sorted(before.keys() | after.keys()):
            a, b = before.get(key, ABSENT), after.get(key, ABSENT)
            if a != b:
                out.append(f"{label} {key.split('.', 1)[1]}: {_show(a)} -> {_show(b)}")
    return out


def _label(group: str) -> str:
    kind, _, name = group.partition(" ")
    return f"{kind.replace('_', '-')} {name!r}" if name else kind


def _show(value: Any) -> str:
    return "(none)" if value is ABSENT else repr(value)


def dag_file_label(dag_file: str | Path | None, project_dir: str | None) -> str | None:
    """How the owner's DAG file is recorded: relative to the project (``dags/word_count.py``), so that it reads
    the same on every machine and bundle version; absolute when the file is elsewhere."""
    if dag_file is None:
        return None
    path = Path(dag_file).resolve()
    if project_dir is not None:
        try:
            return str(path.relative_to(Path(project_dir).resolve()))
        except ValueError:
            pass
    return str(path)


@dataclass(frozen=True)
class Owner:
    """A definition as an owner of its topology: where it comes from, and its fingerprinted parts."""

    topology_id: str
    dag_file: str | None
    definition: dict[str, Any] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.definition)

    @classmethod
    def of(cls, t: TransactionalTopology, dag_file: str | Path | None = None) -> Owner:
        return cls(t.topology_id, dag_file_label(dag_file, t.project_dir), definition_of(t))


# --- the DAG files that define a topology id -----------------------------------------------------------------


def names(path: str | Path, topology_id: str) -> bytes | None:
    """The file's text when it holds ``topology_id`` in quotes (a file that may define it, or meant to: one that
    does not parse), else None."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data if any(f"{q}{topology_id}{q}".encode() in data for q in "\"'") else None


def defines(path: str | Path, topology_id: str) -> bool:
    """Whether the file's code defines ``topology_id`` as a literal (see the module docstring). Only a file whose
    text holds the id in quotes is parsed."""
    data = names(path, topology_id)
    if data is None:
        return False
    try:
        tree = ast.parse(data, filename=str(path))
    except (SyntaxError, ValueError):
        return False  # Airflow reports that file's own error
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        named = [k.value for k in node.keywords if k.arg == "topology_id"]
        if callee == "TransactionalTopology" and node.args:
            named.append(node.args[0])
        if any(isinstance(v, ast.Constant) and v.value == topology_id for v in named):
            return True
    return False


def files_defining(files: Iterable[str | Path], topology_id: str) -> list[Path]:
    """The files among ``files`` that define ``topology_id``, in path order (the order ``load_definitions`` and
    the parse-time check use: the first one keeps the topology)."""
    unique = {os.path.abspath(f) for f in files if str(f).endswith(".py")}
    return sorted(Path(f) for f in unique if defines(f, topology_id))


def check_one_file(topology_id: str, dag_file: str | Path, defining: Iterable[Path]) -> None:
    """Raise ConfigError, naming both files, when a file before ``dag_file`` in path order among ``defining`` (the
    DAG folder's files that define ``topology_id``, :func:`files_defining`) defines it too. The first file keeps the
    topology; every later one fails."""
    this = Path(os.path.abspath(dag_file))
    earlier = sorted(p for p in defining if p < this and not _same(p, this))
    if earlier:
        raise ConfigError(
            f"topology {topology_id!r} is defined by two DAG files, {earlier[0]} and {this}: a topology has one DAG "
            f"file, so Airflow loads {earlier[0]} (the first in path order) and {this} fails to import: the "
            f"topology's runs use {earlier[0]}'s definition. Keep the file whose definition you mean to run and "
            f"delete the other, or give it its own topology_id: `txdag topology owner {topology_id}` names the "
            f"recorded owner and which file to delete; to change the topology on purpose, edit one file (docs/"
            f"topologies.md, 'Changing a topology on purpose')"
        )


PATH_ORDER = "the first in path order"
AIRFLOW_SAYS = "Airflow's API: the DAG's fileloc"


def two_files(topology_id: str, loaded: str, others: list[str], owner: str | None,
              seen: str = PATH_ORDER) -> dict[str, Any]:
    """What to do about a topology defined by several DAG files: Airflow loads ``loaded`` (``seen``: the first in
    path order, as :func:`check_one_file` fails the others' import, or what Airflow's API answered), so the runs
    use its definition; ``owner`` is the DAG file the ZooKeeper record names (None: none recorded yet). Returns the
    facts and the ways out, in the order to try them: keep the recorded owner (delete the others); or keep the
    running copy (delete the rest, accept it)."""
    files = [loaded, *others]
    if owner is None or owner not in files:
        keep = [f"keep the file whose definition you mean to run and delete the others ({', '.join(files)})"
                + (": the next coordinate records the loaded one as the owner" if owner is None else
                   f", then `txdag topology accept {topology_id}` (the recorded owner {owner} is none of them)")]
    elif owner == loaded:
        keep = [f"delete {', '.join(others)}: Airflow runs {loaded}, the recorded owner, and the copy fails to "
                "import"]
    else:
        rest = [f for f in files if f != owner]
        keep = [f"to run the recorded owner's definition again: delete {', '.join(rest)} (Airflow then loads "
                f"{owner}; the txids the copy ran stay as committed)",
                f"to keep the definition Airflow runs now: delete {', '.join(f for f in files if f != loaded)}, then "
                f"`txdag topology accept {topology_id}`"]
    running = "the recorded owner" if owner == loaded else "not the recorded owner" if owner else "no owner recorded"
    head = (f"topology {topology_id!r} is defined by {len(files)} DAG files: Airflow loads {loaded} ({seen}; the "
            f"others fail to import), so its runs use {loaded}'s definition ({running}"
            + (f": that is {owner}" if owner and owner != loaded else "") + ")")
    return {"loaded": loaded, "others": others, "owner": owner, "runs_owner": owner == loaded, "seen": seen,
            "message": head, "ways_out": keep}


def _same(a: Path, b: Path) -> bool:
    try:
        return a == b or os.path.samefile(a, b)
    except OSError:
        return False

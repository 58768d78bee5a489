"""What txdag keeps in ZooKeeper, as frozen dataclasses serialised to JSON bytes with a format version.

Pure: no kazoo here. Every reader takes the znode path so that a refusal names the node an operator must
look at. Format version 1 (``"v": 1``) is the only one this code reads; anything else, or bytes that are
not a record of the expected shape, raise :class:`~txdag.errors.FormatVersionError`.
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any, NoReturn

from txdag.attempt import TransactionAttempt
from txdag.errors import FormatVersionError

FORMAT_VERSION = 1
HISTORY_LIMIT = 20
OWNER_HOW = ("adopted", "accepted")


class TxStatus(str, enum.Enum):
    """Where a txid is in its life: emitted → processed → committing → committed, or failed (then re-emitted)."""

    EMITTED = "emitted"
    PROCESSED = "processed"
    COMMITTING = "committing"
    COMMITTED = "committed"
    FAILED = "failed"


IN_FLIGHT = (TxStatus.EMITTED, TxStatus.PROCESSED, TxStatus.COMMITTING)  # neither committed nor failed


@dataclass(frozen=True)
class TopologyRecord:
    """The topology's counters; the znode's version guards every allocation and commit (compare-and-set)."""

    last_txid: int = 0
    committed_txid: int = 0

    def to_bytes(self) -> bytes:
        return _dump({"last_txid": self.last_txid, "committed_txid": self.committed_txid})

    @classmethod
    def from_bytes(cls, data: bytes, path: str) -> TopologyRecord:
        obj = _load(data, path, "topology record")
        rec = cls(_int(obj, "last_txid", path), _int(obj, "committed_txid", path))
        if rec.committed_txid > rec.last_txid:
            _malformed(path, "topology record", f"committed_txid {rec.committed_txid} > last_txid {rec.last_txid}")
        return rec


@dataclass(frozen=True)
class HistoryEntry:
    """One step of a txid's life, kept so an operator can see what happened to it."""

    attempt: int
    status: TxStatus
    at: str
    error: str | None = None


@dataclass(frozen=True)
class TxidRecord:
    """A txid's metadata and status. ``failed_by`` is the txid whose failure cascaded here (itself if it failed).

    ``commit_begun`` is set the first time the txid enters COMMITTING and never cleared: part of its batch may
    be in the state already, so its metadata is frozen for every later emission, whatever the spout kind.
    ``auto_replay`` marks a FAILED txid that failed only because txid ``failed_by`` was re-emitted with a different
    batch (an opaque spout's retry): txdag re-emits it itself once ``failed_by`` is committed (Storm re-emits every
    later batch); leaving FAILED clears it. ``planned_on`` is the digest (:func:`digest_of`) of txid - 1's metadata
    that this batch was planned after (None: txid 1, or a record of a txdag before it was kept): a failed txid's
    processed batch may be committed only while it matches the metadata committed for txid - 1.
    """

    txid: int
    attempt: int
    status: TxStatus
    run_id: str
    metadata: dict[str, Any]
    updated_at: str
    failed_by: int | None = None
    error: str | None = None
    commit_begun: bool = False
    history: tuple[HistoryEntry, ...] = field(default=())
    auto_replay: bool = False
    planned_on: str | None = None

    @property
    def tx(self) -> TransactionAttempt:
        return TransactionAttempt(self.txid, self.attempt)

    @classmethod
    def new(cls, txid: int, run_id: str, metadata: dict[str, Any], at: str) -> TxidRecord:
        """The record of a freshly allocated txid: attempt 1, EMITTED."""
        entry = HistoryEntry(1, TxStatus.EMITTED, at)
        return cls(txid, 1, TxStatus.EMITTED, run_id, metadata, at, history=(entry,))

    @property
    def metadata_digest(self) -> str:
        """:func:`digest_of` this record's metadata (what a later txid's ``planned_on`` names)."""
        return digest_of(self.metadata)

    def moved(self, status: TxStatus, at: str, **changes: Any) -> TxidRecord:
        """A copy in ``status`` with ``changes`` applied (attempt, metadata, failed_by, error, run_id).

        The step is appended to the history (capped at HISTORY_LIMIT entries); leaving FAILED clears the
        failure fields, entering COMMITTING freezes the metadata.
        """
        if status is not TxStatus.FAILED:
            changes.setdefault("failed_by", None)
            changes.setdefault("error", None)
            changes.setdefault("auto_replay", False)
        rec = replace(self, status=status, updated_at=at, **changes)
        entry = HistoryEntry(rec.attempt, status, at, rec.error if status is TxStatus.FAILED else None)
        frozen = rec.commit_begun or status is TxStatus.COMMITTING
        return replace(rec, commit_begun=frozen, history=(rec.history + (entry,))[-HISTORY_LIMIT:])

    def to_bytes(self) -> bytes:
        obj = asdict(self)
        obj["status"] = self.status.value
        obj["history"] = [_entry_dict(e) for e in self.history]
        return _dump(obj)

    @classmethod
    def from_bytes(cls, data: bytes, path: str) -> TxidRecord:
        obj = _load(data, path, "txid record")
        metadata = obj.get("metadata")
        history = obj.get("history", [])
        if not isinstance(metadata, dict) or not isinstance(history, list):
            _malformed(path, "txid record", "'metadata' must be an object and 'history' a list")
        return cls(
            txid=_int(obj, "txid", path),
            attempt=_int(obj, "attempt", path),
            status=_status(obj.get("status"), path),
            run_id=_str(obj, "run_id", path),
            metadata=metadata,
            updated_at=_str(obj, "updated_at", path),
            failed_by=_int(obj, "failed_by", path, optional=True),
            error=_str(obj, "error", path, optional=True),
            commit_begun=bool(obj.get("commit_begun", False)),
            history=tuple(_entry(e, path) for e in history),
            auto_replay=bool(obj.get("auto_replay", False)),
            planned_on=_str(obj, "planned_on", path, optional=True),
        )


def digest_of(metadata: dict[str, Any]) -> str:
    """A short digest of a batch's metadata (canonical JSON), to tell later whether a batch is still the one a later
    txid was planned after."""
    return hashlib.sha256(json.dumps(metadata, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class OwnerRecord:
    """The definition that owns the topology (one owner per topology, ``txdag.protocol.ownership``): the DAG file
    it comes from, its fingerprint and the fingerprinted parts (so a refusal can name what changed), since when,
    and how it became the owner: ``adopted`` by the first coordinate of a topology without an owner (topologies
    from before owners were recorded too), or ``accepted`` by ``txdag topology accept``.

    ``scheme`` is what the fingerprint covers (``txdag.topology.owner.FINGERPRINT_SCHEME``); a txdag that covers
    something new bumps it, and a record of another scheme is adopted again rather than refused. Adding a field
    here keeps format version 1 only when readers of version 1 may ignore it.
    """

    dag_file: str | None
    fingerprint: str
    definition: dict[str, Any]
    since: str
    how: str = "adopted"
    scheme: int = 1

    def to_bytes(self) -> bytes:
        return _dump(asdict(self))

    @classmethod
    def from_bytes(cls, data: bytes, path: str) -> OwnerRecord:
        obj = _load(data, path, "owner record")
        if not isinstance(obj.get("definition"), dict) or obj.get("how") not in OWNER_HOW:
            _malformed(path, "owner record", f"'definition' must be an object and 'how' one of {list(OWNER_HOW)}")
        return cls(_str(obj, "dag_file", path, optional=True), _str(obj, "fingerprint", path), obj["definition"],
                   _str(obj, "since", path), obj["how"], _int(obj, "scheme", path))


@dataclass(frozen=True)
class RunRecord:
    """Which txid an Airflow run owns, so a cleared run re-emits its own txid."""

    txid: int

    def to_bytes(self) -> bytes:
        return _dump({"txid": self.txid})

    @classmethod
    def from_bytes(cls, data: bytes, path: str) -> RunRecord:
        return cls(_int(_load(data, path, "run record"), "txid", path))


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps({"v": FORMAT_VERSION, **obj}, sort_keys=True, separators=(",", ":")).encode()


def _load(data: bytes | None, path: str, kind: str) -> dict[str, Any]:
    """Parse and check the envelope: a JSON object whose "v" this code knows."""
    try:
        obj = json.loads(data or b"")
    except (UnicodeDecodeError, ValueError) as exc:
        _malformed(path, kind, f"not JSON ({exc})")
    if not isinstance(obj, dict):
        _malformed(path, kind, "not a JSON object")
    if obj.get("v") != FORMAT_VERSION:
        raise FormatVersionError(
            f"znode {path} holds a {kind} of format version {obj.get('v')!r}; this txdag reads version "
            f"{FORMAT_VERSION} only: run the txdag version that wrote it, or upgrade txdag"
        )
    return obj


def _malformed(path: str, kind: str, why: str) -> NoReturn:
    raise FormatVersionError(
        f"znode {path} does not hold a valid txdag {kind}: {why}. It was written by something else or is "
        f"corrupted: inspect it (zkCli.sh get {path}), then restore or delete it"
    )


def _int(obj: dict[str, Any], name: str, path: str, optional: bool = False) -> Any:
    value = obj.get(name)
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _malformed(path, "record", f"field {name!r} must be an int >= 0, got {value!r}")
    return value


def _str(obj: dict[str, Any], name: str, path: str, optional: bool = False) -> Any:
    value = obj.get(name)
    if not (isinstance(value, str) or (optional and value is None)):
        _malformed(path, "record", f"field {name!r} must be a string, got {value!r}")
    return value


def _status(value: Any, path: str) -> TxStatus:
    try:
        return TxStatus(value)
    except ValueError:
        _malformed(path, "record", f"unknown status {value!r} (known: {[s.value for s in TxStatus]})")


def _entry(obj: Any, path: str) -> HistoryEntry:
    if not isinstance(obj, dict):
        _malformed(path, "txid record", f"history entry {obj!r} is not an object")
    return HistoryEntry(_int(obj, "attempt", path), _status(obj.get("status"), path), _str(obj, "at", path),
                        _str(obj, "error", path, optional=True))


def _entry_dict(entry: HistoryEntry) -> dict[str, Any]:
    obj: dict[str, Any] = {"attempt": entry.attempt, "status": entry.status.value, "at": entry.at}
    if entry.error is not None:
        obj["error"] = entry.error
    return obj

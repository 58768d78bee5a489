"""Transaction metadata in ZooKeeper, written the kazoo-recipe way: versioned compare-and-set, several znodes
per ``client.transaction()``, ``client.retry`` for connection loss, cleanup that tolerates nodes already gone.

Layout (one subtree per topology; every value is a versioned JSON record from :mod:`txdag.zk.records`)::

    <root>/<topology>                     TopologyRecord {last_txid, committed_txid}; its znode version is
                                          the compare-and-set guard of every allocation and commit
    <root>/<topology>/txids/<txid:020d>   TxidRecord: attempt, status, run_id, metadata, history
    <root>/<topology>/runs/<quoted run>   RunRecord {txid}: the Airflow run that owns a txid, kept far
                                          longer than txids (keep_runs) so a cleared old run finds its txid
    <root>/<topology>/lock                kazoo Lock recipe: one coordinator allocates at a time
    <root>/<topology>/owner               OwnerRecord: the definition that owns the topology (its DAG file and
                                          fingerprint); missing until the first coordinate adopts one

Like Storm's RotatingTransactionalState, only recent txids are kept: :meth:`TransactionStore.cleanup_before`.
:func:`topology_ids` lists the topologies under a root.

kazoo's exceptions stay in this package: every call goes through ``_retry``, which raises them as txdag errors
(:func:`zk_error`), so the coordinator and the edges catch TxdagErrors only.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar, cast
from urllib.parse import quote

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    LockTimeout,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.lock import Lock
from kazoo.retry import RetryFailedError

from txdag.defaults import ZK_ROOT
from txdag.errors import ConfigError, ServiceUnavailable, TxdagError
from txdag.zk.client import how_to_start
from txdag.zk.records import OwnerRecord, RunRecord, TopologyRecord, TxidRecord

log = logging.getLogger("txdag.zk")
T = TypeVar("T")
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


class VersionConflict(TxdagError):
    """Another writer changed a znode between our read and our write: re-read and decide again."""


class AllocationRefused(TxdagError):
    """A txid that is not ``last_txid + 1``: txids are allocated in order, with no gaps."""


class LockBusy(TxdagError):
    """Another coordinator held the topology's lock for the whole timeout (kazoo's LockTimeout)."""


class ZnodeMissing(TxdagError):
    """A znode is not there (kazoo's NoNodeError): never created, already cleaned up, or deleted by hand."""


class ZnodeExists(TxdagError):
    """A znode to create is there already (kazoo's NodeExistsError)."""


def txid_node(txid: int) -> str:
    """Zero-padded so that a lexical listing is in txid order."""
    return f"{txid:020d}"


def run_node(run_id: str) -> str:
    """A znode-safe name for an Airflow run_id (which holds ':', '+', maybe '/')."""
    name = quote(run_id, safe="")
    return name.replace(".", "%2E") if name in (".", "..") else name


def topology_ids(client: KazooClient, root: str = ZK_ROOT) -> list[str]:
    """The topologies with a subtree under ``root`` (none before the first one ran): each a ``TransactionStore(
    client, id, root)``, listed without naming one. Waits and errors as a store's reads do."""

    def unavailable(what: str) -> ServiceUnavailable:
        return ServiceUnavailable(f"ZooKeeper at {hosts_of(client)} {what} (listing the topologies under {root}); "
                                  f"{how_to_start()}")

    def children() -> list[str]:
        wait_connected(client, unavailable)
        return cast(list[str], client.get_children(root))

    try:
        return sorted(client.retry(children))
    except NoNodeError:
        return []
    except NoAuthError:
        raise ConfigError(f"ZooKeeper refused to list {root} (NoAuth): give this connection the digest user and "
                          "password its topologies' znodes were created with") from None
    except (KazooException, KazooTimeoutError) as exc:
        raise unavailable(f"stopped answering ({type(exc).__name__}: {exc})") from None


def wait_connected(client: KazooClient, unavailable: Callable[[str], TxdagError]) -> None:
    """Wait up to the (requested) session timeout for a connection; past it the session is likely lost anyway,
    and the task's retry is the better place to wait. kazoo queues a request made while disconnected until the
    connection is back, however long that takes: without this bounded wait a task would hang."""
    seconds = client._session_timeout / 1000  # kazoo keeps the timeout given to KazooClient here
    deadline = time.monotonic() + seconds
    while not client.connected:
        if client.client_state == "CLOSED":
            raise unavailable("cannot be used: this client was stopped (close_zk)")
        if time.monotonic() >= deadline:
            raise unavailable(f"has been unreachable for {seconds:g}s")
        time.sleep(0.05)


def hosts_of(client: KazooClient) -> str:
    """The client's hosts (and chroot), as ZooKeeper spells them."""
    return ",".join(f"{h}:{p}" for h, p in client.hosts or ()) + (client.chroot or "")


class TransactionStore:
    """The znodes of one topology. Readers return ``(record, version)``; writers take the versions back."""

    def __init__(self, client: KazooClient, topology: str, root: str = ZK_ROOT, *, keep_runs: int = 10000):
        if not isinstance(topology, str) or not _NAME.match(topology) or topology in (".", ".."):
            raise ConfigError(
                f"topology id {topology!r} cannot name a znode: use letters, digits, '_', '-' and '.' "
                "(the DAG id usually)"
            )
        if not isinstance(root, str) or not root.startswith("/"):
            raise ConfigError(f"ZooKeeper root {root!r} must be an absolute znode path such as '/txdag'")
        if isinstance(keep_runs, bool) or not isinstance(keep_runs, int) or keep_runs < 1:
            raise ConfigError(f"keep_runs must be an int >= 1, got {keep_runs!r}")
        self.client = client
        self.topology = topology
        self.keep_runs = keep_runs
        self.path = f"{root.rstrip('/')}/{topology}"
        self.txids_path = f"{self.path}/txids"
        self.runs_path = f"{self.path}/runs"
        self.lock_path = f"{self.path}/lock"
        self.owner_path = f"{self.path}/owner"
        self.unreleased: list[Lock] = []  # lock nodes an outage kept us from deleting; see TopologyLock

    def __repr__(self) -> str:
        return f"TransactionStore({self.path!r})"

    def txid_path(self, txid: int) -> str:
        return f"{self.txids_path}/{txid_node(txid)}"

    def run_path(self, run_id: str) -> str:
        return f"{self.runs_path}/{run_node(run_id)}"

    def ensure(self) -> None:
        """Create the topology's znodes if missing (idempotent, safe when several processes race)."""
        self._retry(self.client.ensure_path, self.path.rsplit("/", 1)[0] or "/")
        for path, data in ((self.path, TopologyRecord().to_bytes()), (self.txids_path, b""),
                           (self.runs_path, b""), (self.lock_path, b"")):
            try:
                self._retry(self.client.create, path, data)
            except ZnodeExists:
                pass

    def forget(self) -> None:
        """Delete every record of the topology (txids, runs, lock): ``txdag reset`` starts it over."""
        self._retry(lambda: self.client.delete(self.path, recursive=True))

    def read_topology(self) -> tuple[TopologyRecord, int]:
        try:
            data, stat = self._retry(self.client.get, self.path)
        except ZnodeMissing:
            raise TxdagError(
                f"topology {self.topology!r} has no znode {self.path}: call TransactionStore.ensure() (the "
                "coordinator does) before reading it, or check the ZooKeeper root"
            ) from None
        return TopologyRecord.from_bytes(data, self.path), stat.version

    def read_txid(self, txid: int) -> tuple[TxidRecord, int] | None:
        return self.read_txids([txid]).get(txid)

    def commit_begun(self, txid: int) -> bool:
        """Has ``txid``'s commit ever begun? (A marker one ahead of committed_txid is only sound then.)"""
        got = self.read_txid(txid)
        return got is not None and got[0].commit_begun

    def read_txids(self, txids: Iterable[int]) -> dict[int, tuple[TxidRecord, int]]:
        """Several txid records in one pipelined round trip; txids without a znode are left out."""
        wanted = list(txids)
        found = self._retry(self._get_many, [self.txid_path(t) for t in wanted])
        return {t: (TxidRecord.from_bytes(got[0], self.txid_path(t)), got[1].version)
                for t, got in zip(wanted, found) if got is not None}

    def txid_of_run(self, run_id: str) -> int | None:
        try:
            data, _ = self._retry(self.client.get, self.run_path(run_id))
        except ZnodeMissing:
            return None
        return RunRecord.from_bytes(data, self.run_path(run_id)).txid

    def list_txids(self) -> list[int]:
        """The txids that still have a znode, ascending."""
        return sorted(int(n) for n in self._retry(self.client.get_children, self.txids_path) if n.isdigit())

    def allocate(self, record: TxidRecord, topology: TopologyRecord, version: int) -> None:
        """One transaction: bump last_txid (compare-and-set on ``version``), create the txid and run znodes."""
        if record.txid != topology.last_txid + 1:
            raise AllocationRefused(
                f"topology {self.topology!r}: creating metadata for txid {record.txid} before txid "
                f"{topology.last_txid + 1} refused: the last allocated txid is {topology.last_txid}, and txids "
                "are allocated in order with no gaps; re-read the topology and allocate the next one"
            )
        bumped = TopologyRecord(record.txid, topology.committed_txid)
        ops = [("set", self.path, bumped.to_bytes(), version),
               ("create", self.txid_path(record.txid), record.to_bytes(), -1),
               ("create", self.run_path(record.run_id), RunRecord(record.txid).to_bytes(), -1)]
        try:
            self._transact(ops, f"allocating txid {record.txid}")
        except VersionConflict:
            if not self._already_allocated(record):
                raise

    def update(self, records: Sequence[tuple[TxidRecord, int]],
               topology: tuple[TopologyRecord, int] | None = None) -> None:
        """One transaction of versioned sets. Passing the topology (even unchanged) also guards against a
        txid allocated meanwhile. Raises VersionConflict if any znode changed since it was read."""
        ops = [("set", self.txid_path(r.txid), r.to_bytes(), v) for r, v in records]
        if topology is not None:
            ops.append(("set", self.path, topology[0].to_bytes(), topology[1]))
        if ops:
            self._transact(ops, "updating txids " + ", ".join(str(r.txid) for r, _ in records))

    def read_owner(self) -> tuple[OwnerRecord, int] | None:
        """The topology's owner and its znode version; None when none is recorded (or the topology never ran)."""
        try:
            data, stat = self._retry(self.client.get, self.owner_path)
        except ZnodeMissing:
            return None
        return OwnerRecord.from_bytes(data, self.owner_path), stat.version

    def write_owner(self, record: OwnerRecord, version: int | None) -> bool:
        """Create the owner znode (``version`` None) or replace the one read at ``version``; False when another
        writer got there first (it exists already, or changed since): re-read and decide again."""
        try:
            if version is None:
                self.ensure()
                self._retry(self.client.create, self.owner_path, record.to_bytes())
            else:
                self._retry(self.client.set, self.owner_path, record.to_bytes(), version)
        except (ZnodeExists, VersionConflict, ZnodeMissing):
            return False
        return True

    def cleanup_before(self, txid: int) -> list[int]:
        """Delete the txid znodes below ``txid`` (Storm's cleanupBefore); nodes already gone are fine."""
        deleted = []
        for old in self.list_txids():
            if old >= txid:
                break
            try:
                self._retry(self.client.delete, self.txid_path(old))
                deleted.append(old)
            except ZnodeMissing:
                pass
        return deleted

    def cleanup_runs(self, committed_txid: int) -> int:
        """Keep the newest ``keep_runs`` run znodes; prune only past a 10% slack so that it stays rare, and
        only runs of committed txids. Returns how many were deleted."""
        names = self._retry(self.client.get_children, self.runs_path)
        if len(names) <= self.keep_runs + self.keep_runs // 10:
            return 0
        paths = [f"{self.runs_path}/{n}" for n in names]
        found = self._retry(self._get_many, paths)
        owned = sorted((RunRecord.from_bytes(got[0], p).txid, p) for p, got in zip(paths, found) if got)
        doomed = [p for txid, p in owned[: max(0, len(owned) - self.keep_runs)] if txid <= committed_txid]
        for path in doomed:
            try:
                self._retry(self.client.delete, path)
            except ZnodeMissing:
                pass
        return len(doomed)

    def lock(self) -> TopologyLock:
        """The coordinator's lock (kazoo Lock recipe); use as ``with store.lock():``."""
        ident = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"
        return TopologyLock(self, self.client.Lock(self.lock_path, identifier=ident))

    # -- plumbing -------------------------------------------------------------------------------------

    def _get_many(self, paths: list[str]) -> list[tuple[bytes, Any] | None]:
        asyncs = [self.client.get_async(p) for p in paths]
        out: list[tuple[bytes, Any] | None] = []
        for result in asyncs:
            try:
                out.append(result.get())
            except NoNodeError:
                out.append(None)
        return out

    def _transact(self, ops: list[tuple[str, str, bytes, int]], what: str) -> None:
        def attempt() -> list[Any]:
            tx = self.client.transaction()
            for kind, path, data, version in ops:
                if kind == "set":
                    tx.set_data(path, data, version)
                else:
                    tx.create(path, data)
            return cast(list[Any], tx.commit())

        results = self._retry(attempt)
        for (kind, path, _, version), result in zip(ops, results):  # the first non-RolledBack is the cause
            if isinstance(result, NoAuthError):
                raise self._no_auth(path)
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise VersionConflict(
                    f"topology {self.topology!r}: {what} conflicted at {path} ({type(result).__name__}, "
                    f"{kind} at version {version}): another writer changed it; re-read and retry"
                )

    def _already_allocated(self, record: TxidRecord) -> bool:
        """After a conflict: did our own allocation land (a commit retried after a lost connection)?"""
        got = self._retry(self._get_many, [self.txid_path(record.txid)])[0]
        return got is not None and got[0] == record.to_bytes() and self.txid_of_run(record.run_id) == record.txid

    def _retry(self, func: Callable[..., T], *args: Any) -> T:
        """``func(*args)`` with kazoo's retries once connected; a kazoo exception is raised as a txdag error."""
        try:
            return cast(T, self.client.retry(self._connected, func, *args))
        except (KazooException, KazooTimeoutError) as exc:
            raise self.zk_error(exc, args[0] if args and isinstance(args[0], str) else self.path) from None

    def zk_error(self, exc: Exception, path: str) -> TxdagError:
        """The txdag error of a kazoo exception met at ``path``: what happened, where, and what to do."""
        if isinstance(exc, NoNodeError):
            return ZnodeMissing(f"topology {self.topology!r}: znode {path} does not exist (never created, cleaned "
                                f"up already, or deleted by hand); check the topology status")
        if isinstance(exc, NodeExistsError):
            return ZnodeExists(f"topology {self.topology!r}: znode {path} exists already")
        if isinstance(exc, BadVersionError):
            return VersionConflict(f"topology {self.topology!r}: znode {path} changed since it was read; re-read it")
        if isinstance(exc, NoAuthError):
            return self._no_auth(path)
        if isinstance(exc, RetryFailedError | ConnectionLoss | SessionExpiredError | OperationTimeoutError
                      | KazooTimeoutError):
            return self.unavailable(f"stopped answering ({type(exc).__name__}: {exc})")
        return TxdagError(f"ZooKeeper at {self.hosts()} refused an operation on {path} (topology {self.topology!r}):"
                          f" {type(exc).__name__} {exc}; check the ZooKeeper server's log, then try again")

    def _connected(self, func: Callable[..., T], *args: Any) -> T:
        """Call ``func`` once connected. kazoo queues a request made while disconnected until the connection
        is back, however long that takes: without this bounded wait a task would hang while ZooKeeper is down."""
        self.wait_connected()
        return func(*args)

    def wait_connected(self) -> None:
        """See :func:`wait_connected`."""
        wait_connected(self.client, self.unavailable)

    def hosts(self) -> str:
        return hosts_of(self.client)

    def unavailable(self, what: str) -> ServiceUnavailable:
        """ServiceUnavailable naming ZooKeeper, its address and what to do."""
        return ServiceUnavailable(
            f"ZooKeeper at {self.hosts()} {what} (topology {self.topology!r}); {how_to_start()}, then try again"
        )

    def _no_auth(self, path: str) -> ConfigError:
        return ConfigError(
            f"ZooKeeper refused access to {path} (NoAuth): the znodes of topology {self.topology!r} were created "
            "with digest credentials; give this connection the same user and password"
        )


class TopologyLock:
    """kazoo's Lock, with ZooKeeper outages as ServiceUnavailable instead of a hang or a silent False, and a timeout
    as LockBusy.

    kazoo's ``acquire`` returns False (it does not raise) when its retries run out on a lost connection, and a
    request made while disconnected waits for the reconnection however long it takes.
    """

    def __init__(self, store: TransactionStore, lock: Lock) -> None:
        self.store, self.lock = store, lock

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        self.store.wait_connected()
        while self.store.unreleased:  # a lock node an outage kept us from deleting would block us behind it
            stale = self.store.unreleased.pop()
            try:
                stale.release()
            except KazooException:
                self.store.unreleased.append(stale)
                raise self.store.unavailable(f"failed while releasing the old lock node {stale.node}") from None
        try:
            got = self.lock.acquire(blocking=blocking, timeout=timeout)
        except LockTimeout:
            raise LockBusy(f"topology {self.store.topology!r}: another coordinator held the lock "
                           f"{self.store.lock_path} for {timeout:g}s; try again") from None
        except KazooException as exc:
            raise self.store.unavailable(f"failed while taking the lock {self.store.lock_path} ({exc!r})") from None
        if not got and blocking and not self.lock.cancelled:
            raise self.store.unavailable(f"did not answer while taking the lock {self.store.lock_path}")
        return bool(got)

    def release(self) -> bool:
        """Release; on an outage the lock node is an ephemeral one, gone when the session ends."""
        try:
            if not self.store.client.connected:  # do not wait: this runs in a `finally` after a failure
                raise self.store.unavailable("is unreachable")
            return bool(self.lock.release())
        except (KazooException, ServiceUnavailable) as exc:
            self.store.unreleased.append(self.lock)  # the next acquire deletes it, if the session survived
            log.warning("topology=%s: could not release %s (%s); it is freed when this ZooKeeper session ends",
                        self.store.topology, self.store.lock_path, exc)
            return False

    def __enter__(self) -> TopologyLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

"""TransactionStore and connect_zk against a real ZooKeeper: layout, CAS, transactions, cleanup, ACLs, errors."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionLoss,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import RetryFailedError
from kazoo.security import OPEN_ACL_UNSAFE

from txdag.errors import ConfigError, FormatVersionError, ServiceUnavailable, TxdagError
from txdag.zk import (
    AllocationRefused,
    LockBusy,
    TopologyRecord,
    TransactionStore,
    TxidRecord,
    TxStatus,
    VersionConflict,
    ZnodeExists,
    ZnodeMissing,
    close_zk,
    connect_zk,
)

AT = "2024-01-01T00:00:00.000+00:00"
RUN = "scheduled__2024-01-01T00:00:00+00:00"


@pytest.fixture
def store(zk_client: KazooClient, zk_root: str, prefix: str) -> TransactionStore:
    store = TransactionStore(zk_client, prefix, root=zk_root)
    store.ensure()
    return store


def allocate(store: TransactionStore, run_id: str, metadata: dict | None = None) -> TxidRecord:
    topo, version = store.read_topology()
    rec = TxidRecord.new(topo.last_txid + 1, run_id, metadata or {"n": topo.last_txid + 1}, AT)
    store.allocate(rec, topo, version)
    return rec


def test_ensure_creates_the_documented_layout_idempotently(store: TransactionStore, zk_client: KazooClient,
                                                           zk_root: str, prefix: str) -> None:
    store.ensure()
    assert sorted(zk_client.get_children(f"{zk_root}/{prefix}")) == ["lock", "runs", "txids"]
    assert store.read_topology()[0] == TopologyRecord(0, 0)


def test_allocate_writes_topology_txid_and_run_in_one_go(store: TransactionStore, zk_client: KazooClient,
                                                         zk_root: str, prefix: str) -> None:
    rec = allocate(store, RUN, {"start": 0, "end": 5})
    assert store.read_topology()[0] == TopologyRecord(1, 0)
    assert store.read_txid(1)[0] == rec  # type: ignore[index]
    assert store.txid_of_run(RUN) == 1 and store.txid_of_run("other") is None
    assert zk_client.exists(f"{zk_root}/{prefix}/txids/00000000000000000001")
    assert zk_client.get_children(f"{zk_root}/{prefix}/runs") == ["scheduled__2024-01-01T00%3A00%3A00%2B00%3A00"]
    assert store.list_txids() == [1]


def test_allocating_5_before_4_is_refused(store: TransactionStore) -> None:
    for run in ("r1", "r2", "r3"):
        allocate(store, run)
    topo, version = store.read_topology()
    with pytest.raises(AllocationRefused, match="creating metadata for txid 5 before txid 4 refused"):
        store.allocate(TxidRecord.new(5, "r5", {}, AT), topo, version)
    assert store.list_txids() == [1, 2, 3] and store.txid_of_run("r5") is None


def test_allocation_with_a_stale_version_conflicts_and_changes_nothing(store: TransactionStore) -> None:
    topo, version = store.read_topology()
    store.allocate(TxidRecord.new(1, "a", {}, AT), topo, version)
    with pytest.raises(VersionConflict, match="re-read and retry"):
        store.allocate(TxidRecord.new(1, "b", {}, AT), topo, version)
    assert store.txid_of_run("b") is None and store.read_topology()[0].last_txid == 1


def test_repeating_the_same_allocation_is_idempotent(store: TransactionStore) -> None:
    """A transaction retried after a lost reply finds its own writes and succeeds."""
    topo, version = store.read_topology()
    rec = TxidRecord.new(1, "a", {}, AT)
    store.allocate(rec, topo, version)
    store.allocate(rec, topo, version)
    assert store.read_topology()[0].last_txid == 1


def test_update_is_all_or_nothing(store: TransactionStore) -> None:
    for run in ("r1", "r2"):
        allocate(store, run)
    (one, v1), (two, v2) = store.read_txid(1), store.read_txid(2)  # type: ignore[misc]
    store.update([(one.moved(TxStatus.PROCESSED, AT), v1)])
    with pytest.raises(VersionConflict, match="updating txids 2, 1"):
        store.update([(two.moved(TxStatus.FAILED, AT, failed_by=2), v2), (one.moved(TxStatus.FAILED, AT), v1)])
    assert store.read_txid(2)[0].status is TxStatus.EMITTED  # type: ignore[index]
    assert store.read_txid(1)[0].status is TxStatus.PROCESSED  # type: ignore[index]


def test_update_with_the_topology_guards_against_a_concurrent_allocation(store: TransactionStore) -> None:
    allocate(store, "r1")
    topo, tv = store.read_topology()
    one, v1 = store.read_txid(1)  # type: ignore[misc]
    allocate(store, "r2")
    with pytest.raises(VersionConflict):
        store.update([(one.moved(TxStatus.FAILED, AT, failed_by=1), v1)], topology=(topo, tv))


def test_cleanup_before_deletes_exactly_the_older_txids(store: TransactionStore) -> None:
    for i in range(1, 7):
        allocate(store, f"r{i}")
    assert store.cleanup_before(4) == [1, 2, 3]
    assert store.list_txids() == [4, 5, 6]
    assert store.cleanup_before(4) == []  # already gone: fine
    assert store.txid_of_run("r1") == 1  # runs are kept longer


def test_cleanup_runs_keeps_the_newest_runs_of_committed_txids(zk_client: KazooClient, zk_root: str,
                                                                prefix: str) -> None:
    store = TransactionStore(zk_client, prefix, root=zk_root, keep_runs=3)
    store.ensure()
    for i in range(1, 7):
        allocate(store, f"r{i}")
    assert store.cleanup_runs(committed_txid=1) == 1  # only committed txids' runs may go
    assert store.cleanup_runs(committed_txid=6) == 2
    assert [store.txid_of_run(f"r{i}") for i in range(1, 7)] == [None, None, None, 4, 5, 6]


def test_unknown_format_version_or_garbage_names_the_znode(store: TransactionStore, zk_client: KazooClient) -> None:
    zk_client.set(store.path, b'{"v": 9, "last_txid": 0, "committed_txid": 0}')
    with pytest.raises(FormatVersionError, match=f"znode {store.path} .*version 9"):
        store.read_topology()
    zk_client.set(store.path, TopologyRecord(1, 0).to_bytes())
    zk_client.create(store.txid_path(1), b"\x00garbage")
    with pytest.raises(FormatVersionError, match=store.txid_path(1)):
        store.read_txid(1)


def test_reading_before_ensure_says_what_to_do(zk_client: KazooClient, zk_root: str, prefix: str) -> None:
    with pytest.raises(Exception, match=r"call TransactionStore.ensure\(\)"):
        TransactionStore(zk_client, prefix, root=zk_root).read_topology()


def test_a_missing_znode_is_a_txdag_error_naming_it(zk_client: KazooClient, zk_root: str, prefix: str) -> None:
    store = TransactionStore(zk_client, prefix, root=zk_root)  # never ensured: no znode at all
    with pytest.raises(ZnodeMissing, match=f"topology '{prefix}': znode {store.txids_path} does not exist"):
        store.list_txids()


@pytest.mark.parametrize(("kazoo_error", "kind", "words"), [
    (NoNodeError(), ZnodeMissing, ["does not exist", "check the topology status"]),
    (NodeExistsError(), ZnodeExists, ["exists already"]),
    (NoAuthError(), ConfigError, ["NoAuth", "same user and password"]),
    (ConnectionLoss(), ServiceUnavailable, ["stopped answering (ConnectionLoss", "services.sh start"]),
    (SessionExpiredError(), ServiceUnavailable, ["stopped answering (SessionExpiredError", "then try again"]),
    (OperationTimeoutError(), ServiceUnavailable, ["stopped answering (OperationTimeoutError"]),
    (RetryFailedError("Too many retry attempts"), ServiceUnavailable, ["Too many retry attempts"]),
    (KazooTimeoutError(), ServiceUnavailable, ["stopped answering (KazooTimeoutError"]),
    (NotEmptyError(), TxdagError, ["refused an operation on", "NotEmptyError", "server's log"]),
])
def test_each_kazoo_exception_becomes_a_txdag_error(store: TransactionStore, zk_hosts: str, kazoo_error: Exception,
                                                    kind: type, words: list[str]) -> None:
    error = store.zk_error(kazoo_error, store.txid_path(7))
    assert type(error) is kind
    assert f"'{store.topology}'" in str(error)
    for word in words:
        assert word in str(error)
    if kind in (ServiceUnavailable, TxdagError):
        assert zk_hosts in str(error), "names the server"
    else:
        assert store.txid_path(7) in str(error), "names the znode"


def test_a_lock_held_for_the_whole_timeout_is_lock_busy(store: TransactionStore) -> None:
    holder = store.lock()
    assert holder.acquire()
    try:
        with pytest.raises(LockBusy, match=f"another coordinator held the lock {store.lock_path} for 0.2s"):
            store.lock().acquire(timeout=0.2)
    finally:
        holder.release()


@pytest.mark.parametrize("topology,root", [("a/b", "/txdag"), ("", "/txdag"), ("..", "/txdag"), ("t", "txdag")])
def test_bad_names_are_config_errors(zk_client: KazooClient, topology: str, root: str) -> None:
    with pytest.raises(ConfigError):
        TransactionStore(zk_client, topology, root=root)


def test_digest_acl_protects_every_znode(zk_hosts: str, zk_client: KazooClient, zk_root: str, prefix: str) -> None:
    zk_client.ensure_path(zk_root, acl=OPEN_ACL_UNSAFE)  # an open parent, so that the fixture can clean up
    owner = connect_zk(zk_hosts, auth=("txdag", "s3cret-pw"), timeout=5)
    intruder = connect_zk(zk_hosts, auth=("txdag", "wrong-pw"), timeout=5)
    store = TransactionStore(owner, prefix, root=zk_root)
    try:
        store.ensure()
        allocate(store, "r1")
        for path in (store.path, store.txid_path(1), store.run_path("r1")):
            with pytest.raises(NoAuthError):
                zk_client.get(path)
            with pytest.raises(NoAuthError):
                intruder.get(path)
            assert [acl.id.scheme for acl in owner.get_acls(path)[0]] == ["digest"]
        assert store.read_txid(1) is not None
        with pytest.raises(ConfigError, match="NoAuth.*same user and password") as err:
            TransactionStore(zk_client, prefix, root=zk_root).read_topology()
        assert "s3cret" not in str(err.value)
    finally:
        owner.delete(store.path, recursive=True)
        close_zk(owner)
        close_zk(intruder)


def test_zookeeper_down_is_service_unavailable_naming_it() -> None:
    with pytest.raises(ServiceUnavailable) as err:
        connect_zk("127.0.0.1:2199", auth=("txdag", "s3cret-pw"), timeout=1)
    message = str(err.value)
    assert "ZooKeeper" in message and "127.0.0.1:2199" in message and "services.sh start" in message
    assert "s3cret" not in message


def test_bad_credentials_are_refused_without_echoing_the_password() -> None:
    with pytest.raises(ConfigError) as err:
        connect_zk("127.0.0.1:2199", auth=("us:er", "s3cret-pw"))
    assert "s3cret" not in str(err.value)
    with pytest.raises(ConfigError, match="password for user 'u' is empty"):
        connect_zk("127.0.0.1:2199", auth=("u", ""))


def test_a_missing_chroot_is_a_config_error(zk_hosts: str, prefix: str) -> None:
    with pytest.raises(ConfigError, match="chroot"):
        connect_zk(f"{zk_hosts}/no-such-{prefix}", timeout=5)


def test_malformed_hosts_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="host:port"):
        connect_zk("localhost:abc", timeout=1)

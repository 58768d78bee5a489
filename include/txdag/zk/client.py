"""Connecting to ZooKeeper: one KazooClient per process, with digest auth that protects every znode it creates.

Storm's ``transactional.zookeeper.servers/port`` becomes an Airflow connection; the hook that reads it calls
:func:`connect_zk`. A chroot may be given in ``hosts`` the ZooKeeper way (``"zk1:2181,zk2:2181/apps"``); it
must exist already. Most deployments leave it out and give the store a ``root`` instead.
"""

from __future__ import annotations

import logging
import warnings

from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError, KazooException, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import make_digest_acl

from txdag import hints
from txdag.defaults import ZK_TIMEOUT
from txdag.errors import ConfigError, ServiceUnavailable, TxdagError
from txdag.masking import register_secret

log = logging.getLogger("txdag.zk")
ZkClient = KazooClient  # the client type, for annotations outside txdag.zk (which alone imports kazoo)


def how_to_start() -> str:
    """The fix for an unreachable ZooKeeper, for where txdag runs (a checkout, a container, an installed wheel)."""
    return (f"{hints.how_to_start('zookeeper')}, or check the host/port of the ZooKeeper connection "
            "in Airflow (Admin > Connections)")


def connect_zk(hosts: str, *, auth: tuple[str, str] | None = None, timeout: float = ZK_TIMEOUT) -> KazooClient:
    """A started KazooClient for ``hosts``, or ServiceUnavailable naming ZooKeeper and how to start it.

    With ``auth=(user, password)`` the session authenticates with the digest scheme and every znode it
    creates gets an ACL that only that user can read or change. The password never appears in a message.
    """
    if not hosts or not isinstance(hosts, str):
        raise ConfigError(f"ZooKeeper hosts must be a 'host:port[,host:port][/chroot]' string, got {hosts!r}")
    kwargs: dict[str, object] = {}
    if auth is not None:
        user, password = _check_auth(auth)
        register_secret(password)  # kazoo logs its Auth packet, password included, at DEBUG
        kwargs["auth_data"] = [("digest", f"{user}:{password}")]
        kwargs["default_acl"] = [make_digest_acl(user, password, all=True)]
    try:
        client = KazooClient(
            hosts=hosts,
            timeout=timeout,
            command_retry={"max_tries": 5, "delay": 0.1, "max_delay": 2.0, "deadline": max(timeout, 1.0)},
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 5.0},
            **kwargs,
        )
    except ValueError as exc:
        raise ConfigError(f"ZooKeeper hosts {hosts!r} are malformed ({exc}): use 'host:port[,host:port][/chroot]'"
                          ) from None
    try:
        with warnings.catch_warnings():  # kazoo warns about a missing chroot; we raise a clearer error below
            warnings.filterwarnings("ignore", message="No chroot path exists")
            client.start(timeout=timeout)
        missing_chroot = bool(client.chroot) and not client.exists("/")
    except KazooTimeoutError:
        raise ServiceUnavailable(
            f"ZooKeeper is not reachable at {hosts} (no session within {timeout:g}s); {how_to_start()}"
        ) from None
    except AuthFailedError:
        close_zk(client)
        raise ConfigError(f"ZooKeeper at {hosts} refused the digest credentials of user {auth[0] if auth else ''!r}: "
                          f"fix the login and password of the ZooKeeper connection") from None
    except KazooException as exc:
        close_zk(client)
        raise ServiceUnavailable(f"ZooKeeper at {hosts} failed while connecting ({type(exc).__name__}: {exc}); "
                                 f"{how_to_start()}") from None
    if missing_chroot:
        close_zk(client)
        raise ConfigError(
            f"the ZooKeeper chroot {client.chroot} in hosts {hosts!r} does not exist: create it "
            f"(zkCli.sh create {client.chroot}) or drop it from the hosts and give the store a root instead"
        )
    log.info("connected to ZooKeeper at %s%s", hosts, f" as digest user {auth[0]!r}" if auth else "")
    return client


def close_zk(client: KazooClient) -> None:
    """Stop and close a client; safe to call twice (the Airflow hook calls it on teardown)."""
    try:
        client.stop()
    finally:
        client.close()


def as_txdag_error(exc: BaseException) -> TxdagError | None:
    """A kazoo error that escaped its caller, as the txdag error it is (None: not kazoo's): the last line of
    defence of the ``txdag`` command, which prints a message, never a traceback."""
    if isinstance(exc, NoAuthError):
        return ConfigError("ZooKeeper refused access (NoAuth): give the ZooKeeper connection the login and password "
                           "of the connection the topologies' DAGs use")
    if isinstance(exc, KazooException):
        return ServiceUnavailable(f"ZooKeeper stopped answering ({type(exc).__name__}); {how_to_start()}, then rerun")
    return None


def _check_auth(auth: tuple[str, str]) -> tuple[str, str]:
    """Refuse a malformed credential without ever echoing the password."""
    if not (isinstance(auth, tuple | list) and len(auth) == 2 and all(isinstance(x, str) for x in auth)):
        raise ConfigError("ZooKeeper auth must be a (user, password) tuple of two strings")
    user, password = auth
    if not user or ":" in user:
        raise ConfigError(f"ZooKeeper digest user must be non-empty and contain no ':', got {user!r}")
    if not password:
        raise ConfigError(f"ZooKeeper digest password for user {user!r} is empty: set it in the connection")
    return user, password

"""Redis plumbing shared by state, staging and spouts: errors that name the server and say how to fix it."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

from txdag import hints
from txdag.errors import AccessDenied, ConfigError, ServiceUnavailable

SCRIPT_REFUSED = "The user executing the script can't"  # Redis 7's ACL refusal inside a Lua script
NOT_A_CLUSTER = "Cluster mode is not enabled"  # a cluster client's reply from a single server
SLOTS_REFUSAL = "must map to the same key slot"  # redis-py's refusal of a cluster command over several slots
NON_LOCAL_KEY = "non local key"  # a cluster node's refusal of a script that reaches a key of another slot
CLUSTER_DOWN = (redis.exceptions.ClusterError,)  # the cluster lost a slot's master, or every node it knew
SHOWN_KEYS = 4


def how_to_start_redis(cluster: bool = False) -> str:
    """The fix for an unreachable Redis (or Redis Cluster), for where txdag runs (a checkout, a container, an
    installed wheel)."""
    if cluster:
        return f"{hints.how_to_start('redis_cluster')}, or check the nodes txdag is given"
    return f"{hints.how_to_start('redis')}, or check the Airflow connection that points txdag at Redis"


def is_cluster(client: object) -> bool:
    """Whether ``client`` is a Redis Cluster client (it routes each key to its slot's node)."""
    return getattr(client, "nodes_manager", None) is not None


def _kwargs(client: redis.Redis) -> dict:
    """The connection keyword arguments of a client (a Redis Cluster client keeps them in its nodes manager)."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        return pool.connection_kwargs
    return getattr(getattr(client, "nodes_manager", None), "connection_kwargs", {})


def describe(client: redis.Redis) -> str:
    """host:port/db of a client (``cluster host:port,...`` for a Redis Cluster), without its password."""
    if is_cluster(client):
        return "cluster " + ",".join(sorted(client.nodes_manager.startup_nodes))  # type: ignore[attr-defined]
    kwargs = _kwargs(client)
    if "path" in kwargs:
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


def user_of(client: redis.Redis) -> str:
    """The ACL user a client logs in as (``default`` without a username); never its password."""
    return _kwargs(client).get("username") or "default"


def is_refusal(exc: BaseException) -> bool:
    """A Redis ACL refusal: wrong credentials (WRONGPASS/NOAUTH), or a key or command outside the user's ACL."""
    return isinstance(exc, redis.AuthenticationError | redis.exceptions.NoPermissionError) or (
        isinstance(exc, redis.ResponseError) and SCRIPT_REFUSED in str(exc)
    )


def access_denied(
    client: redis.Redis, exc: BaseException, doing: str, *, topology: str | None = None, keys: Sequence[str] = ()
) -> AccessDenied:
    """AccessDenied naming the server, the user, the topology, the keys and what to do; never the password."""
    user, where = user_of(client), f"topology {topology!r}: " if topology else ""
    shown = ", ".join(repr(k) for k in keys[:SHOWN_KEYS]) + (f" and {len(keys) - SHOWN_KEYS} more" if len(
        keys) > SHOWN_KEYS else "")
    reason = str(exc).split(" script: ")[0]  # the server's words; they never hold the password
    if isinstance(exc, redis.AuthenticationError):
        fix = (f"check the login and password of the Airflow Redis connection (user {user!r}); create the user "
               f"with the line `txdag acl redis {topology or 'TOPOLOGY'} --user {user}` prints")
    else:
        fix = (f"grant the user the topology's keys and commands: run, as a Redis admin, the ACL SETUSER line "
               f"`txdag acl redis {topology or 'TOPOLOGY'} --user {user}` prints")
    return AccessDenied(
        f"{where}Redis at {describe(client)} refused user {user!r} while {doing}"
        f"{f' (keys {shown})' if shown else ''}: {reason}; {fix}"
    )


@contextlib.contextmanager
def redis_errors(
    client: redis.Redis, doing: str, *, topology: str | None = None, keys: Sequence[str] = ()
) -> Iterator[None]:
    """Turn a refusal into AccessDenied, and a connection failure into ServiceUnavailable naming Redis, its
    address and what to do."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError, *CLUSTER_DOWN) as exc:
        if is_refusal(exc):
            raise access_denied(client, exc, doing, topology=topology, keys=keys) from exc
        if isinstance(exc, redis.ResponseError) and NON_LOCAL_KEY in str(exc):
            raise spans_slots(client, doing, topology, exc) from exc
        if isinstance(exc, redis.exceptions.MovedError) and not is_cluster(client):
            raise ConfigError(f"Redis at {describe(client)} is a node of a Redis Cluster (it answered MOVED while "
                              f"{doing}): add \"cluster\": true to the Redis connection's extra") from exc
        if isinstance(exc, redis.ResponseError) and not isinstance(exc, CLUSTER_DOWN):
            raise
        tls = _kwargs(client) if uses_tls(client) else None
        refused = tls_refusal(exc, tls)
        if refused:
            raise ConfigError(f"Redis at {describe(client)}: TLS failed while {doing} ({refused}): {TLS_FIX}") from exc
        raise ServiceUnavailable(
            f"Redis at {describe(client)} is unreachable while {doing} ({type(exc).__name__}: {exc}); "
            f"{how_to_start_redis(is_cluster(client))}{handshake_hint(exc, tls)}"
        ) from exc
    except redis.exceptions.InvalidResponse as exc:
        raise not_redis(describe(client), exc) from exc
    except redis.exceptions.RedisClusterException as exc:  # also a client-side refusal (keys of several slots)
        if SLOTS_REFUSAL in str(exc):
            raise spans_slots(client, doing, topology, exc) from exc
        raise ServiceUnavailable(f"Redis at {describe(client)} cannot serve {doing} ({type(exc).__name__}: "
                                 f"{exc}); {how_to_start_redis(is_cluster(client))}") from exc


def not_redis(address: str, exc: Exception) -> ConfigError:
    """A server that answered what no Redis answers (an HTTP server on the connection's port)."""
    return ConfigError(f"the server at {address} is no Redis (it answered {str(exc)[:80]}): the Redis connection's "
                       f"host and port are another server's; give the Redis server's")


TLS_HANDSHAKE = "; TLS ended: check that this port serves TLS (a plain Redis answers none)"
TLS_NO_CLIENT_CERT = (", and as no client certificate is given: a server that asks for one and gets none ends the "
                      "connection so (TLS 1.3: at the first request); then give the Redis connection's ssl_certfile "
                      "and ssl_keyfile")
TLS_FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")
TLS_REFUSALS = {  # OpenSSL's reasons for a handshake that no retry mends
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "the server asks for a client certificate: give ssl_certfile and ssl_keyfile",
    "TLSV1_ALERT_UNKNOWN_CA": "the server does not trust the client certificate's CA",
    "SSLV3_ALERT_BAD_CERTIFICATE": "the server refused the client certificate",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": "the server refused the client certificate",
    "WRONG_VERSION_NUMBER": "the server speaks no TLS on this port: remove \"ssl\" from the connection's extra, "
                            "or give the server's TLS port",
}
FILE_ERRORS = (errno.ENOENT, errno.EACCES, errno.EISDIR, errno.ENOTDIR)
TLS_FIX = ("check the Redis connection's TLS extras (the Redis provider's ssl_ca_certs: the CA that signed the "
           "server's certificate; ssl_certfile and ssl_keyfile: the client's; ssl_cert_reqs, ssl_check_hostname): "
           "their files must be readable where the tasks and the Spark executors run")


def tls_refusal(exc: BaseException, tls: Mapping[str, object] | None) -> str | None:
    """What went wrong in a TLS connection (``tls``: its keyword arguments; None: not TLS) that no retry mends: the
    server's certificate not trusted, the client's refused or missing, a server that speaks no TLS, or a certificate
    or key file that cannot be read (redis-py keeps the cause as the error's context)."""
    import ssl

    if tls is None:
        return None
    for cause in _chain(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"the server's certificate is not trusted: {cause.verify_message or cause}"
        if isinstance(cause, ssl.SSLError) and cause.reason in TLS_REFUSALS:
            return f"{TLS_REFUSALS[cause.reason]} ({cause.reason})"
        if isinstance(cause, ssl.SSLError) and "PEM" in str(cause):
            return f"a certificate or key file is not PEM ({cause})"
        if isinstance(cause, OSError) and not isinstance(cause, ssl.SSLError) and cause.errno in FILE_ERRORS:
            files = ", ".join(f"{k}={v}" for k, v in tls.items() if k in TLS_FILES and v)
            return f"cannot read one of its files ({files or 'none given'}): {cause.strerror}"
    return None


def handshake_hint(exc: BaseException, tls: Mapping[str, object] | None) -> str:
    """For a TLS connection that ended, with nothing that says why (a handshake cut off or timed out, or TLS 1.3's
    end of a connection the server refused after its handshake): the likely causes."""
    import ssl

    if tls is None or not any(isinstance(c, ssl.SSLError) or "handshake" in str(c) for c in _chain(exc)):
        return ""
    return TLS_HANDSHAKE + ("" if tls.get("ssl_certfile") else TLS_NO_CLIENT_CERT)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def uses_tls(client: redis.Redis) -> bool:
    """Whether the client connects with TLS (``rediss://``, or ``ssl=True``)."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        return issubclass(pool.connection_class, redis.SSLConnection)
    kwargs = _kwargs(client)
    return kwargs.get("connection_class") is redis.SSLConnection or bool(kwargs.get("ssl"))


CLUSTER_OPTION = "cluster"  # txdag's URL query option: ?cluster=true is a Redis Cluster (redis-py has none)
NODES_OPTION = "nodes"  # with it, more startup nodes besides the URL's host: ?cluster=true&nodes=h2:6379,h3:6379
REFUSALS = ("invalid username-password pair", "WRONGPASS", "NOAUTH")


@dataclass(frozen=True)
class RedisAddress:
    """Where a Redis URL points and who logs in, as redis-py's from_url reads it (no host: localhost; no port:
    6379; the db from ``?db=``, else the path, else 0, a path that is no number being 0 too); the one parser of a
    URL's parts for what is not a client (a provider config, a lineage name, an admin's login)."""

    host: str
    port: int
    db: int
    username: str | None
    password: str | None = field(repr=False)
    tls: bool = False

    @classmethod
    def of(cls, url: str) -> RedisAddress:
        parts = urlsplit(url)
        db = dict(parse_qsl(parts.query)).get("db") or unquote(parts.path).strip("/")
        return cls(unquote(parts.hostname or "localhost"), parts.port or 6379, int(db) if db.isdigit() else 0,
                   unquote(parts.username) if parts.username else None,
                   unquote(parts.password) if parts.password else None, parts.scheme == "rediss")


def client_from_url(url: str, **kwargs: object) -> redis.Redis:
    """``redis.Redis.from_url``; a Redis Cluster client when the URL's query has ``cluster=true`` (the URL's
    host, and the ``nodes`` option's, are the startup nodes; the cluster is contacted now, to learn its slots)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    options = dict(query)
    if CLUSTER_OPTION not in options:
        return redis.Redis.from_url(url, **kwargs)
    rest = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query
                                                      if k not in (CLUSTER_OPTION, NODES_OPTION)])))
    if options[CLUSTER_OPTION].lower() not in ("1", "true", "yes"):
        return redis.Redis.from_url(rest, **kwargs)
    listed = options.get(NODES_OPTION, "")
    nodes = [_node(n, listed) for n in listed.split(",") if n.strip()]
    address = ",".join([f"{parts.hostname}:{parts.port or 6379}", *(f"{n.host}:{n.port}" for n in nodes)])
    tls = {k: v for k, v in query if k in TLS_KEYS} if parts.scheme == "rediss" else None
    return connect_cluster(lambda: RedisCluster.from_url(rest, startup_nodes=nodes, **kwargs), address,
                           unquote(parts.username or "") or None,
                           "check the login and password of the Airflow Redis connection", tls)


NODE_FORM = "host:port, port 1-65535"  # what a Redis Cluster startup node looks like, as error messages say it


def node_address(text: str, nodes: str | None = None, *, where: str = "",
                 fix: str = f"fix the {NODES_OPTION} option of the Redis URL (?{CLUSTER_OPTION}=true&{NODES_OPTION}="
                            f"h2:6379,h3:6379), or the hosts of the Airflow connection it was made from",
                 kind: str = "Redis Cluster node") -> tuple[str, int]:
    """Host and port of the Redis Cluster startup node ``text`` ("host:port"): the one parser of Redis addresses
    (client_from_url, from_portable, and the Airflow connection's hosts in txdag.airflow.hooks.redis_url_of, where
    a server that is no cluster is another ``kind``). Anything else is a ConfigError naming the node, the whole list
    it came from (``nodes``), what a node looks like and ``fix``; ``where`` (e.g. the connection) starts it."""
    node = text.strip()
    host, colon, port = node.rpartition(":")
    problem = ("no port" if not colon or not port else "no host" if not host
               else f"port {port!r} is not a number" if not (port.isascii() and port.isdigit())
               else f"port {port} is out of range" if not 1 <= int(port) <= 65535 else "")
    if problem:
        listed = f" (of {nodes.strip()!r})" if nodes and nodes.strip() != node else ""
        raise ConfigError(f"{where}{kind} {node!r}{listed} is malformed ({problem}): a node is "
                          f"{NODE_FORM}; {fix}")
    return host, int(port)


def _node(text: str, nodes: str | None = None) -> ClusterNode:
    return ClusterNode(*node_address(text, nodes))


def connect_cluster(connect: Callable[[], RedisCluster], address: str, user: str | None, login_fix: str,
                    tls: Mapping[str, object] | None = None) -> redis.Redis:
    """``connect()``'s cluster client; nodes that do not answer are ServiceUnavailable naming them and how to start
    them, a refused login AccessDenied with ``login_fix`` (redis-py wraps both in RedisClusterException), a TLS
    connection (``tls``: its options) that no retry mends a ConfigError."""
    try:
        return cast(redis.Redis, connect())  # the rest of txdag takes either client as a redis.Redis
    except (redis.exceptions.RedisClusterException, redis.RedisError) as exc:
        refusal = _refusal(exc)
        if refusal is None and NOT_A_CLUSTER in str(exc):
            raise ConfigError(f"Redis at {address} is a single server, not a Redis Cluster: remove \"cluster\": "
                              f"true from the connection's extra (or point it at a cluster's nodes)") from None
        refused = tls_refusal(exc, tls)
        if refusal is None and refused:
            raise ConfigError(f"Redis Cluster at {address}: TLS failed ({refused}): {TLS_FIX}") from exc
        if refusal is None:
            raise ServiceUnavailable(f"Redis Cluster at {address} is unreachable ({type(exc).__name__}: {exc}); "
                                     f"{how_to_start_redis(True)}{handshake_hint(exc, tls)}") from None
        fix = ("the cluster client needs CLUSTER SLOTS and COMMAND besides the topology's keys: give the user the "
               "ACL SETUSER line `txdag acl redis TOPOLOGY` prints, on every node"
               if isinstance(refusal, redis.exceptions.NoPermissionError) else login_fix)
        raise AccessDenied(f"Redis Cluster at {address} refused user {user or 'default'!r}: {refusal}; {fix}"
                           ) from None


def _refusal(exc: BaseException) -> BaseException | None:
    """The login or ACL refusal behind a failed cluster connection (redis-py wraps it in RedisClusterException)."""
    for cause in _chain(exc):
        if isinstance(cause, redis.AuthenticationError | redis.exceptions.NoPermissionError):
            return cause
    return exc if any(s in str(exc) for s in REFUSALS) else None


REPLICA_WAIT_MS = 2000  # how long a commit waits for a replica's acknowledgement before it fails (and is retried)


def replicate(client: redis.Redis, keys: Sequence[str], doing: str, timeout_ms: int = REPLICA_WAIT_MS) -> int:
    """On a Redis Cluster, wait (WAIT) until a replica of each master holding one of ``keys`` has everything this
    client wrote there, so a failover cannot take back what a commit then records as done; returns the masters
    waited on. A master without a replica (one that just took over) is not waited on; one whose replicas do not
    answer within ``timeout_ms`` is ServiceUnavailable. One server: nothing to wait for (its append-only file is
    fsynced before it replies). The client must be this thread's own: WAIT counts its connection's writes."""
    if not is_cluster(client):
        return 0
    masters = {}
    for key in keys:
        nodes = client.nodes_manager.slots_cache.get(key_slot(key.encode())) or []  # type: ignore[attr-defined]
        if len(nodes) > 1:  # the slot's master, then its replicas
            masters[nodes[0].name] = nodes[0]
    for name, node in sorted(masters.items()):
        with redis_errors(client, doing, keys=keys):
            acked = client.execute_command("WAIT", 1, timeout_ms, target_nodes=node)
        if int(acked) < 1:
            raise ServiceUnavailable(
                f"Redis Cluster master {name}: no replica acknowledged {doing} within {timeout_ms} ms, so a failover "
                f"could lose it; it is not recorded as done and will be retried. Check the master's replicas "
                f"(`ROLE` on {name}); {how_to_start_redis(True)}")
    return len(masters)


def spans_slots(client: redis.Redis, doing: str, topology: str | None, exc: BaseException) -> ConfigError:
    """A command or script over keys of several Redis Cluster slots (a source's keys, in practice)."""
    where = f"topology {topology!r}: " if topology else ""
    return ConfigError(f"{where}Redis Cluster at {describe(client)}: {doing} takes keys of several hash slots in one "
                       f"command ({str(exc).split(' script: ')[0]}); keep the source on a single Redis (a connection "
                       f"of its own, the source's redis_conn_id), or give its keys one hash tag (a prefix such as "
                       f"'{{tweets}}:')")


TLS_KEYS = ("ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname")  # with ssl
PORTABLE_KEYS = ("host", "port", "db", "username", "password", "socket_timeout", "socket_connect_timeout", "path",
                 *TLS_KEYS)
# a cluster client's: its nodes go as cluster_nodes instead of host/port/path, and a cluster has database 0 only
CLUSTER_PORTABLE_KEYS = ("username", "password", "socket_timeout", "socket_connect_timeout", *TLS_KEYS)


def portable(client: redis.Redis) -> dict[str, object]:
    """What it takes to open the same connection elsewhere (a Spark executor): plain values, picklable."""
    if is_cluster(client):
        manager = client.nodes_manager  # type: ignore[attr-defined]
        kwargs = manager.connection_kwargs
        spec: dict[str, object] = {k: kwargs[k] for k in CLUSTER_PORTABLE_KEYS if kwargs.get(k) is not None}
        spec["cluster_nodes"] = sorted(manager.startup_nodes)
    else:
        kwargs = client.connection_pool.connection_kwargs
        spec = {k: kwargs[k] for k in PORTABLE_KEYS if kwargs.get(k) is not None}
    if uses_tls(client):
        spec["ssl"] = True
    return spec


def from_portable(spec: dict[str, object]) -> redis.Redis:
    """A client of what ``portable`` described."""
    kwargs = dict(spec)
    if "cluster_nodes" in kwargs:
        nodes = [_node(str(n)) for n in kwargs.pop("cluster_nodes")]  # type: ignore[attr-defined]
        return connect_cluster(lambda: RedisCluster(startup_nodes=nodes, **kwargs), ",".join(  # type: ignore[arg-type]
            f"{n.host}:{n.port}" for n in nodes), kwargs.get("username"),  # type: ignore[arg-type]
            "check the login and password the job was given",
            {k: v for k, v in kwargs.items() if k in TLS_KEYS} if kwargs.get("ssl") else None)
    if "path" in kwargs:
        kwargs.pop("host", None)
        kwargs.pop("port", None)
        return redis.Redis(unix_socket_path=kwargs.pop("path"), **kwargs)  # type: ignore[arg-type]
    return redis.Redis(**kwargs)  # type: ignore[arg-type]

"""Redis access control: the ACL rules of a user limited to some topologies' keys and to the commands txdag sends.

A topology's keys are those of its layouts (txdag.keyspace), each granted by the layout module's
``acl_patterns``, read-write: each state's namespace (txdag.state.redis_backing), the marker key, its staging and
claims (txdag.staging.layout), rejections (txdag.commit.rejections), window stores (txdag.windows.store), new
values streams (txdag.commit.newvalues) and its steps' KeyValueStates in their default namespaces
(txdag.state.kv.layout); and read-only (``%R~``) the source's keys (txdag.spouts.tweets, txdag.spouts.streams).

The source is read-only unless ``source_write`` (a user that also seeds the source). A read-only key can
still be read by a script sent with EVAL_RO/EVALSHA_RO (the stream spouts' planning does so), not with EVAL.
The commands are what the code sends, nothing else: no KEYS, SCAN, FLUSHALL, CONFIG, ACL, MULTI (plus CLUSTER
SLOTS and COMMAND, which redis-py's cluster client sends to learn the slots and the commands' keys).
``txdag acl redis [TOPOLOGY...]`` prints the ``ACL SETUSER`` line, which an admin runs (``| redis-cli ...``);
with ``--apply redis://HOST:PORT`` it runs the line itself as the admin and saves the server's ACL file.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from txdag.commit import newvalues, rejections
from txdag.errors import ConfigError, ServiceUnavailable
from txdag.keyspace import glob_escape
from txdag.staging import layout as staging_layout
from txdag.state import redis_backing
from txdag.state.kv import layout as kv_layout
from txdag.windows import store as window_store

COMMANDS = (
    "ping", "select", "hello",                                                      # connection
    "cluster|slots", "command",                              # a Redis Cluster client's discovery (read-only)
    "wait",                                  # a commit on a Redis Cluster: a replica has it before ZooKeeper records it
    "get", "mget", "exists", "type", "hget", "hmget", "hgetall", "hlen", "hscan", "hkeys", "hexists", "xrange",  # reads
    "xrevrange",
    "set", "del", "hset", "hsetnx", "hdel", "hincrby", "hincrbyfloat", "xadd",      # writes
    "copy", "rename",                                                               # KeyValueState scripts
    "eval", "evalsha", "eval_ro", "evalsha_ro", "script|load", "script|exists",    # the Lua scripts
)  # fmt: skip
# the layouts a topology owns by its id (each one's acl_patterns(topology_id))
TOPOLOGY_LAYOUTS = (rejections.acl_patterns, staging_layout.acl_patterns, window_store.acl_patterns,
                    newvalues.acl_patterns, kv_layout.acl_patterns)


def owned_patterns(topology: Any) -> list[str]:
    """Redis globs of every key a TransactionalTopology writes (not its source): what its user may write, and
    what ``txdag reset`` sweeps when its connection may SCAN (txdag.cli.resetkeys names them otherwise)."""
    own = [p for s in topology.states if s.in_redis for p in redis_backing.acl_patterns(s.redis_key)]
    own += [glob_escape(topology.commit_marker)]
    return own + [p for layout in TOPOLOGY_LAYOUTS for p in layout(topology.topology_id)]


def key_patterns(topology: Any, *, source_write: bool = False) -> list[str]:
    """The ACL key rules (``~pattern`` read-write, ``%R~pattern`` read-only) of one TransactionalTopology."""
    own = owned_patterns(topology)
    source = topology.source.acl_patterns()
    return [f"~{p}" for p in own] + [("~" if source_write else "%R~") + p for p in source]


def redis_acl_rules(*topologies: Any, source_write: bool = False) -> list[str]:
    """The rules after the user name and password: no command but txdag's, no key but the topologies'."""
    if not topologies:
        raise ConfigError("redis_acl_rules needs at least one topology")
    keys = [r for t in topologies for r in key_patterns(t, source_write=source_write)]
    return ["resetchannels", "-@all", *(f"+{c}" for c in COMMANDS), *dict.fromkeys(keys)]


def password_hash(password: str) -> str:
    """The ``#<sha256>`` form of a password: an ACL SETUSER line that sets it without showing it."""
    if not password:
        raise ConfigError("the Redis password is empty: give the user a password")
    return "#" + hashlib.sha256(password.encode()).hexdigest()


def setuser_args(user: str, topologies: Sequence[Any], *, password: str | None = None,
                 source_write: bool = False) -> list[str]:
    """Arguments of ``ACL SETUSER``; with a password the user is reset first, so the line is the whole user."""
    if not user or any(c.isspace() for c in user):
        raise ConfigError(f"a Redis user name must be non-empty without spaces, got {user!r}")
    head = ["reset", "on", password_hash(password)] if password is not None else ["on", "resetkeys"]
    return [user, *head, *redis_acl_rules(*topologies, source_write=source_write)]


def setuser_line(args: Sequence[str]) -> str:
    """``ACL SETUSER ...`` as one line redis-cli reads (arguments with spaces or quotes are quoted)."""
    def quoted(arg: str) -> str:
        if arg and not re.search(r"[\s\"'\\]", arg):
            return arg
        return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return " ".join(["ACL", "SETUSER", *map(quoted, args)])


def load_topologies(names: Sequence[str], dags_folder: str | Path) -> list[Any]:
    """The topologies named (every one when none is) among those the DAG files in ``dags_folder`` define."""
    from txdag.cli.common import CliError, load_folder

    found, errors = load_folder(dags_folder)
    missing = [n for n in names if n not in found]
    if missing or not found:

        broken = f"; these DAG files fail to load: {errors}" if errors else ""
        raise CliError(
            f"no topology {missing or ''} in the DAG folder {dags_folder} (it defines {sorted(found)}{broken}): "
            f"give topology ids defined there, or the folder with --dags"
        )
    return [found[n] for n in dict.fromkeys(names or sorted(found))]


def cmd_acl(args: argparse.Namespace) -> int:
    """Print the ACL SETUSER line of a user limited to the topologies' keys (a password only as its hash)."""
    password = None
    if args.password_env:
        password = os.environ.get(args.password_env)
        if not password:
            raise ConfigError(f"--password-env {args.password_env}: that environment variable is not set or empty")
    from txdag.cli.common import dags_folder, result_stream

    topologies = load_topologies(args.topology, dags_folder(args))
    setuser = setuser_args(args.user, topologies, password=password, source_write=args.source_write)
    if args.apply:
        print(apply_setuser(args.apply, setuser), file=result_stream())
    else:
        print(setuser_line(setuser), file=result_stream())
    return 0


ADMIN_USER_ENV, ADMIN_PASSWORD_ENV = "TXDAG_REDIS_ADMIN_USER", "TXDAG_REDIS_ADMIN_PASSWORD"


def admin_client(url: str, timeout: float = 10.0) -> Any:
    """A client of the Redis at ``url`` logged in as an admin: the URL's login, else $TXDAG_REDIS_ADMIN_USER and
    $TXDAG_REDIS_ADMIN_PASSWORD (so that the password need not be on a command line)."""
    import redis

    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # out of range, or no number
        port_ok = False
    if parts.scheme not in ("redis", "rediss") or not parts.hostname or not port_ok:
        from txdag.cli import exits
        from txdag.cli.common import CliError

        shown = url.replace(f":{parts.password}@", ":***@") if parts.password else url  # never a password
        raise CliError(f"--apply needs a Redis URL redis://HOST:PORT[/DB] (the admin's login in it or in "
                       f"{ADMIN_USER_ENV}/{ADMIN_PASSWORD_ENV}), got {shown!r}", exits.USAGE)
    from txdag.redisio import RedisAddress

    login = RedisAddress.of(url)
    user = login.username or os.environ.get(ADMIN_USER_ENV)
    password = login.password or os.environ.get(ADMIN_PASSWORD_ENV)
    if not user or not password:
        raise ConfigError(f"--apply needs a Redis admin login: set {ADMIN_USER_ENV} and {ADMIN_PASSWORD_ENV} (an "
                          f"admin may run ACL SETUSER, ACL SAVE and CONFIG GET)")
    return redis.Redis.from_url(url, username=user, password=password, socket_connect_timeout=timeout,
                                socket_timeout=timeout, decode_responses=True)


def apply_setuser(url: str, setuser: Sequence[str]) -> str:
    """Run ``ACL SETUSER`` on the Redis at ``url`` as an admin, then ``ACL SAVE`` when the server has an ACL file,
    so that a restart keeps the user. Returns what was done; raises ConfigError/ServiceUnavailable saying why not."""
    import redis

    from txdag.redisio import describe

    client = admin_client(url)
    user, where, aclfile = setuser[0], describe(client), ""
    step = f"logging in as the admin user {client.connection_pool.connection_kwargs.get('username')!r}"
    try:
        client.ping()
        step = f"creating user {user!r} (ACL SETUSER)"
        client.execute_command("ACL", "SETUSER", *setuser)
        step = "reading the server's ACL file setting (CONFIG GET aclfile)"
        aclfile = client.config_get("aclfile").get("aclfile", "")
        if not aclfile:
            print(f"txdag acl redis: warning: Redis at {where} has no ACL file (redis-server --aclfile): user "
                  f"{user!r} lasts until Redis restarts", file=sys.stderr)
            return f"Redis at {where}: user {user!r} set (ACL SETUSER); not saved: the server has no ACL file"
        step = f"saving the users to {aclfile} (ACL SAVE)"
        client.execute_command("ACL", "SAVE")
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        if isinstance(exc, redis.AuthenticationError):
            raise ConfigError(f"Redis at {where} refused the admin login while {step}: {exc}; check "
                              f"{ADMIN_USER_ENV} and {ADMIN_PASSWORD_ENV}") from None
        raise ServiceUnavailable(f"Redis at {where} is unreachable while {step} ({type(exc).__name__}: {exc}); "
                                 f"check the URL given to --apply and that Redis is up") from None
    except redis.ResponseError as exc:
        raise ConfigError(f"Redis at {where} refused {step}: {exc}") from None
    finally:
        client.close()
    return f"Redis at {where}: user {user!r} set (ACL SETUSER) and saved to {aclfile} (ACL SAVE)"


def add_cli(sub: Any) -> None:
    """``txdag acl redis [TOPOLOGY...] [--user NAME]`` on the txdag command's subparsers."""
    from txdag.cli.common import dags_arg

    acl = sub.add_parser("acl", help="print the Redis ACL SETUSER line of a user limited to topologies' keys")
    acl.add_argument("service", choices=["redis"])
    acl.add_argument("topology", nargs="*", help="topology ids (default: every one in the DAG folder)")
    acl.add_argument("--user", default="txdag")
    acl.add_argument("--password-env", metavar="VAR", help="set the password held by this environment variable "
                     "(printed as its SHA-256 only); without it the user's password is left as it is")
    acl.add_argument("--source-write", action="store_true", help="the source keys read-write (a user that seeds)")
    acl.add_argument("--dags", metavar="DIR", type=dags_arg, help="the DAG folder holding the topologies (default: "
                     "$TXDAG_DAGS_FOLDER, $AIRFLOW__CORE__DAGS_FOLDER or ./dags)")
    acl.add_argument("--apply", metavar="URL", help="run the line on the Redis at URL (redis://HOST:PORT[/DB]) as "
                     f"an admin (the URL's login, else ${ADMIN_USER_ENV} and ${ADMIN_PASSWORD_ENV}), then ACL SAVE "
                     "when it has an ACL file, instead of printing it")
    acl.set_defaults(func=cmd_acl)

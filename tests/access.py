"""The test suite's credentials: the tests run against Redis and ZooKeeper with access control on.

``scripts/test.sh`` exports ``TXDAG_TEST_REDIS_URL`` (the Redis admin user of ``.run/credentials.env``) and
``TXDAG_TEST_ZK_AUTH`` (``user:password``, the digest every test's ZooKeeper client authenticates with, so the
znodes the tests create carry digest ACLs). Run by hand, pytest reads ``.run/credentials.env`` itself. The Kafka
broker (``TXDAG_TEST_KAFKA_BOOTSTRAP``, ``host:port``) takes no credentials on its first listener; its SASL
listener (``TXDAG_TEST_KAFKA_SASL_BOOTSTRAP``, default the port + 2) takes the PLAIN user TXDAG_KAFKA_USER/PASSWORD.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import redis

from txdag.cli.acl import setuser_args

CREDENTIALS = Path(__file__).resolve().parent.parent / ".run" / "credentials.env"


def _credentials() -> dict[str, str]:
    """The ``export NAME=value`` lines of .run/credentials.env (written by scripts/credentials.sh)."""
    if not CREDENTIALS.is_file():
        return {}
    lines = (line.removeprefix("export ").strip() for line in CREDENTIALS.read_text().splitlines())
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


_CRED = _credentials()


def _default_redis_url() -> str:
    port = os.environ.get("TXDAG_REDIS_PORT", "6391")
    user, password = _CRED.get("TXDAG_REDIS_ADMIN_USER"), _CRED.get("TXDAG_REDIS_ADMIN_PASSWORD")
    auth = f"{quote(user, safe='')}:{quote(password, safe='')}@" if user and password else ""
    return f"redis://{auth}127.0.0.1:{port}/0"


REDIS_URL = os.environ.get("TXDAG_TEST_REDIS_URL") or _default_redis_url()
ZK_HOSTS = os.environ.get("TXDAG_TEST_ZK_HOSTS") or f"127.0.0.1:{os.environ.get('TXDAG_ZK_PORT', '2191')}"
KAFKA_BOOTSTRAP = (os.environ.get("TXDAG_TEST_KAFKA_BOOTSTRAP")
                   or f"127.0.0.1:{os.environ.get('TXDAG_KAFKA_PORT', '9391')}")
KAFKA_SASL_BOOTSTRAP = (os.environ.get("TXDAG_TEST_KAFKA_SASL_BOOTSTRAP")
                        or f"127.0.0.1:{int(KAFKA_BOOTSTRAP.rsplit(':', 1)[1]) + 2}")
# a Kafka connection's extra that logs in, as the Kafka provider's connections spell it (librdkafka's names)
KAFKA_SASL_CONFIG = {"bootstrap.servers": KAFKA_SASL_BOOTSTRAP, "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "PLAIN", "sasl.username": _CRED.get("TXDAG_KAFKA_USER", ""),
                     "sasl.password": _CRED.get("TXDAG_KAFKA_PASSWORD", "")}
_zk = os.environ.get("TXDAG_TEST_ZK_AUTH") or f"{_CRED.get('TXDAG_ZK_USER', 'txdag-test')}:" + _CRED.get(
    "TXDAG_ZK_PASSWORD", "txdag-test-digest"
)
ZK_AUTH: tuple[str, str] = tuple(_zk.split(":", 1))  # type: ignore[assignment]
PASSWORDS = [p for p in (urlsplit(REDIS_URL).password, ZK_AUTH[1]) if p]


def safe_url(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def kazoo_auth() -> dict[str, Any]:
    """KazooClient keyword arguments of the test digest: authenticated, and digest ACLs on created znodes."""
    from kazoo.security import make_digest_acl

    return {"auth_data": [("digest", ":".join(ZK_AUTH))], "default_acl": [make_digest_acl(*ZK_AUTH, all=True)]}


@contextlib.contextmanager
def redis_user(admin: redis.Redis, user: str, topologies: Sequence[Any], password: str,
               **options: Any) -> Iterator[redis.Redis]:
    """A Redis user limited to ``topologies`` (txdag.cli.acl's rules) and a client logged in as it; deleted after."""
    admin.execute_command("ACL", "SETUSER", *setuser_args(user, topologies, password=password, **options))
    kwargs = admin.connection_pool.connection_kwargs
    client = redis.Redis(host=kwargs["host"], port=kwargs["port"], db=kwargs.get("db", 0), username=user,
                         password=password)
    try:
        yield client
    finally:
        client.close()
        admin.execute_command("ACL", "DELUSER", user)


def redis_config_of(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    config: dict[str, Any] = {"host": parts.hostname, "port": parts.port, "database": int(parts.path.strip("/") or 0)}
    if parts.username:
        config["username"] = unquote(parts.username)
    if parts.password:
        config["password"] = unquote(parts.password)
    return config

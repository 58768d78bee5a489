"""Passwords stay out of logs: a filter on the loggers that could print one masks every registered secret.

kazoo logs each request at DEBUG, its digest ``Auth`` packet included (``auth='user:password'``); a Redis URL
holds its password. :func:`register_secret` is called wherever txdag gets hold of a password (ZooKeeper digest
auth, Redis URLs); the filter then replaces the password, raw or URL-quoted, with ``***`` in any record of the
loggers below, at every level. Airflow's own secrets masker does the same in task logs for connections.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

MASK = "***"
LOGGERS = ("kazoo.client", "kazoo.protocol.connection", "txdag", "redis", "py4j")
_secrets: set[str] = set()
_installed: set[str] = set()


def mask(text: str) -> str:
    """``text`` with every registered secret replaced by ``***`` (longest first, so no part of one is left)."""
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


class MaskSecrets(logging.Filter):
    """Rewrites a record whose message holds a registered secret; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _secrets:
            message = record.getMessage()
            masked = mask(message)
            if masked != message:
                record.msg, record.args = masked, None
        return True


def register_secret(secret: str | None) -> None:
    """Mask ``secret`` (and its URL-quoted form) in the records of LOGGERS from now on."""
    if not secret or len(secret) < 3:  # masking one or two characters would garble every line
        return
    _secrets.update({secret, quote(secret, safe="")})
    for name in LOGGERS:
        if name not in _installed:
            logging.getLogger(name).addFilter(MaskSecrets())
            _installed.add(name)


SECRET_SETTINGS = ("password", "secret", "jaas", "oauthbearer.config", "key.pem", "keystore.key", "token")


def register_config_secrets(config: dict[str, object]) -> None:
    """Mask the values of a client configuration's secret settings (Kafka's ``sasl.password``,
    ``ssl.key.password``, ``sasl.jaas.config``, ``sasl.oauthbearer.client.secret``, ...: every key naming one of
    SECRET_SETTINGS)."""
    for key, value in config.items():
        if any(word in key for word in SECRET_SETTINGS):
            register_secret(str(value))

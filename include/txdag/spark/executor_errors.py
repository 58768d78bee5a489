"""An error raised on a Spark executor reaches the driver as a PySparkException whose message holds the executor's
traceback; a txdag error there is re-raised as its own class, so that healing classifies it as it would on the
driver (BatchReadError fails the txid at once, ServiceUnavailable is replayed)."""

from __future__ import annotations

import re

from pyspark.errors import PySparkException

from txdag import errors

_TXDAG_ERROR = re.compile(r"txdag\.errors\.(\w+): (.*)")


def raise_executor_error(exc: PySparkException) -> None:
    """Re-raise a txdag error that an executor raised as itself (its message's first line); anything else as it
    came."""
    found = _TXDAG_ERROR.findall(str(exc))
    if found:
        name, message = found[-1]
        kind = getattr(errors, name, None)
        if isinstance(kind, type) and issubclass(kind, errors.TxdagError) and name != "TxidOrderError":
            raise kind(message) from None
    raise exc

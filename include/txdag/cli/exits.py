"""The exit codes of ``txdag``, in one place: a script can tell a mistake in its command line from a service that
is down (retry later) from an operation txdag refused (change what you ask) from a configuration to fix.

    0    done
    1    failed: what was asked for does not exist or does not hold (an unknown topology, txid, state or
         namespace; a doctor check that failed; a migration stopped before the end)
    2    usage: the command line is wrong (argparse's own code: an unknown option, a txid that is not an
         integer >= 1 in ASCII digits, a number out of range, a malformed name, an empty --dags)
    3    unavailable: a service did not answer (Redis, ZooKeeper, Airflow's REST API): start it, then rerun
    4    refused: txdag or Airflow refused the operation in the topology's current state (a replay beyond the
         last txid, a migration while a txid is prepared, a halted topology, accept-missing of a committed txid
         or of a source whose lost entries cannot be listed)
    5    configuration: a connection, a password, an ACL, a DAG file or a stored format to fix
    70   internal: an unexpected error, a bug in txdag (TXDAG_TRACEBACK=1 prints its traceback to report it)
    130  interrupted (Ctrl-C)
"""

from __future__ import annotations

OK = 0
FAILED = 1
USAGE = 2
UNAVAILABLE = 3
REFUSED = 4
CONFIG = 5
INTERNAL = 70
INTERRUPTED = 130

TRACEBACK_ENV = "TXDAG_TRACEBACK"


def code_of(exc: BaseException) -> int:
    """The exit code of an error txdag raised on purpose (or that a service's client raised)."""
    from txdag.errors import (
        CascadeError,
        ConfigError,
        FormatVersionError,
        ServiceUnavailable,
        SourceUnavailable,
        StoreWentBackwards,
        TxdagError,
    )
    from txdag.state.kv.errors import KVStateError
    from txdag.txid.holes import AcceptRefused
    from txdag.txid.report import ReplayRefused

    given = getattr(exc, "exit_code", None)
    if isinstance(given, int):
        return given
    if isinstance(exc, ServiceUnavailable | SourceUnavailable):
        return UNAVAILABLE
    if isinstance(exc, ConfigError | FormatVersionError):
        return CONFIG
    if isinstance(exc, ReplayRefused | AcceptRefused | KVStateError | CascadeError | StoreWentBackwards):
        return REFUSED
    return FAILED if isinstance(exc, TxdagError) else INTERNAL

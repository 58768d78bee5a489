"""Exceptions of txdag. Each message says what happened, where, and what to do next."""


class TxdagError(Exception):
    """Base of every error txdag raises on purpose."""


class ConfigError(TxdagError, ValueError):
    """A definition or configuration value is wrong; the message says what to change."""


class ServiceUnavailable(TxdagError, ConnectionError):
    """Redis or ZooKeeper cannot be reached; the message names the service, the address and how to start it."""


class AccessDenied(ConfigError):
    """Redis refused txdag's user (wrong password, or a key or command outside its ACL); the message names the
    user, the topology and the key or command, never the password, and says how to grant the access."""


class FormatVersionError(TxdagError):
    """A persisted record carries a format version (or shape) this code does not know."""


class TxidOrderError(TxdagError):
    """A txid went backwards: the state already holds a later txid than the one being applied."""

    def __init__(self, current: int, stored: int, where: str = "") -> None:
        place = f" at {where}" if where else ""
        super().__init__(
            f"txid {current} is behind the stored txid {stored}{place}: commits must be applied in "
            f"increasing txid order; a replay of txid {current} after txid {stored} was committed is a bug "
            f"or two topologies share one state namespace"
        )
        self.current = current
        self.stored = stored


class BatchReadError(TxdagError):
    """The source does not hold the tuples a batch's metadata describes (a missing key, a trimmed stream)."""


class SourceUnavailable(TxdagError):
    """A partition of the source cannot be read right now (its Redis server is down or times out)."""


class StaleAttemptError(TxdagError):
    """A result of an attempt that is no longer the current one for its txid; it must be ignored."""


class CascadeError(TxdagError):
    """A txid cannot commit because it, or a txid before it, failed and must be replayed first."""

    def __init__(self, message: str, failed_txid: int | None = None) -> None:
        super().__init__(message)
        self.failed_txid = failed_txid  # the failed txid to replay first, when known


class StoreWentBackwards(TxdagError):
    """A store holds less than ZooKeeper says was committed or emitted (a Redis restarted without its data, a
    backup restored, a source trimmed): txdag halts the topology rather than skip or recount silently."""


def start_over(topology: str) -> str:
    """The deliberate way out of a store that went backwards (txdag.cli.ops.cmd_reset)."""
    return (f"start the topology over on purpose with `txdag reset {topology} --confirm` (it deletes the "
            f"topology's states and txid records; the source is kept and read again from its start)")


def source_went_backwards(topology: str, detail: str) -> StoreWentBackwards:
    """The error for a source that no longer holds what the last emitted batch read (``detail``: what the spout
    found, naming the key or stream and both positions)."""
    return StoreWentBackwards(
        f"topology {topology!r}: the source went backwards: {detail}. It was restarted without its data, "
        f"trimmed, or restored from an older backup. txdag halts this topology rather than skip entries or read "
        f"new ones under old ids. Ways out: restore the source's data, or "
        f"{start_over(topology)}"
    )

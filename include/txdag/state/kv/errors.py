"""The TXDAG_KV_* errors of the namespace scripts as txdag exceptions that say what to do (the table
``txdag.luascripts`` translates them with)."""

from __future__ import annotations

from collections.abc import Callable

from txdag.errors import BatchReadError, ConfigError, FormatVersionError, StaleAttemptError, TxdagError, TxidOrderError


class KVStateError(TxdagError):
    """A KeyValueState protocol step cannot run in the namespace's current state (the message says why)."""


class KeyCollision(KVStateError):
    """Two fields of one migration chunk convert to one key; ``index`` is the first one's place in the chunk."""

    def __init__(self, namespace: str, index: int) -> None:
        super().__init__(f"KeyValueState {namespace!r}: field number {index} of a migration chunk converts to a key "
                         f"that is taken already: two keys would merge; delete one of the two (HDEL), then run the "
                         f"same migrate again")
        self.index = index


def _migrate_hint(ns: str, target: str) -> str:
    k, _, v = target.partition(",")
    return f"txdag state migrate {ns} --key-serializer {k} --value-serializer {v}"


def _behind(ns: str, txid: str, committed: str) -> TxdagError:
    return TxidOrderError(int(txid), int(committed), where=f"KeyValueState {ns!r} (preparing)")


def _serializers(ns: str, stored: str, wanted: str) -> TxdagError:
    return ConfigError(f"KeyValueState {ns!r} was written with serializers {stored} (key,value), not {wanted}: "
                       f"open it with {stored}, or convert it in place with `{_migrate_hint(ns, wanted)}`")


def _migrating(ns: str, target: str) -> TxdagError:
    return KVStateError(f"KeyValueState {ns!r} is being migrated to serializers {target} (key,value) and cannot "
                        f"be used until that finishes; finish it with `{_migrate_hint(ns, target)}`")


def _other_prepared(ns: str, held: str, txid: str) -> TxdagError:
    return KVStateError(f"KeyValueState {ns!r}: txid {held} is prepared but not committed, so txid {txid} cannot "
                        f"be prepared; commit or roll back txid {held} first (txdag.state.kv.recover does it)")


def _stale(ns: str, txid: str, attempt: str, held: str) -> TxdagError:
    return StaleAttemptError(f"KeyValueState {ns!r}: attempt {held} of txid {txid} is already prepared; attempt "
                             f"{attempt} is stale and must not replace it")


def _not_staged(ns: str, txid: str, attempt: str) -> TxdagError:
    return BatchReadError(f"KeyValueState {ns!r}: nothing staged for txid {txid} attempt {attempt}; the "
                          f"processing step did not run, or Redis lost it: replay txid {txid}")


def _not_sealed(ns: str, txid: str, attempt: str) -> TxdagError:
    return BatchReadError(f"KeyValueState {ns!r}: the staging of txid {txid} attempt {attempt} is not sealed (the "
                          f"processing step did not finish): replay txid {txid}")


def _lost(ns: str, txid: str, attempt: str, n: str, sealed: str) -> TxdagError:
    return BatchReadError(f"KeyValueState {ns!r}: the staging of txid {txid} attempt {attempt} holds {n} keys, "
                          f"sealed with {sealed} (Redis lost some, or two partitions staged one key): replay txid "
                          f"{txid}")


def _not_prepared(ns: str, txid: str, held: str) -> TxdagError:
    return KVStateError(f"KeyValueState {ns!r}: txid {txid} cannot commit, it is not prepared (prepared: {held}); "
                        f"prepare it first")


def _prepared(ns: str, held: str) -> TxdagError:
    return KVStateError(f"KeyValueState {ns!r}: txid {held} is prepared but not committed; a migration would "
                        f"convert half a transaction. Let the topology commit it (or run recovery), then migrate")


def _version(ns: str, version: str) -> TxdagError:
    return FormatVersionError(f"KeyValueState {ns!r} has format version {version!r}; this txdag reads version 1: "
                              f"upgrade txdag")


def _nometa(ns: str) -> TxdagError:
    return KVStateError(f"KeyValueState {ns!r} has no record of its serializers (txdag:kv:{{{ns}}}:meta): name "
                        f"the ones that wrote it with --from-key-serializer and --from-value-serializer")


def _rerun(ns: str) -> TxdagError:
    return KVStateError(f"KeyValueState {ns!r} changed while it was being migrated (new staging, or values left "
                        f"to convert): run the same `txdag state migrate` again to finish")


def _collision(ns: str, index: str) -> TxdagError:
    return KeyCollision(ns, int(index))


ERRORS: dict[str, Callable[..., TxdagError]] = {
    "TXDAG_KV_BEHIND": _behind, "TXDAG_KV_SERIALIZERS": _serializers, "TXDAG_KV_MIGRATING": _migrating,
    "TXDAG_KV_OTHER_PREPARED": _other_prepared, "TXDAG_KV_STALE": _stale, "TXDAG_KV_NOT_STAGED": _not_staged,
    "TXDAG_KV_NOT_SEALED": _not_sealed, "TXDAG_KV_LOST": _lost, "TXDAG_KV_NOT_PREPARED": _not_prepared,
    "TXDAG_KV_PREPARED": _prepared, "TXDAG_KV_VERSION": _version, "TXDAG_KV_NOMETA": _nometa,
    "TXDAG_KV_NEW_STAGING": _rerun, "TXDAG_KV_UNFINISHED": _rerun, "TXDAG_KV_NOT_MIGRATING": _rerun,
    "TXDAG_KV_COLLISION": _collision,
}

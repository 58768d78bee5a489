"""A sink of a user's own, as Storm's committer bolts write one: a txid's rows to a file of its own, in txid order.

Each txid becomes ``txid-<txid>-<attempt>.jsonl`` in ``folder``, one JSON array per row. The file is written under
a temporary name, flushed to disk and renamed in, so it is there whole or not at all; its name is the record of
what the sink holds, so ``last_applied`` reads it back from the folder itself, never from txdag. A commit retried
after the rename finds its txid and attempt there and is skipped by txdag; the same txid with a later attempt (an
opaque batch re-emitted after a commit failed for good) replaces the earlier attempt's file. A reader takes, per
txid, the file of the highest attempt (there is one, unless the sink died between the rename and the removal).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from txdag import TransactionAttempt
from txdag.trident import Committer

FILE = re.compile(r"txid-(\d+)-(\d+)\.jsonl")


@dataclass(repr=False)  # Committer's repr: the class name, in the commit's messages
class JsonLinesSink(Committer):
    """The definition: the folder the files land in (a path the commit task can write)."""

    folder: str

    def last_applied(self) -> TransactionAttempt | None:
        held = [TransactionAttempt(int(m[1]), int(m[2])) for m in map(FILE.fullmatch, self._names()) if m]
        return max(held, key=lambda tx: (tx.txid, tx.attempt), default=None)

    def commit(self, tx: TransactionAttempt, rows: list[Any]) -> None:
        folder = Path(self.folder)
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"txid-{tx.txid}-{tx.attempt}.jsonl"
        temporary = folder / f".{final.name}.{os.getpid()}.tmp"  # a writer's own: never another's half file
        with temporary.open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(list(row), ensure_ascii=False, default=str) + "\n")
            out.flush()
            os.fsync(out.fileno())
        temporary.replace(final)
        _sync_folder(folder)  # the rename itself on disk: the record survives a crash of the machine
        for name in self._names():  # an earlier attempt of this txid: replaced (never a later one's file)
            m = FILE.fullmatch(name)
            if m and int(m[1]) == tx.txid and int(m[2]) < tx.attempt:
                (folder / name).unlink(missing_ok=True)

    def _names(self) -> list[str]:
        try:
            return os.listdir(self.folder)
        except FileNotFoundError:
            return []


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

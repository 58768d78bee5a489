"""Files landing in a folder, as a transactional spout: each txid takes the next files, in name order.

A writer lands each file whole (written elsewhere, then renamed in), with names that sort in landing order
(``2026-11-27T10:00:00.txt``). A txid's metadata names its files, so a replay reads exactly the same lines;
one line is one tuple, its id ``<file>#<line number>``. Spark reads the files on its executors; ``emit_batch``
reads them in Python for ``LocalTopology``.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from typing import Any

from txdag import TransactionAttempt
from txdag.errors import ConfigError, StoreWentBackwards
from txdag.spouts import Batch, Metadata, Record, Source, SpoutContext, SpoutKind, TransactionalSpout

LINE_BREAK = r"\r?\n"  # the same split in Python and in Spark; empty lines are no tuples


@dataclass(frozen=True)
class LandingFiles(Source):
    """The definition: which folder, which names, how many files per txid."""

    folder: str
    pattern: str = "*.txt"
    max_files: int = 10

    kind = SpoutKind.TRANSACTIONAL

    def __post_init__(self) -> None:
        if not isinstance(self.folder, str) or not os.path.isabs(self.folder):
            raise ConfigError(f"LandingFiles folder must be an absolute path, got {self.folder!r}")
        if isinstance(self.max_files, bool) or not isinstance(self.max_files, int) or self.max_files < 1:
            raise ConfigError(f"LandingFiles max_files must be an int >= 1, got {self.max_files!r}")

    def build(self, context: SpoutContext) -> TransactionalSpout:
        return LandingFilesSpout(self, context.topology)


class LandingFilesSpout(TransactionalSpout):
    kind = SpoutKind.TRANSACTIONAL

    def __init__(self, source: LandingFiles, topology: str) -> None:
        self.source, self.topology = source, topology

    def pending(self, prev_metadata: Metadata | None) -> list[str]:
        """The landed files after the previous txid's last one, in name order (names starting with '.' are
        files still being written)."""
        last = prev_metadata["last"] if prev_metadata else ""
        names = [n for n in os.listdir(self.source.folder)
                 if fnmatch.fnmatch(n, self.source.pattern) and not n.startswith(".")]
        return sorted(n for n in names if n > last)

    def is_ready(self, prev_metadata: Metadata | None) -> bool:
        return bool(self.pending(prev_metadata))

    def initialize_transaction(self, txid: int, prev_metadata: Metadata | None) -> Metadata:
        files = self.pending(prev_metadata)[: self.source.max_files]
        return {"files": files, "last": files[-1] if files else (prev_metadata or {}).get("last", "")}

    def lag(self, prev_metadata: Metadata | None) -> int:
        return len(self.pending(prev_metadata))  # files, not lines: counting lines would read them

    def paths(self, tx: TransactionAttempt, metadata: Metadata) -> list[str]:
        """The batch's files; one gone means the source lost part of a batch a replay must read again."""
        paths = [os.path.join(self.source.folder, name) for name in metadata["files"]]
        gone = [p for p in paths if not os.path.isfile(p)]
        if gone:
            raise StoreWentBackwards(
                f"topology {self.topology!r} txid {tx.txid} attempt {tx.attempt}: file(s) {gone} of its batch are "
                f"gone from {self.source.folder}: put them back, then replay the txid; or start over with "
                f"`txdag reset {self.topology} --confirm`")
        return paths

    def read(self, spark: Any, tx: TransactionAttempt, metadata: Metadata) -> Any:
        from pyspark.sql import functions as F

        if not metadata["files"]:
            return spark.createDataFrame([], "id string, value string, partition string")
        lines = (spark.read.text(self.paths(tx, metadata), wholetext=True)
                 .select(F.col("_metadata.file_name").alias("file"),
                         F.posexplode(F.split("value", LINE_BREAK)).alias("n", "line"))
                 .where(F.col("line") != ""))
        return lines.select(F.concat_ws("#", "file", (F.col("n") + 1).cast("string")).alias("id"),
                            F.col("line").alias("value"), F.lit(None).cast("string").alias("partition"))

    def emit_batch(self, tx: TransactionAttempt, metadata: Metadata) -> Batch:
        records = []
        for path in self.paths(tx, metadata):
            with open(path, encoding="utf-8", newline="") as f:
                lines = re.split(LINE_BREAK, f.read())
            name = os.path.basename(path)
            records += [Record(f"{name}#{n}", line) for n, line in enumerate(lines, start=1) if line]
        return Batch(tx, records)

"""The spout API: where a topology's batches come from (Storm's transactional spouts), public and stable.

Two objects, as in Storm (``ITransactionalSpout.getCoordinator``/``getEmitter``):

- a :class:`Source` is what ``TransactionalTopology(source=...)`` takes: data (a frozen dataclass, its fields JSON
  values), checked when built, that travels to the Spark job by class reference. Its ``build(context)`` makes the
  runtime spout with the clients of the connections it names (``conn_ids``).
- a :class:`TransactionalSpout` is that runtime: the coordinator side (``is_ready``, ``initialize_transaction``,
  ``lag``, ``cleanup_before``, ``close``) runs in the ``coordinate`` task, the emitter side in the job:
  ``read(spark, tx, metadata)``, a Spark read of exactly the batch's metadata, on the executors, and
  ``emit_batch(tx, metadata)``, the same batch as Python records (``LocalTopology``, and the Spark read of a spout
  without its own ``read``).

Metadata is a JSON object; the coordinator stores it in ZooKeeper with its txid, so that a replay can re-emit the
batch. Storm's ITransactionalSpout, IPartitionedTransactionalSpout and IOpaquePartitionedTransactionalSpout are one
API with a ``kind``:

- ``transactional`` (and partitioned transactional): a replay of a txid re-emits its stored metadata, hence
  exactly the same tuples.
- ``opaque`` (partitioned): a replay recomputes the metadata from the previous txid's metadata; the batch may
  differ, yet every tuple is committed in exactly one batch.

A partitioned spout's metadata keeps one entry per partition under ``"partitions"`` (``{"partitions": {name:
{...}}}``); a partition may appear or disappear between txids, and an opaque batch planned without a partition
that was down marks it ``"unavailable": true`` (:func:`unavailable_partitions`). No Spark and no Airflow here:
the coordinator side runs without either.
"""

from __future__ import annotations

import dataclasses
import enum
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from txdag.attempt import TransactionAttempt
from txdag.errors import ConfigError

if TYPE_CHECKING:
    import redis

Metadata = dict[str, Any]
BATCH_COLUMNS = ("id", "value", "partition")  # what a batch's DataFrame holds, all strings
REJECTED = "rejected"  # a read's optional column: why a row is not a tuple (null for tuples)
READ_COLUMNS = (*BATCH_COLUMNS, REJECTED)  # a Spark read's columns, with its rejections (all strings)
READ_SCHEMA = ", ".join(f"{name} string" for name in READ_COLUMNS)


class SpoutKind(str, enum.Enum):
    TRANSACTIONAL = "transactional"
    OPAQUE = "opaque"


@dataclass(frozen=True)
class Record:
    """One tuple of a batch: ``id`` is unique within the source (partition-qualified for partitioned spouts)."""

    id: str
    value: Any
    partition: str | None = None


@dataclass(frozen=True)
class Rejection:
    """A source entry that could not be turned into a tuple; counted and kept for an operator, never dropped."""

    id: str
    reason: str
    partition: str | None = None


def read_rows(records: Iterable[Record], rejections: Iterable[Rejection]) -> Any:
    """A batch's records and rejections as one Arrow record batch of READ_COLUMNS: what a spout's ``read`` yields
    from ``mapInArrow`` when its executors read the source as ``emit_batch`` does."""
    import pyarrow as pa

    records, rejections = list(records), list(rejections)
    columns = ([r.id for r in records] + [r.id for r in rejections],
               [r.value for r in records] + [None] * len(rejections),
               [r.partition for r in records] + [r.partition for r in rejections],
               [None] * len(records) + [r.reason for r in rejections])
    return pa.RecordBatch.from_arrays([pa.array(c, pa.string()) for c in columns], names=list(READ_COLUMNS))


@dataclass(frozen=True)
class Batch:
    """What an emitter produced for one TransactionAttempt."""

    tx: TransactionAttempt
    records: list[Record]
    rejections: list[Rejection] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.records)


@dataclass(frozen=True)
class SpoutContext:
    """What ``Source.build`` gets: the topology's name (for messages) and a client per Redis connection the source
    named in ``conn_ids`` (resolved by Airflow in the tasks, from ``TXDAG_REDIS_URLS`` in a Spark job)."""

    topology: str
    redis_clients: Mapping[str, redis.Redis] = field(default_factory=dict)
    kafka_configs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # conn id -> client configuration

    def redis(self, conn_id: str) -> redis.Redis:
        if conn_id not in self.redis_clients:
            raise ConfigError(f"topology {self.topology!r}: no Redis client for connection {conn_id!r} (have "
                              f"{sorted(self.redis_clients)}); name it in the source's conn_ids()")
        return self.redis_clients[conn_id]

    def kafka(self, conn_id: str) -> dict[str, Any]:
        """The Kafka client configuration of ``conn_id`` (``bootstrap.servers``, security settings)."""
        if conn_id not in self.kafka_configs:
            raise ConfigError(f"topology {self.topology!r}: no Kafka configuration for connection {conn_id!r} (have "
                              f"{sorted(self.kafka_configs)}); name it in the source's kafka_conn_ids()")
        return dict(self.kafka_configs[conn_id])


class TransactionalSpout(ABC):
    """The runtime spout: the coordinator side in the ``coordinate`` task, the emitter side in the job."""

    kind: SpoutKind

    @abstractmethod
    def is_ready(self, prev_metadata: Metadata | None) -> bool:
        """True when there is something to read after ``prev_metadata`` (None: no txid yet). False skips the run
        and consumes no txid."""

    @abstractmethod
    def initialize_transaction(self, txid: int, prev_metadata: Metadata | None) -> Metadata:
        """The metadata of ``txid``'s batch, continuing from the previous txid's metadata (a JSON object)."""

    def lag(self, prev_metadata: Metadata | None) -> int | None:
        """Source entries after ``prev_metadata``'s batch, None when unknown; raises StoreWentBackwards when the
        source no longer holds that batch (restarted without its data, trimmed): never skip or re-read."""
        return None

    def batch_size(self, metadata: Metadata) -> int | None:
        """How many source entries ``metadata`` covers (records + rejections), None when unknown without reading."""
        return None

    def read(self, spark: Any, tx: TransactionAttempt, metadata: Metadata) -> Any:
        """The batch as a DataFrame of ``id, value, partition`` strings, read by Spark (the job's ``SparkSession``,
        typed Any: the core imports no pyspark) on its executors. It may add a ``rejected`` string column: rows where
        it is set are not tuples but rejections, recorded with that reason (only those rows reach the driver). A
        spout that does not override it is read through ``emit_batch`` on the driver (and its rejections recorded)."""
        raise NotImplementedError

    def emit_batch(self, tx: TransactionAttempt, metadata: Metadata) -> Batch:
        """Exactly the tuples ``metadata`` describes, as Python records (``LocalTopology`` runs this one)."""
        raise ConfigError(f"{type(self).__name__} has no emit_batch: it is read by Spark only (read); define "
                          f"emit_batch too to run it in LocalTopology")

    def committed(self, txid: int, metadata: Metadata) -> None:
        """``txid``'s commit is recorded, with ``metadata``: a spout may publish its position for the source's own
        tools (the Kafka spout writes its consumer group's offsets). ZooKeeper stays the position: never read back."""
        return None

    def cleanup_before(self, txid: int) -> None:
        """Forget what the spout keeps per txid below ``txid``: those txids are committed and rotated out."""
        return None

    def close(self) -> None:
        """Release what ``Source.build`` opened; called when the task or the job is done with the spout."""
        return None


def reads_with_spark(spout: TransactionalSpout) -> bool:
    """True when the spout has its own Spark read (executor side), False when it is read through emit_batch: a spout
    without ``read``, or whose class overrides ``emit_batch`` below the class that gives it ``read`` (a subclass of a
    built-in spout that reads its batch its own way is read its way, on the driver)."""
    mro = type(spout).__mro__
    if getattr(mro[0], "read", TransactionalSpout.read) is TransactionalSpout.read:
        return False
    depth = {name: next(i for i, c in enumerate(mro) if name in vars(c)) for name in ("read", "emit_batch")}
    return depth["read"] <= depth["emit_batch"]


@dataclass(frozen=True)
class SourceInput:
    """One thing a source reads, through a connection: a Redis key or key pattern (``conn_type`` "redis"), or a
    Kafka topic ("kafka"). Its lineage names it (txdag.airflow.lineage)."""

    conn_type: str
    conn_id: str
    name: str

    def __post_init__(self) -> None:
        if self.conn_type not in ("redis", "kafka"):
            raise ConfigError(f"SourceInput({self.conn_type!r}, {self.conn_id!r}, {self.name!r}): conn_type is "
                              f"'redis' or 'kafka'")


class Source(ABC):
    """What ``TransactionalTopology(source=...)`` takes: a spout's definition, as data.

    Write it as a frozen dataclass whose fields are JSON values: the Spark job rebuilds it from its class (by module
    and file) and those fields. Names Airflow connection ids, never hosts or passwords."""

    type: ClassVar[str] = "class"  # the built-in sources' own names ("tweets", "streams")

    @property
    def kind(self) -> SpoutKind:
        """TRANSACTIONAL or OPAQUE: the coordinator's replay rules follow it. Set it as a class attribute."""
        raise ConfigError(f"source {type(self).__qualname__} has no kind: set kind = SpoutKind.TRANSACTIONAL or "
                          f"SpoutKind.OPAQUE on the class")

    @abstractmethod
    def build(self, context: SpoutContext) -> TransactionalSpout:
        """The runtime spout, over the clients of ``conn_ids``."""

    def conn_ids(self) -> list[str]:
        """The Redis connection ids the spout reads through (none by default)."""
        return []

    def kafka_conn_ids(self) -> list[str]:
        """The Kafka connection ids (Airflow's ``kafka`` type) the spout reads through (none by default)."""
        return []

    def acl_patterns(self) -> list[str]:
        """The Redis keys the spout reads (``txdag acl redis``); none by default."""
        return []

    def inputs(self) -> list[SourceInput]:
        """What the spout reads, per connection, for its lineage. By default: ``acl_patterns`` (or every key, "*")
        through each Redis connection, and every topic ("*") through each Kafka one; a source that knows which
        connection reads which key or topic says so here."""
        return ([SourceInput("redis", c, p) for c in self.conn_ids() for p in self.acl_patterns() or ["*"]]
                + [SourceInput("kafka", c, "*") for c in self.kafka_conn_ids()])

    def to_dict(self) -> dict[str, Any]:
        """The class reference and fields the job rebuilds it from (``txdag.topology.definition.source_from_dict``)."""
        import inspect

        cls = type(self)
        return {"type": "class", "module": cls.__module__, "name": cls.__qualname__,
                "file": inspect.getsourcefile(cls), "params": source_params(self)}


def source_params(source: Source) -> dict[str, Any]:
    """A user source's fields, checked to travel as JSON to the Spark job."""
    import json

    cls = type(source)
    if not dataclasses.is_dataclass(source):
        raise ConfigError(f"source {cls.__qualname__} is not a dataclass: write it as @dataclass(frozen=True), so that "
                          f"the Spark job can rebuild it from its fields (docs/spouts.md)")
    if "<locals>" in cls.__qualname__ or cls.__module__ == "__main__":
        raise ConfigError(f"source {cls.__qualname__} is defined inside a function or a script run as __main__: "
                          f"define it at the top level of a module the DAG imports (beside the DAG file or in "
                          f"include/), so that the Spark job can import it")
    params = {f.name: getattr(source, f.name) for f in dataclasses.fields(source) if f.init}
    try:
        json.dumps(params)
    except (TypeError, ValueError):
        raise ConfigError(f"source {cls.__qualname__}'s fields {params!r} are not JSON values; the Spark job rebuilds "
                          f"it from them, so give it numbers, strings, lists or dicts") from None
    if source.kind not in (SpoutKind.TRANSACTIONAL, SpoutKind.OPAQUE):
        raise ConfigError(f"source {cls.__qualname__} has kind {source.kind!r}: set kind = "
                          f"SpoutKind.TRANSACTIONAL or SpoutKind.OPAQUE on the class")
    return params


def unavailable_partitions(metadata: Metadata) -> tuple[str, ...]:
    """The partitions an opaque batch was planned without, their source being down (``"unavailable": true``);
    () for a complete batch and for metadata without partitions. The coordinator reports them with the batch."""
    parts = metadata.get("partitions") if isinstance(metadata, dict) else None
    if not isinstance(parts, dict):
        return ()
    return tuple(sorted(name for name, part in parts.items() if isinstance(part, dict) and part.get("unavailable")))

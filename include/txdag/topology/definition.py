"""What a topology is made of, as frozen data validated when built: its states, its source, one job's inputs.

Airflow-free: the DAG renderer (``txdag.airflow``), the Spark job runner (``txdag.spark``) and the tests all
build from these. A spec names Airflow connection ids, never hosts or passwords; whoever runs it resolves
them (the Airflow tasks through hooks, the Spark job through ``TXDAG_REDIS_URLS``).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from dataclasses import field as dataclass_field
from typing import Any

import redis

from txdag.attempt import TransactionAttempt
from txdag.defaults import REDIS_CONN_ID
from txdag.errors import ConfigError, FormatVersionError
from txdag.spouts import streams as streams_layout
from txdag.spouts import tweets as tweets_layout
from txdag.spouts.base import Source, SourceInput, SpoutContext, SpoutKind, TransactionalSpout
from txdag.spouts.streams import OpaquePartitionedStreamSpout, PartitionedTransactionalStreamSpout, StreamPartition
from txdag.spouts.tweets import TweetsTransactionalSpout
from txdag.state import MAP_STATES, BackingMap, DefaultKeyCodec, JoinedKeyCodec, KeyCodec, RedisBackingMap, StateKind
from txdag.state.base import StateFactory
from txdag.state.map_state import MapStateBase
from txdag.state.snapshottable_map import GLOBAL_KEY
from txdag.topology.refs import ref_of

FORMAT_VERSION = 1
DEFAULT_REDIS_CONN_ID = REDIS_CONN_ID  # (the name trident.query and others import)
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")  # \Z, not $: '$' matches before a final newline


def check_name(what: str, value: Any) -> str:
    """Ids and names end up in znode paths, Redis keys and DAG ids: letters, digits, ``_ . -`` only."""
    if not isinstance(value, str) or not NAME.match(value):
        raise ConfigError(f"{what} must be a non-empty string of letters, digits, '_', '.' or '-', got {value!r}")
    return value


def _positive(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what} must be an int >= 1, got {value!r}")
    return value


@dataclass(frozen=True)
class State:
    """One state the commit writes: a Trident map state of ``kind`` over the Redis hash ``namespace``.

    ``key_fields`` is how many grouping fields make a key; 0 means one global value (Trident's
    ``persistentAggregate`` without ``groupBy``, stored under ``$GLOBAL$``). ``separator`` joins the fields into
    the hash field (seed 000's ``user:hashtag``); without it a multi-field key is stored as a JSON array.
    """

    name: str
    kind: str = "transactional"
    namespace: str | None = None
    key_fields: int = 1
    separator: str | None = None
    store: StateFactory | None = None  # None: a Redis hash of the topology's Redis; else a store of the user's

    def __post_init__(self) -> None:
        check_name("a state name", self.name)
        if self.store is not None:
            if not isinstance(self.store, StateFactory):
                raise ConfigError(f"state {self.name!r}: store must be a txdag.state.StateFactory, got {self.store!r}")
            if self.namespace is not None:
                raise ConfigError(f"state {self.name!r}: namespace names a Redis hash, and this state is kept in "
                                  f"{self.store!r}: name its table (or file) in the store's own parameters")
            ref_of(self.store)  # its parameters are JSON values, or the definition could not be fingerprinted
        if self.kind not in MAP_STATES:
            kinds = sorted(k.value for k in MAP_STATES)
            raise ConfigError(f"state {self.name!r}: unknown kind {self.kind!r}; use one of {kinds}")
        if self.namespace is not None and (not isinstance(self.namespace, str) or not self.namespace):
            raise ConfigError(f"state {self.name!r}: namespace must be a non-empty string, got {self.namespace!r}")
        if isinstance(self.key_fields, bool) or not isinstance(self.key_fields, int) or self.key_fields < 0:
            raise ConfigError(f"state {self.name!r}: key_fields must be an int >= 0, got {self.key_fields!r}")
        if self.separator is not None and (not isinstance(self.separator, str) or not self.separator):
            raise ConfigError(f"state {self.name!r}: separator must be a non-empty string, got {self.separator!r}")

    @property
    def redis_key(self) -> str:
        return self.namespace or self.name

    @property
    def in_redis(self) -> bool:
        """Kept in a Redis hash (``redis_key``), not in a store of the user's."""
        return self.store is None

    def require_redis(self, what: str, topology: str | None = None) -> None:
        """Raise ConfigError when the state is in a store of the user's: ``what`` (a reader of Redis states) cannot
        read it."""
        if not self.in_redis:
            whose = f" of topology {topology!r}" if topology is not None else ""
            raise ConfigError(f"state {self.name!r}{whose} is kept in {self.store!r}, not in Redis: {what} reads "
                              f"Redis states only; read it in that store (its backing map's multi_get)")

    def codec(self) -> KeyCodec:
        if self.separator is not None and self.key_fields >= 1:
            return JoinedKeyCodec(self.separator, self.key_fields)
        return DefaultKeyCodec()

    def key(self, fields: Sequence[Any]) -> tuple:
        """The key tuple of one output row's grouping fields (``$GLOBAL$`` for a global state)."""
        if self.key_fields == 0:
            return GLOBAL_KEY
        if len(fields) != self.key_fields:
            raise ConfigError(f"state {self.name!r} has {self.key_fields} key field(s), got a row with {fields!r}")
        return tuple(fields)

    def build(self, client: redis.Redis, topology: str | None = None) -> MapStateBase:
        """The map state of this kind over its store's backing map (a Redis hash of ``client`` by default);
        ``topology`` is the topology's id, which a store needs (its default table names both)."""
        kind = MAP_STATES[StateKind(self.kind)]
        if self.store is None:
            return kind(RedisBackingMap(client, self.redis_key, key_codec=self.codec()))
        if topology is None:
            raise ConfigError(f"state {self.name!r} is kept in {self.store!r}: build it with its topology's id")
        where = f"topology {topology!r}: state {self.name!r}"
        try:
            backing = self.store.backing_map(topology, self.name, self.key_fields)
        except Exception as exc:
            exc.add_note(f"{where}: raised by {self.store!r}.backing_map() (docs/stores.md)")
            raise
        if isinstance(backing, RedisBackingMap):
            raise ConfigError(f"{where}: {self.store!r}.backing_map returned a RedisBackingMap; a state in Redis "
                              f"needs no store: drop store= (and give it a namespace)")
        if not isinstance(backing, BackingMap):
            raise ConfigError(f"{where}: {self.store!r}.backing_map returned {backing!r}, which has no "
                              f"multi_get/multi_put (txdag.state.BackingMap)")
        return kind(backing, key_codec=self.codec())

    def to_dict(self) -> dict[str, Any]:
        data = {"name": self.name, "kind": self.kind, "namespace": self.namespace, "key_fields": self.key_fields,
                "separator": self.separator}
        return data if self.store is None else {**data, "store": self.store_ref}

    @property
    def store_ref(self) -> dict[str, Any] | None:
        """The store's class and parameters (txdag.topology.refs); None for a Redis hash."""
        if isinstance(self.store, StoreRef):
            return dict(self.store.ref)
        return None if self.store is None else ref_of(self.store)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> State:
        store = data.get("store")
        return cls(**{**data, "store": None if store is None else StoreRef(store)})


@dataclass(frozen=True, repr=False)
class StoreRef(StateFactory):
    """A state's store as a Spark job sees it: its class and parameters by name (txdag.topology.refs); the backing
    map is built where the topology's definition is loaded (the commit task), never in the job."""

    ref: Mapping[str, Any]

    def backing_map(self, topology: str, state: str, key_fields: int) -> BackingMap:
        raise ConfigError(f"topology {topology!r}: state {state!r} is kept in {self!r}, which this process knows by "
                          f"name only: the commit task builds its backing map from the topology's definition")

    def __repr__(self) -> str:
        return str(self.ref.get("name"))


@dataclass(frozen=True)
class Sink:
    """A sink the commit writes, strictly in txid order (Storm's committer bolts): the job returns its rows with
    ``txdag.trident.commit_to(frame, committer)``, and the commit hands them to the committer (a
    txdag.contracts.Committer of the job file), which keeps its own record of the last txid it applied."""

    name: str

    def __post_init__(self) -> None:
        check_name("a sink name", self.name)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Sink:
        return cls(**data)


@dataclass(frozen=True)
class TweetsSource(Source):
    """Seed 000's tweets layout (keys ``<prefix>1..N``, ``<prefix>NEXT_WRITE``): a transactional spout."""

    max_transaction_size: int = 1000
    prefix: str = ""
    redis_conn_id: str = DEFAULT_REDIS_CONN_ID

    type = "tweets"
    kind = SpoutKind.TRANSACTIONAL

    def __post_init__(self) -> None:
        _positive("TweetsSource max_transaction_size", self.max_transaction_size)
        check_name("TweetsSource redis_conn_id", self.redis_conn_id)
        if not isinstance(self.prefix, str):
            raise ConfigError(f"TweetsSource prefix must be a string, got {self.prefix!r}")

    def conn_ids(self) -> list[str]:
        return [self.redis_conn_id]

    def acl_patterns(self) -> list[str]:
        """The keys the spout reads (txdag.keyspace's shape)."""
        return tweets_layout.acl_patterns(self.prefix)

    def build(self, context: SpoutContext) -> TransactionalSpout:
        return TweetsTransactionalSpout(
            context.redis(self.redis_conn_id), prefix=self.prefix,
            max_transaction_size=self.max_transaction_size, topology=context.topology,
        )

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "max_transaction_size": self.max_transaction_size, "prefix": self.prefix,
                "redis_conn_id": self.redis_conn_id}


@dataclass(frozen=True)
class StreamsSource(Source):
    """Redis Streams, one stream per partition (seed 004's partitioned spouts); opaque unless told otherwise.

    Every stream is read through ``redis_conn_id`` unless ``stream_conn_ids`` names another connection for it
    (partitions may live on different Redis servers). The partition name is the stream key.
    """

    streams: tuple[str, ...]
    opaque: bool = True
    max_per_partition: int = 1000
    field: str = "value"
    redis_conn_id: str = DEFAULT_REDIS_CONN_ID
    stream_conn_ids: Mapping[str, str] = dataclass_field(default_factory=dict)

    type = "streams"

    def __post_init__(self) -> None:
        if isinstance(self.streams, (str, set, frozenset, Mapping)) or not self.streams:
            raise ConfigError(f"StreamsSource needs a non-empty list of stream keys, got {self.streams!r} (a list or "
                              f"tuple: a set has no order, and its order is part of the topology's definition)")
        object.__setattr__(self, "streams", tuple(self.streams))
        object.__setattr__(self, "stream_conn_ids", dict(self.stream_conn_ids))
        if len(set(self.streams)) != len(self.streams) or not all(isinstance(s, str) and s for s in self.streams):
            raise ConfigError(f"StreamsSource stream keys must be distinct non-empty strings, got {self.streams!r}")
        unknown = sorted(set(self.stream_conn_ids) - set(self.streams))
        if unknown:
            raise ConfigError(f"StreamsSource stream_conn_ids names streams {unknown} that are not in streams")
        _positive("StreamsSource max_per_partition", self.max_per_partition)
        if not isinstance(self.opaque, bool):
            raise ConfigError(f"StreamsSource opaque must be True or False, got {self.opaque!r}")
        if not isinstance(self.field, str) or not self.field:
            raise ConfigError(f"StreamsSource field must be a non-empty string, got {self.field!r}")
        for conn_id in self.conn_ids():
            check_name("StreamsSource connection id", conn_id)

    @property
    def kind(self) -> SpoutKind:
        return SpoutKind.OPAQUE if self.opaque else SpoutKind.TRANSACTIONAL

    def conn_id_of(self, stream: str) -> str:
        return self.stream_conn_ids.get(stream, self.redis_conn_id)

    def conn_ids(self) -> list[str]:
        return sorted({self.conn_id_of(s) for s in self.streams})

    def acl_patterns(self) -> list[str]:
        """The keys the spout reads (txdag.keyspace's shape)."""
        return streams_layout.acl_patterns(self.streams)

    def inputs(self) -> list[SourceInput]:
        return [SourceInput("redis", self.conn_id_of(s), s) for s in self.streams]

    def build(self, context: SpoutContext) -> TransactionalSpout:
        partitions = [StreamPartition(s, context.redis(self.conn_id_of(s)), s) for s in self.streams]
        kind = OpaquePartitionedStreamSpout if self.opaque else PartitionedTransactionalStreamSpout
        return kind(partitions, max_per_partition=self.max_per_partition, field=self.field,
                    topology=context.topology)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "streams": list(self.streams), "opaque": self.opaque,
                "max_per_partition": self.max_per_partition, "field": self.field,
                "redis_conn_id": self.redis_conn_id, "stream_conn_ids": dict(self.stream_conn_ids)}


@dataclass(frozen=True)
class KeyValue:
    """A processing step's KeyValueState (seed 002): written by ``txdag.trident.stateful`` in the job, prepared
    and committed by the commit. ``provider`` and ``config`` are seed 002's provider name and JSON config
    (``redis``: host, port, timeout, database, username, password; ``redis_cluster``: nodes, timeout,
    max_redirections); without a config the state lives in the topology's Redis connection, which keeps
    passwords in Airflow. The namespace defaults to ``<topology>:<name>``."""

    name: str
    provider: str = "redis"
    config: Mapping[str, Any] | str | None = None
    namespace: str | None = None
    key_serializer: str = "json"
    value_serializer: str = "json"

    def __post_init__(self) -> None:
        from txdag.state.kv import parse_provider_config
        from txdag.state.kv.config import check_provider
        from txdag.state.kv.layout import check_namespace
        from txdag.state.kv.serializers import get_serializer

        check_name("a key-value state name", self.name)
        try:
            check_provider(self.provider)
        except ConfigError as exc:
            raise ConfigError(f"key-value state {self.name!r}: {exc}") from None
        if self.config is not None:
            parse_provider_config(self.provider, self.config)  # every mistake now, at parse time
        elif self.provider != "redis":
            raise ConfigError(f"key-value state {self.name!r}: provider {self.provider!r} needs a config (its nodes); "
                              f"without one the state uses the topology's Redis connection")
        if self.namespace is not None:
            check_namespace(self.namespace)
        get_serializer(self.key_serializer, for_keys=True)
        get_serializer(self.value_serializer)

    def namespace_of(self, topology: str) -> str:
        from txdag.state.kv import kv_namespace

        return self.namespace or kv_namespace(topology, self.name)

    def to_dict(self) -> dict[str, Any]:
        """Without the config: it may hold a password, and the job spec travels on a command line."""
        return {"name": self.name, "provider": self.provider, "namespace": self.namespace,
                "key_serializer": self.key_serializer, "value_serializer": self.value_serializer}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KeyValue:
        return cls(**data)


SOURCES: dict[str, type] = {"tweets": TweetsSource, "streams": StreamsSource}


def source_from_dict(data: Mapping[str, Any]) -> Source:
    """The source ``Source.to_dict`` described: a built-in one by its type, a user's by its class reference."""
    args = dict(data)
    if args.get("type") == "class":
        return user_source(args)
    kind = SOURCES.get(args.pop("type", None))
    if kind is None:
        raise FormatVersionError(f"unknown source type {data.get('type')!r}; this txdag knows "
                                 f"{sorted(SOURCES) + ['class']}")
    unknown = sorted(set(args) - {f.name for f in fields(kind)})
    if unknown:
        raise ConfigError(f"{kind.__name__} has no field(s) {unknown}; its fields: {[f.name for f in fields(kind)]}")
    return kind(**args)


def user_source(ref: Mapping[str, Any]) -> Source:
    """A user's source class, imported by module name, else from the file it was defined in (a module beside the
    DAG files or in include/ that the Spark driver's path lacks), and built from its fields."""
    module_name, name, file = ref.get("module"), ref.get("name"), ref.get("file")
    if not isinstance(module_name, str) or not isinstance(name, str) or not isinstance(ref.get("params"), dict):
        raise FormatVersionError(f"malformed source class reference {dict(ref)!r}: pass what Source.to_dict wrote")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if not isinstance(file, str) or not os.path.isfile(file):
            raise ConfigError(f"cannot import the source's module {module_name!r} ({exc}) and its file {file!r} is "
                              f"not here: install it, or ship it with the job (spark.submit.pyFiles)") from None
        spec = importlib.util.spec_from_file_location(module_name, file)
        if spec is None or spec.loader is None:
            raise ConfigError(f"cannot load the source's module {module_name!r} from {file!r}") from None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    found: Any = module
    for part in name.split("."):
        found = getattr(found, part, None)
    if not isinstance(found, type) or not issubclass(found, Source):
        raise ConfigError(f"{name} in module {module_name!r} is not a txdag.spouts.Source: the module changed since "
                          f"the txid was coordinated; fix it, then replay the txid")
    return found(**ref["params"])


@dataclass(frozen=True)
class JobSpec:
    """Everything the processing job of one TransactionAttempt needs, passed to it as one JSON argument."""

    topology: str
    tx: TransactionAttempt
    metadata: dict[str, Any]
    source: Source
    states: tuple[State, ...]
    redis_conn_id: str = DEFAULT_REDIS_CONN_ID  # where the states, the staging and the rejections live
    key_values: tuple[KeyValue, ...] = ()
    sinks: tuple[Sink, ...] = ()

    def to_json(self) -> str:
        return json.dumps({
            "v": FORMAT_VERSION, "topology": self.topology, "txid": self.tx.txid, "attempt": self.tx.attempt,
            "metadata": self.metadata, "source": self.source.to_dict(),
            "states": [s.to_dict() for s in self.states], "redis_conn_id": self.redis_conn_id,
            "key_values": [k.to_dict() for k in self.key_values], "sinks": [s.to_dict() for s in self.sinks],
        }, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise FormatVersionError(f"the job spec is not JSON ({exc}): pass what JobSpec.to_json wrote") from None
        if not isinstance(data, dict) or data.get("v") != FORMAT_VERSION:
            raise FormatVersionError(
                f"job spec format version {data.get('v') if isinstance(data, dict) else None!r}; this txdag reads "
                f"version {FORMAT_VERSION}: run the job with the txdag version the DAG runs with"
            )
        return cls(
            topology=data["topology"], tx=TransactionAttempt(data["txid"], data["attempt"]),
            metadata=data["metadata"], source=source_from_dict(data["source"]),
            states=tuple(State.from_dict(s) for s in data["states"]), redis_conn_id=data["redis_conn_id"],
            key_values=tuple(KeyValue.from_dict(k) for k in data.get("key_values", ())),
            sinks=tuple(Sink.from_dict(s) for s in data.get("sinks", ())),
        )

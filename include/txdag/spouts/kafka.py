"""Kafka: Storm's opaque partitioned Kafka spout (the default, as ``KafkaTridentSpoutOpaque``) and its partitioned
transactional one (``TransactionalKafkaSpout``, seed 003), over one topic.

Metadata: ``{"v": 1, "topic": name, "topic_id": id, "partitions": {"0": {"from": o, "to": o2}, ...}}``: the batch
is, per partition, the offsets ``from`` (inclusive) to ``to`` (exclusive), stored in ZooKeeper with the txid:
ZooKeeper is the position, never a consumer group. A partition added to the topic joins at the next txid, from its
first offset. Offsets the topic's retention deleted before they were read: the opaque spout records the lost range
as a counted rejection of the batch (``"lost": [first, end]``) and goes on; the transactional one halts, naming the
range. A topic deleted and created again (another topic id) or a partition whose offsets went backwards halts
either kind. A partition whose leader cannot be reached is carried over by the opaque spout (``"unavailable":
true``); the transactional one allocates no txid until it is back.

Where the broker is: the client configuration of a Kafka connection (Airflow's ``kafka`` connection type: its extra
is that configuration, TLS and SASL settings included), named by ``kafka_conn_id``.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from txdag.attempt import TransactionAttempt
from txdag.errors import (
    BatchReadError,
    ConfigError,
    FormatVersionError,
    SourceUnavailable,
    StoreWentBackwards,
    source_went_backwards,
    start_over,
)
from txdag.hints import how_to_start
from txdag.spouts.base import (
    READ_SCHEMA,
    Batch,
    Metadata,
    Record,
    Rejection,
    Source,
    SourceInput,
    SpoutContext,
    SpoutKind,
    TransactionalSpout,
)

FORMAT_VERSION = 1
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # Kafka's own rule (org.apache.kafka.common.internals.Topic)
NOT_TEXT = "value is not valid UTF-8"
# the consumer settings Spark's Kafka source sets itself, and refuses as kafka.* options
CONSUMER_ONLY = frozenset({"group.id", "auto.offset.reset", "enable.auto.commit", "key.deserializer",
                           "value.deserializer", "interceptor.classes"})
TIMEOUT = 10.0  # seconds for one answer of the broker: a broker that is down is reported after it
PartitionMeta = dict[str, Any]
# librdkafka's settings (the Kafka provider's connections) that Spark's Kafka source, a Java client, spells otherwise
LIBRDKAFKA_ONLY = frozenset({"sasl.username", "sasl.password", "sasl.mechanisms", "ssl.ca.location",
                             "ssl.certificate.location", "ssl.key.location", "enable.ssl.certificate.verification"})
JAAS_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


@dataclass(frozen=True)
class KafkaSource(Source):
    """One Kafka topic. ``kind``: "opaque" (default) or "transactional"; at most ``max_per_partition`` records
    of each partition per txid; ``kafka_conn_id``: the connection whose client configuration reaches the broker."""

    topic: str
    kafka_conn_id: str = "kafka_default"
    kind: SpoutKind = SpoutKind.OPAQUE  # a field here: both kinds read Kafka
    max_per_partition: int = 1000

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", SpoutKind(self.kind))
        except ValueError:
            raise ConfigError(f"KafkaSource({self.topic!r}): kind must be 'opaque' or 'transactional', got "
                              f"{self.kind!r}") from None
        if not isinstance(self.topic, str) or not self.topic:
            raise ConfigError(f"KafkaSource needs the name of a topic, got {self.topic!r}")
        if not TOPIC_NAME.fullmatch(self.topic) or self.topic in (".", ".."):
            raise ConfigError(f"KafkaSource({self.topic!r}): Kafka refuses that topic name: at most 249 of the "
                              f"letters a-z A-Z, digits, '.', '_' and '-', and not '.' or '..'")
        if not isinstance(self.kafka_conn_id, str) or not self.kafka_conn_id:
            raise ConfigError(f"KafkaSource({self.topic!r}): kafka_conn_id must be a connection id, got "
                              f"{self.kafka_conn_id!r}")
        size = self.max_per_partition
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"KafkaSource({self.topic!r}): max_per_partition must be an int >= 1, got {size!r}")

    def kafka_conn_ids(self) -> list[str]:
        return [self.kafka_conn_id]

    def inputs(self) -> list[SourceInput]:
        return [SourceInput("kafka", self.kafka_conn_id, self.topic)]

    def build(self, context: SpoutContext) -> KafkaSpout:
        return KafkaSpout(context.kafka(self.kafka_conn_id), self.topic, kind=self.kind,
                          max_per_partition=self.max_per_partition, topology=context.topology,
                          conn_id=self.kafka_conn_id)


def check_metadata(metadata: Any, topic: str) -> dict[str, PartitionMeta]:
    """The ``partitions`` of a Kafka spout's metadata, validated: ``0 <= from <= to`` per partition."""
    def bad(why: str) -> FormatVersionError:
        return FormatVersionError(f"Kafka spout metadata {why}; this txdag reads version {FORMAT_VERSION} only")

    if not isinstance(metadata, dict) or metadata.get("v") != FORMAT_VERSION:
        raise bad(f"has format version {metadata.get('v') if isinstance(metadata, dict) else metadata!r}")
    if metadata.get("topic") != topic:
        raise bad(f"is of topic {metadata.get('topic')!r}, not {topic!r} (was the source's topic changed?)")
    if not isinstance(metadata.get("topic_id", ""), str | None):
        raise bad(f"has topic_id={metadata.get('topic_id')!r}, not a Kafka topic id")
    parts = metadata.get("partitions")
    if not isinstance(parts, dict):
        raise bad(f"has partitions={parts!r}, not a dict")
    for name, part in parts.items():
        ok = isinstance(part, dict) and name.isdigit() and all(
            isinstance(part.get(k), int) and not isinstance(part.get(k), bool) for k in ("from", "to"))
        if not ok or not 0 <= part["from"] <= part["to"]:
            raise bad(f"has {part!r} for partition {name!r}, not {{'from': offset, 'to': offset}} with from <= to")
    return parts


def java_client_config(config: dict[str, Any], where: str) -> dict[str, str]:
    """The Java client's settings (Spark's Kafka source takes them as ``kafka.*`` options) for a librdkafka
    configuration (a Kafka connection's extra, as the Kafka provider's hooks use it). Settings both clients know
    pass as they are; SASL's ``sasl.username``/``sasl.password`` become ``sasl.jaas.config`` (PLAIN, SCRAM);
    ``ssl.ca.location`` becomes a PEM trust store, ``ssl.certificate.location`` with ``ssl.key.location`` (a PKCS#8
    key) a PEM key store. Java's own names given in the extra win. ``where`` names the connection in errors."""
    java = {k: str(v) for k, v in config.items() if k not in CONSUMER_ONLY and k not in LIBRDKAFKA_ONLY}
    if config.get("security.protocol"):
        java["security.protocol"] = str(config["security.protocol"]).upper()
    mechanism = str(config.get("sasl.mechanism") or config.get("sasl.mechanisms") or "").upper()
    if mechanism:
        java["sasl.mechanism"] = mechanism
    if "sasl.username" in config and "sasl.jaas.config" not in config:
        module = JAAS_MODULES.get(mechanism or "PLAIN")
        if module is None:
            raise ConfigError(f"{where}: Spark's Kafka source cannot log in with sasl.mechanism {mechanism} from "
                              "sasl.username/sasl.password: give the extra a sasl.jaas.config for it")
        java["sasl.jaas.config"] = (f'{module} required username="{_jaas_quoted(config["sasl.username"])}" '
                                    f'password="{_jaas_quoted(config.get("sasl.password", ""))}";')
    if str(config.get("enable.ssl.certificate.verification", "true")).lower() == "false":
        raise ConfigError(f"{where}: Spark's Kafka source cannot turn the broker's certificate verification off "
                          "(enable.ssl.certificate.verification false): give the broker's CA in ssl.ca.location")
    if config.get("ssl.endpoint.identification.algorithm") == "none":
        java["ssl.endpoint.identification.algorithm"] = ""
    if config.get("ssl.ca.location") and "ssl.truststore.location" not in config:
        java.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(config["ssl.ca.location"])})
    if config.get("ssl.certificate.location") and "ssl.keystore.location" not in config:
        if not config.get("ssl.key.location"):
            raise ConfigError(f"{where}: ssl.certificate.location without ssl.key.location: give both")
        java.update({"ssl.keystore.type": "PEM",
                     "ssl.keystore.certificate.chain": _read_pem(config["ssl.certificate.location"], where),
                     "ssl.keystore.key": _read_pem(config["ssl.key.location"], where)})
    return java


def _jaas_quoted(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"')


def _read_pem(path: Any, where: str) -> str:
    try:
        with open(str(path), encoding="ascii") as pem:
            return pem.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read {path} ({exc}): give a PEM file that the Spark job can read") \
            from None


def record_id(partition: str, offset: int) -> str:
    return f"{partition}@{offset}"


class KafkaSpout(TransactionalSpout):
    """The runtime of a KafkaSource: watermarks and partitions through one consumer that joins no group."""

    def __init__(self, config: dict[str, Any], topic: str, *, kind: SpoutKind = SpoutKind.OPAQUE,
                 max_per_partition: int = 1000, topology: str = "kafka", conn_id: str = "kafka_default") -> None:
        self.topic, self.kind, self.topology, self.conn_id = topic, SpoutKind(kind), topology, conn_id
        self.max_per_partition = max_per_partition
        self.config = dict(config)
        self.broker = str(self.config.get("bootstrap.servers", "?"))
        self._consumer: Any = None
        self._admin: Any = None
        self._topic_id: str | None = None  # the topic's id as the last listing found it
        self._refused: str | None = None  # the broker's refusal of the connection's credentials, once seen

    # the coordinator side

    def is_ready(self, prev_metadata: Metadata | None) -> bool:
        return any(p["to"] > p["from"] or p.get("lost") for p in self._plan(prev_metadata).values())

    def initialize_transaction(self, txid: int, prev_metadata: Metadata | None) -> Metadata:
        partitions = self._plan(prev_metadata)
        return {"v": FORMAT_VERSION, "topic": self.topic, "topic_id": self._topic_id, "partitions": partitions}

    def lag(self, prev_metadata: Metadata | None) -> int:
        """Records no batch up to ``prev_metadata`` covers, every partition counted; one down raises."""
        total = 0
        for name in self._partitions(prev_metadata):
            low, high = self._watermarks(name)
            total += high - max(low, self._start(prev_metadata, name, low, high))
        return total

    def batch_size(self, metadata: Metadata) -> int:
        parts = check_metadata(metadata, self.topic).values()
        return sum(p["to"] - p["from"] + (p["lost"][1] - p["lost"][0] if p.get("lost") else 0) for p in parts)

    def _plan(self, prev: Metadata | None) -> dict[str, PartitionMeta]:
        """Every partition's next range; an unreachable one is carried over (opaque) or allocates nothing."""
        plan: dict[str, PartitionMeta] = {}
        names = self._partitions(prev)
        down = 0
        for name in names:
            try:
                low, high = self._watermarks(name)
            except SourceUnavailable:
                if self.kind is SpoutKind.TRANSACTIONAL:
                    raise
                down += 1
                start = self._previous_end(prev, name)
                if start is not None:  # carried over; one never read yet joins once it answers, from its start
                    plan[name] = {"from": start, "to": start, "unavailable": True}
                continue
            start = self._start(prev, name, low, high)
            part: PartitionMeta = {"from": max(start, low)}
            part["to"] = min(high, part["from"] + self.max_per_partition)
            if start < low:
                part["lost"] = [start, low]  # deleted by retention before a batch read them
            plan[name] = part
        if names and down == len(names):
            raise SourceUnavailable(f"topology {self.topology!r}: no partition of Kafka topic {self.topic!r} can be "
                                    f"read at {self.broker}; {how_to_start('kafka')}, or check the Kafka connection")
        return plan

    def _start(self, prev: Metadata | None, name: str, low: int, high: int) -> int:
        """Where ``name``'s next batch starts: where the previous one ended; a new partition from its first
        offset. An end beyond the partition's last offset is a topic that went backwards: halt."""
        end = self._previous_end(prev, name)
        if end is None:
            return low
        if end > high:
            raise source_went_backwards(self.topology, f"partition {name} of Kafka topic {self.topic!r} at "
                                        f"{self.broker} ends at offset {high}, but the last emitted batch read it "
                                        f"up to offset {end} (was the topic deleted and created again?)")
        if end < low and self.kind is SpoutKind.TRANSACTIONAL:
            raise StoreWentBackwards(
                f"topology {self.topology!r}: offsets {end} to {low - 1} of partition {name} of Kafka topic "
                f"{self.topic!r} were deleted by the topic's retention before txdag read them, and a transactional "
                f"spout emits no batch without them. txdag halts this topology. Ways out: {start_over(self.topology)} "
                f"(it reads the offsets the topic still holds; the deleted ones are not counted), or use "
                f"kind='opaque', which records a lost range as a rejection of its txid and goes on; and give the topic "
                f"a retention (retention.ms) longer than the topology's lag")
        return end

    def _previous_end(self, prev: Metadata | None, name: str) -> int | None:
        if prev is None:
            return None
        part = check_metadata(prev, self.topic).get(name)
        return None if part is None else int(part["to"])

    def committed(self, txid: int, metadata: Metadata) -> None:
        """Write the committed batch's end offsets to the consumer group ``txdag-<topology>``, so that Kafka's
        tools (kafka-consumer-groups.sh, Burrow) show the topology's lag. txdag never reads them back."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        parts = check_metadata(metadata, self.topic)
        offsets = [TopicPartition(self.topic, int(n), p["to"]) for n, p in parts.items() if not p.get("unavailable")]
        if offsets:  # bounded: a broker that is down must not hold the commit task (a failure is only logged)
            group = ConsumerGroupTopicPartitions(f"txdag-{self.topology}", offsets)
            (done,) = self._admin_client().alter_consumer_group_offsets([group], request_timeout=TIMEOUT).values()
            done.result(timeout=TIMEOUT)

    def _partitions(self, prev: Metadata | None) -> list[str]:
        """The topic's partitions as the broker lists them now (a partition added joins at the next txid)."""
        from confluent_kafka import KafkaError, KafkaException

        try:
            found = self._client().list_topics(self.topic, timeout=TIMEOUT).topics.get(self.topic)
        except KafkaException as exc:
            raise self._unreachable(exc, "listing its partitions") from exc
        error = found.error if found is not None else None
        if found is None or (error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            if prev is not None:
                raise source_went_backwards(self.topology, f"Kafka topic {self.topic!r} at {self.broker} does not "
                                            f"exist, but earlier batches read it (was it deleted?)")
            raise SourceUnavailable(f"topology {self.topology!r}: Kafka topic {self.topic!r} does not exist at "
                                    f"{self.broker}; create it (kafka-topics.sh --create --topic {self.topic})")
        if error is not None:
            raise self._unreachable(KafkaException(error), "listing its partitions")
        self._check_same_topic(prev)
        return [str(p) for p in sorted(found.partitions)]

    def _check_same_topic(self, prev: Metadata | None) -> None:
        """The topic must be the one earlier batches read: a topic deleted and created again under its name has
        another id (Kafka's topic id), and offsets that start over, which the previous ends would skip."""
        from confluent_kafka import KafkaException, TopicCollection

        try:
            (described,) = self._admin_client().describe_topics(TopicCollection([self.topic]),
                                                      request_timeout=TIMEOUT).values()
            self._topic_id = str(described.result(timeout=TIMEOUT).topic_id)
        except (KafkaException, TimeoutError) as exc:  # TimeoutError: no answer at all (down, or refused)
            raise self._unreachable(exc, "describing it") from exc
        was = prev.get("topic_id") if prev is not None else None
        if was is not None and was != self._topic_id:
            raise source_went_backwards(self.topology, f"Kafka topic {self.topic!r} at {self.broker} has the id "
                                        f"{self._topic_id}, but earlier batches read the topic of id {was}: it was "
                                        f"deleted and created again, and its offsets started over")

    def _watermarks(self, name: str) -> tuple[int, int]:
        """(first offset, next offset) of partition ``name``; a leader that is moving (a broker just started, a
        partition just created) is asked again for up to TIMEOUT seconds."""
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        moving = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)  # not flagged retriable
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                low, high = self._client().get_watermark_offsets(TopicPartition(self.topic, int(name)),
                                                                 timeout=TIMEOUT)
                return int(low), int(high)
            except KafkaException as exc:
                error = exc.args[0]
                if not (error.retriable() or error.code() in moving) or time.monotonic() > deadline:
                    raise self._unreachable(exc, f"reading the offsets of partition {name}") from exc
                time.sleep(0.2)

    def _unreachable(self, exc: Exception, doing: str) -> SourceUnavailable | ConfigError:
        """The broker did not answer: down (replayed once it is back), or it refused the connection's credentials
        (librdkafka tells that only to the client's error callback; a refusal is not retried for ever)."""
        for client in (self._consumer, self._admin):
            if client is not None:
                client.poll(0)  # serves the error callback
        if self._refused:
            return self._refusal()
        why = exc.args[0] if exc.args else f"no answer within {TIMEOUT:.0f} s"
        return SourceUnavailable(f"topology {self.topology!r}: Kafka topic {self.topic!r} at {self.broker}: "
                                 f"{doing} failed ({why}); {how_to_start('kafka')}, or check the Kafka connection")

    def _refusal(self) -> ConfigError:
        return ConfigError(f"topology {self.topology!r}: Kafka at {self.broker} refused the credentials of the Kafka "
                           f"connection {self.conn_id!r} ({self._refused}): give its extra the right sasl.username, "
                           f"sasl.password and sasl.mechanism (or TLS settings)")

    def _on_error(self, error: Any) -> None:
        from confluent_kafka import KafkaError

        if error.code() == KafkaError._AUTHENTICATION:
            self._refused = error.str()

    def _client_config(self) -> dict[str, Any]:
        return {"error_cb": self._on_error, **self.config}  # a callback of the connection's own wins

    def _admin_client(self) -> Any:
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient(self._client_config())
        return self._admin

    def _client(self) -> Any:
        """One consumer (librdkafka's, the Kafka provider's client), imported here: defining a KafkaSource needs
        only the core's dependencies."""
        from confluent_kafka import Consumer

        if self._consumer is None:
            self._consumer = Consumer({**self._client_config(), "group.id": f"txdag-{self.topology}",
                                       "enable.auto.commit": False, "auto.offset.reset": "error"})
        return self._consumer

    # the emitter side: a Spark read on the executors (a job), and the same batch in Python (LocalTopology)

    def read(self, spark: Any, tx: TransactionAttempt, metadata: Metadata) -> Any:
        """Spark's Kafka source over exactly the batch's offsets (its jars in the session: ``spark.jars`` or
        ``spark.jars.packages`` org.apache.spark:spark-sql-kafka-0-10_2.13 at Spark's version). A value that is not
        UTF-8 text and a range the retention deleted are rows with a ``rejected`` reason, recorded by the job."""
        parts = check_metadata(metadata, self.topic)
        lost = [(r.id, None, r.partition, r.reason) for r in self._lost(parts)]
        frame = spark.createDataFrame(lost, schema=READ_SCHEMA)
        ranges = {name: p for name, p in parts.items() if p["to"] > p["from"]}
        if not ranges:
            return frame
        java = java_client_config(self.config, f"topology {self.topology!r} {tx}: the extra of Kafka connection "
                                               f"{self.conn_id!r}")
        options = {f"kafka.{k}": v for k, v in java.items()}
        try:
            read = (spark.read.format("kafka").options(**options)
                    .option("assign", json.dumps({self.topic: [int(n) for n in ranges]}))
                    .option("startingOffsets", json.dumps({self.topic: {n: p["from"] for n, p in ranges.items()}}))
                    .option("endingOffsets", json.dumps({self.topic: {n: p["to"] for n, p in ranges.items()}}))
                    .option("failOnDataLoss", "true").load())
        except Exception as exc:
            if "data source: kafka" not in str(exc):
                raise
            raise ConfigError(
                f"topology {self.topology!r} {tx}: the job's Spark has no Kafka source ({str(exc).splitlines()[0]}); "
                f"give the topology spark_conf={{'spark.jars.packages': 'org.apache.spark:spark-sql-kafka-0-10_2.13:"
                f"{spark.version}'}} (or spark.jars: its jars), and start a Spark Connect server with them (--jars "
                f"or --packages)") from None
        self._check_same_topic(metadata)  # on the driver, before any record is read (the plan above is lazy)
        rows = read.selectExpr("concat(CAST(partition AS STRING), '@', CAST(offset AS STRING)) AS id",
                               "coalesce(value, X'') AS raw", "CAST(partition AS STRING) AS partition")
        rows = rows.selectExpr("id", "CASE WHEN is_valid_utf8(raw) THEN CAST(raw AS STRING) END AS value", "partition",
                               f"CASE WHEN is_valid_utf8(raw) THEN NULL ELSE '{NOT_TEXT}' END AS rejected")
        return rows.unionByName(frame)

    def _lost(self, parts: dict[str, PartitionMeta]) -> list[Rejection]:
        return [Rejection(record_id(name, p["lost"][0]), f"offsets {p['lost'][0]} to {p['lost'][1] - 1} of partition "
                          f"{name} of Kafka topic {self.topic!r} were deleted by the topic's retention before they "
                          f"were read", name) for name, p in sorted(parts.items()) if p.get("lost")]

    def emit_batch(self, tx: TransactionAttempt, metadata: Metadata) -> Batch:
        """The records of every partition's ``[from, to)``, read by offset; a value that is not UTF-8 text, a
        range the retention deleted, are rejections."""
        parts = check_metadata(metadata, self.topic)
        self._check_same_topic(metadata)
        records: list[Record] = []
        rejections = self._lost(parts)
        for name, part in sorted(parts.items()):
            if part["to"] > part["from"]:
                for offset, value in self._read(tx, name, part["from"], part["to"]):
                    try:
                        records.append(Record(record_id(name, offset), (value or b"").decode("utf-8"), name))
                    except UnicodeDecodeError:
                        rejections.append(Rejection(record_id(name, offset), NOT_TEXT, name))
        return Batch(tx, records, rejections)

    def _read(self, tx: TransactionAttempt, name: str, start: int, end: int) -> list[tuple[int, bytes | None]]:
        """The records of ``[start, end)``: read until the consumer's position reaches ``end`` (offsets a compacted
        topic dropped, and transaction markers, are skipped as Kafka skips them). Offsets the topic no longer holds
        are a BatchReadError; a broker that does not deliver them in time is SourceUnavailable (replayed)."""
        from confluent_kafka import KafkaError, TopicPartition

        consumer = self._client()
        where = TopicPartition(self.topic, int(name), start)
        consumer.assign([where])
        out: list[tuple[int, bytes | None]] = []
        deadline = time.monotonic() + 6 * TIMEOUT
        try:
            while consumer.position([where])[0].offset < end:
                if time.monotonic() > deadline:
                    held = f"up to offset {out[-1][0]}" if out else "none of them"
                    raise SourceUnavailable(
                        f"topology {self.topology!r} {tx}: partition {name} of Kafka topic {self.topic!r} at "
                        f"{self.broker} delivered {held} of offsets {start} to {end - 1} within {6 * TIMEOUT:.0f} s; "
                        f"{how_to_start('kafka')}, or check the Kafka connection (the txid is replayed)")
                message = consumer.poll(1.0)
                if self._refused:
                    raise self._refusal()
                if message is None:
                    continue
                error = message.error()
                if error is not None and error.code() in (KafkaError._AUTO_OFFSET_RESET,
                                                          KafkaError.OFFSET_OUT_OF_RANGE):
                    self._read_failed(tx, name, start, end, str(error))
                if error is not None:
                    raise SourceUnavailable(f"topology {self.topology!r} {tx}: partition {name} of Kafka topic "
                                            f"{self.topic!r} at {self.broker}: {error}; {how_to_start('kafka')}, "
                                            f"or check the Kafka connection (the txid is replayed)")
                if start <= message.offset() < end:
                    out.append((message.offset(), message.value()))
        finally:
            consumer.unassign()
        return out

    def _read_failed(self, tx: TransactionAttempt, name: str, start: int, end: int, why: str) -> None:
        replay = ("the topology halts at this txid: restore the records, or " + start_over(self.topology)
                  if self.kind is SpoutKind.TRANSACTIONAL else
                  "this attempt fails; its re-emission plans the batch again from the offsets the topic still holds "
                  "(once its commit has begun, the batch is frozen and the topology waits for them)")
        raise BatchReadError(f"topology {self.topology!r} {tx}: partition {name} of Kafka topic {self.topic!r} at "
                             f"{self.broker}: offsets {start} to {end - 1} could not be read ({why}); {replay}")

    def close(self) -> None:
        self._admin = None  # an AdminClient has no close: its threads end with it
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

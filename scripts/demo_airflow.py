"""The README's demo: seed 000's tweets analytics through Airflow, Spark, ZooKeeper and Redis.

    bash scripts/demo.sh           (installs and starts everything, then runs this)
    bash scripts/demo.sh --kafka   the same over the Kafka topic ``tweets`` (DAG tweets_kafka, dags_kafka/)

Loads 500 sample tweets (if the source is empty), keeps two runs of ``tweets_analytics`` in flight until the spout
has nothing left (each run is one txid: coordinate -> Spark -> commit in txid order), prints a line per txid as
it commits, with how long each of its tasks took, then recounts the tweets in the source (Redis, or the topic read
back by offset) and checks the committed counts against that recount, prints the top users and hashtags, and the
URL and login of the Airflow UI.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import requests
from confluent_kafka import KafkaException

from txdag.airflow.api import AirflowAPI, AirflowAPIError, api_from_env, unique_run_id
from txdag.airflow.timings import run_timings
from txdag.analytics.tweets import MARKER_KEY, STATES, tweet_partials
from txdag.cli.common import clients
from txdag.commit.phase import check_store
from txdag.defaults import REDIS_CONN_ID, ZOOKEEPER_CONN_ID
from txdag.errors import TxdagError
from txdag.hints import airflow_url as api_url
from txdag.hints import how_to_start
from txdag.spouts import append_tweets
from txdag.spouts.samples import sample_tweets
from txdag.state import DefaultKeyCodec, JoinedKeyCodec, KeyClashError, KeyCodec
from txdag.state.marker import default_key as default_marker
from txdag.state.marker import read_marker

DAG = "tweets_analytics"
CODECS: dict[str, KeyCodec] = {"users_hashtags": JoinedKeyCodec(":", 2)}  # the key_fields=2 state: "user:hashtag"
RUN_TIMEOUT = 900.0
KAFKA_DAG, TOPIC, PARTITIONS = "tweets_kafka", "tweets", 2  # dags_kafka/tweets_kafka.py
NAMESPACE = {DAG: "", KAFKA_DAG: "kafka:"}  # where each DAG's states are: the Kafka one's under "kafka:"


class Demo:
    """Keeps ``at_once`` runs in flight and reports each txid as it commits."""

    def __init__(self, api: AirflowAPI, store: Any, at_once: int, dag: str = DAG) -> None:
        self.api, self.store, self.at_once, self.dag = api, store, at_once, dag
        self.started = time.monotonic()
        self.reported = store.read_topology()[0].committed_txid  # txids committed before this demo run
        self.first_txid = self.reported + 1
        self.logical_date = datetime.now(UTC) - timedelta(minutes=1)

    def trigger(self) -> str:
        """A run with a logical date later than every earlier one (Clear with *Future* then replays in order)."""
        self.logical_date = max(self.logical_date + timedelta(milliseconds=1),
                                datetime.now(UTC) - timedelta(seconds=30))
        return self.api.trigger(self.dag, logical_date=self.logical_date, run_id=unique_run_id("demo"))

    def drain(self) -> None:
        """Runs until one finds nothing to read; refuses to go on after a failed run (it names the txid)."""
        in_flight: dict[str, float] = {}
        exhausted = False
        while in_flight or not exhausted:
            while not exhausted and len(in_flight) < self.at_once:
                in_flight[self.trigger()] = time.monotonic()
            time.sleep(0.5)
            for run_id, since in list(in_flight.items()):
                state = self.api.run(self.dag, run_id)["state"]
                if state == "failed":
                    self.fail(run_id)
                if state == "success":
                    del in_flight[run_id]
                    exhausted |= self.api.task_instance(self.dag, run_id, "coordinate")["state"] == "skipped"
                elif time.monotonic() - since > RUN_TIMEOUT:
                    raise SystemExit(f"demo: run {run_id} is still {state} after {RUN_TIMEOUT:.0f} s: look at its "
                                     f"tasks in the Airflow UI ({self.api.base_url}) and at `txdag status {self.dag}`")
            self.report()
        self.report()

    def report(self) -> None:
        """A line per newly committed txid whose run finished: its batch and its tasks' durations."""
        committed = self.store.read_topology()[0].committed_txid
        while self.reported < committed:
            found = self.store.read_txid(self.reported + 1)
            if found is None:  # rotated away already (only the last txids keep a record)
                self.reported += 1
                continue
            record, _ = found
            timings = run_timings(self.api, self.dag, {"dag_run_id": record.run_id})
            if timings is None:  # committed in ZooKeeper, the commit task not finished yet: next time
                return
            self.reported += 1
            print(f"demo: txid {record.txid} committed at +{time.monotonic() - self.started:.0f} s: "
                  f"{batch_text(record.metadata)} (attempt {record.attempt}); "
                  f"coordinate {timings['coordinate']:.1f} s, process {timings['process']:.1f} s, "
                  f"commit {timings['commit']:.1f} s", flush=True)

    def fail(self, run_id: str) -> None:
        txid = self.store.txid_of_run(run_id)
        which = f"txid {txid}" if txid is not None else "a run that had no txid yet"
        raise SystemExit(f"demo: run {run_id} ({which}) failed: see its task logs in the Airflow UI "
                         f"({self.api.base_url}) or `txdag show {self.dag} {txid}`; clear the run there to retry it")


def batch_text(metadata: dict[str, Any]) -> str:
    """A txid's batch as the demo prints it: a range of tweet keys, or the offsets of each Kafka partition."""
    if "partitions" in metadata:
        ranges = sorted(metadata["partitions"].items())
        return "offsets " + ", ".join(f"{p}:{r['from']}..{r['to'] - 1}" for p, r in ranges if r["to"] > r["from"])
    first, quantity = metadata["from"], metadata["quantity"]
    return f"tweets {first}..{first + quantity - 1}"


def redis_tweets(client: Any) -> list[str]:
    """The tweets of the Redis source: keys 1..NEXT_WRITE-1."""
    last = int(client.get("NEXT_WRITE") or 1) - 1
    tweets: list[str] = []
    for start in range(1, last + 1, 1000):
        keys = [str(i) for i in range(start, min(start + 1000, last + 1))]
        tweets += [value.decode() for value in client.mget(keys) if value is not None]
    return tweets


def kafka_config() -> dict[str, Any]:
    from txdag.cli.common import kafka_config as config_of

    return config_of("kafka_default")


def watermarks(consumer: Any, partition: int) -> tuple[int, int]:
    """A partition's first and next offsets, asked again while its leader is still being elected (a topic just
    created, a broker just started: Kafka answers NOT_LEADER_FOR_PARTITION for a moment)."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    deadline = time.monotonic() + 30
    while True:
        try:
            return consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=30)
        except KafkaException as exc:
            error = exc.args[0]
            moving = error.code() in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)
            if not (error.retriable() or moving) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def kafka_tweets() -> list[str]:
    """The tweets the topic holds, every partition read back by offset (a consumer of no group)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**kafka_config(), "group.id": "txdag-demo-recount", "enable.auto.commit": False})
    tweets: list[str] = []
    try:
        for partition in range(PARTITIONS):
            low, high = watermarks(consumer, partition)
            consumer.assign([TopicPartition(TOPIC, partition, low)])
            while low < high:
                message = consumer.poll(10)
                if message is None:
                    raise SystemExit(f"demo: the topic {TOPIC!r} did not give back offset {low} of partition "
                                     f"{partition} within 10 s")
                if message.error() is None and message.offset() < high:
                    tweets.append(message.value().decode())
                    low = message.offset() + 1
    finally:
        consumer.close()
    return tweets


def load_kafka(count: int) -> None:
    """The sample tweets into the topic (created with PARTITIONS partitions), when it holds none yet."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(kafka_config())
    if TOPIC not in admin.list_topics(timeout=30).topics:
        (created,) = admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)]).values()
        created.result(timeout=30)
    if kafka_tweets():
        return
    producer = Producer({**kafka_config(), "acks": "all", "enable.idempotence": True})
    for n, tweet in enumerate(sample_tweets(count)):
        producer.produce(TOPIC, tweet.encode(), partition=n % PARTITIONS)
    if producer.flush(60):
        raise SystemExit(f"demo: the broker did not acknowledge every sample tweet sent to {TOPIC!r}")
    print(f"demo: produced {count} sample tweets to the Kafka topic {TOPIC!r} ({PARTITIONS} partitions)")


def check(client: Any, dag: str, tweets: list[str], where: str) -> None:
    """Compare every committed count with a recount of the source: the exactly-once claim, checked."""
    truth = tweet_partials(tweets)
    sizes, refused = [], 0
    for state in STATES:
        codec = CODECS.get(state, DefaultKeyCodec())
        wrong, counted, rejected = compare(codec, client.hgetall(NAMESPACE[dag] + state), truth[state])
        if wrong:
            sample = ", ".join(f"{k}: {wrong[k][0]} stored, {wrong[k][1]} counted" for k in sorted(wrong)[:5])
            raise SystemExit(f"demo: state {state!r} differs from a recount of the {len(tweets)} tweets in {where} in "
                             f"{len(wrong)} keys ({sample}); run `txdag status {dag}` and report this")
        sizes.append(f"{state} {counted} keys")
        refused += rejected
    rejections = f", {refused} keys rejected: a field holds the separator" if refused else ""
    print(f"demo: check: every count equals a recount of the {len(tweets)} tweets in {where} ({', '.join(sizes)}"
          f"{rejections})")


def compare(codec: KeyCodec, stored: Mapping[bytes, bytes], truth: Mapping[tuple, int]
            ) -> tuple[dict[tuple, tuple[int | None, int | None]], int, int]:
    """A state's stored counts against the recount, key tuple by key tuple (each stored field decoded by the
    state's codec, so two keys that would join into one string are told apart): the keys that differ, with
    (stored, counted); how many keys the recount has; how many of them the codec refuses (rejected, never stored)."""
    counted: dict[tuple, int] = {}
    for key, n in truth.items():
        try:
            codec.encode(key)
        except KeyClashError:
            continue
        counted[key] = n
    found = {codec.decode(k.decode()): int(v) for k, v in stored.items()}
    wrong = {k: (found.get(k), counted.get(k)) for k in found.keys() | counted.keys() if found.get(k) != counted.get(k)}
    return wrong, len(counted), len(truth) - len(counted)


def positive(text: str) -> int:
    """A whole number >= 1 (0 runs in flight would wait for ever)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number >= 1, got {text!r}")
    return int(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tweets", type=positive, default=500, help="sample tweets to load when the source is "
                        "empty")
    parser.add_argument("--at-once", type=positive, default=2, help="runs kept in flight (default 2, the DAG's "
                        "max_active_transactions)")
    parser.add_argument("--kafka", action="store_true", help=f"the topology over the Kafka topic {TOPIC!r}")
    args = parser.parse_args()
    dag = KAFKA_DAG if args.kafka else DAG
    try:
        api = api_from_env()
    except RuntimeError as exc:  # no password where the instance's home should be: the message says where
        raise SystemExit(f"demo: {exc}") from None
    api.wait_dag_parsed(dag, timeout=180)
    using = clients()  # for the whole demo: closed when the process ends
    client = using.redis(REDIS_CONN_ID)
    store = using.store(dag, ZOOKEEPER_CONN_ID)
    store.ensure()
    # A Redis that lost the demo's state while ZooKeeper kept its txids (a wipe, a Redis without its data): say so,
    # with the ways out, before loading anything (the coordinate task would halt on it too).
    marker_key = MARKER_KEY if dag == DAG else default_marker(dag)
    check_store(store, client, marker_key, dag)
    if args.kafka:
        load_kafka(args.tweets)
    elif not client.exists("NEXT_WRITE"):
        append_tweets(client, sample_tweets(args.tweets))
        db = client.get_connection_kwargs().get("db", 0)
        print(f"demo: loaded {args.tweets} sample tweets at keys 1..{args.tweets} of Redis database {db}")
    api.unpause(dag)
    demo = Demo(api, store, args.at_once, dag)
    print(f"demo: running {dag}, {args.at_once} txids in flight, committed in txid order", flush=True)
    demo.drain()
    committed = store.read_topology()[0].committed_txid
    if committed < demo.first_txid:
        more = "produce more to the topic" if args.kafka else "add tweets with `txdag seed tweets_analytics`"
        print(f"demo: nothing new to read: every tweet was committed already, up to txid {committed} ({more})")
    else:
        print(f"demo: txids {demo.first_txid}..{committed} committed in {time.monotonic() - demo.started:.0f} s "
              f"({marker_key} = {read_marker(client, marker_key, dag, 'reading the commit marker')})")
    if args.kafka:
        check(client, dag, kafka_tweets(), f"the Kafka topic {TOPIC!r}")
    else:
        check(client, dag, redis_tweets(client), "Redis")
    for state in ("users", "hashtags"):
        top = sorted(((int(v), k.decode()) for k, v in client.hgetall(NAMESPACE[dag] + state).items()),
                     reverse=True)[:5]
        print(f"top {state}: " + ", ".join(f"{name} {count}" for count, name in top))
    print(f"Airflow UI: {api.base_url}  (user {api.username}, password {api.password})")
    if not args.kafka:
        print('more tweets: eval "$(bash scripts/airflow.sh env)"; txdag seed tweets_analytics --count 500')
    return 0


def run() -> int:
    """main(), with a service that is down or goes away mid-demo told in one line, no traceback."""
    try:
        return main()
    except TxdagError as exc:
        raise SystemExit(f"demo: {exc}") from None
    except KafkaException as exc:
        raise SystemExit(f"demo: the Kafka broker at {kafka_config().get('bootstrap.servers')} answered "
                         f"{exc.args[0].str()}; {how_to_start('kafka')}, then rerun the demo") from None
    except AirflowAPIError as exc:
        raise SystemExit(f"demo: Airflow's REST API answered {exc}; see the UI ({api_url()})") from None
    except requests.RequestException as exc:
        raise SystemExit(f"demo: Airflow's REST API at {api_url()} does not answer ({type(exc).__name__}); "
                         f"{how_to_start('airflow')}, then rerun the demo (what it committed stays)") from None


if __name__ == "__main__":
    raise SystemExit(run())

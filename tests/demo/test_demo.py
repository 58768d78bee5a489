"""The README's first command, run as a user runs it: ``bash scripts/demo.sh`` from the checkout, on ports of its
own (its own Redis, ZooKeeper, PostgreSQL, Airflow and Spark Connect server, stopped at the end), then its
output and the state it left in Redis checked against a recount of the tweets it loaded.

This tier runs after the others (scripts/test.sh): the demo starts a whole Airflow of its own.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from support.kafka import group_offsets, read_range, watermarks

from txdag.spouts.samples import sample_tweets

REPO = Path(__file__).resolve().parents[2]
PORTS = {"TXDAG_REDIS_PORT": "6396", "TXDAG_ZK_PORT": "2196", "TXDAG_KAFKA_PORT": "9396",
         "TXDAG_KAFKA_CONTROLLER_PORT": "9397", "TXDAG_KAFKA_SASL_PORT": "9398", "TXDAG_PG_PORT": "5496",
         "TXDAG_AIRFLOW_PORT": "8796", "TXDAG_SPARK_CONNECT_PORT": "15096"}
TWEETS = 500
BATCH = 100  # dags/tweets_analytics.py's max_transaction_size
DEMO_TIMEOUT = 1200


def demo_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "TXDAG_", "SPARK_"))}
    return {**env, **PORTS, "AIRFLOW_HOME": str(REPO / ".run" / "airflow-demo-test")}


def stop_everything(env: dict[str, str]) -> None:
    for script in ("airflow.sh", "spark-connect.sh", "postgres.sh", "services.sh"):
        subprocess.run(["bash", str(REPO / "scripts" / script), "stop"], env=env, cwd=REPO, timeout=180,
                       capture_output=True)


def wipe_services(env: dict[str, str]) -> None:
    """Redis and ZooKeeper on the test's ports keep their data across a stop: an earlier run's tweets, counts and
    txids would make this one find nothing new. Wiped, the demo starts as from a fresh clone."""
    done = subprocess.run(["bash", str(REPO / "scripts" / "services.sh"), "wipe"], env=env, cwd=REPO, timeout=60,
                          capture_output=True, text=True)
    assert done.returncode == 0, f"services.sh wipe: {done.stdout}{done.stderr}"


def run_demo(env: dict[str, str], *args: str) -> str:
    started = time.monotonic()
    done = subprocess.run(["bash", "scripts/demo.sh", *args], env=env, cwd=REPO, timeout=DEMO_TIMEOUT,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(done.stdout)
    print(f"bash scripts/demo.sh {' '.join(args)}: exit {done.returncode} in {time.monotonic() - started:.0f} s")
    assert done.returncode == 0, f"the demo failed (exit {done.returncode}):\n{done.stdout[-4000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def demo() -> Iterator[tuple[dict[str, str], str]]:
    env = demo_env()
    stop_everything(env)  # what an earlier, interrupted run of this test left behind
    wipe_services(env)
    try:
        yield env, run_demo(env)
    finally:
        stop_everything(env)


def admin_client(env: dict[str, str]) -> redis.Redis:
    """The demo's Redis (database 1, the source and the state), as the admin of .run/credentials.env."""
    creds = dict(line.removeprefix("export ").split("=", 1) for line in
                 (REPO / ".run" / "credentials.env").read_text().splitlines() if "=" in line)
    creds = {k: v.strip("'\"") for k, v in creds.items()}
    return redis.Redis(host="127.0.0.1", port=int(env["TXDAG_REDIS_PORT"]), db=1,
                       username=creds["TXDAG_REDIS_ADMIN_USER"], password=creds["TXDAG_REDIS_ADMIN_PASSWORD"])


def recount(tweets: list[str]) -> dict[str, Counter]:
    """Seed 000's counts by key tuple, written here from the seed (not imported from txdag): each user, hashtag and
    (user, hashtag) pair once per tweet that has it, tokens split on single spaces. A pair whose user holds ':' is
    a rejection (it would share its field "user:hashtag" with another pair), never stored."""
    counts: dict[str, Counter] = {"users": Counter(), "hashtags": Counter(), "users_hashtags": Counter()}
    for tweet in tweets:
        words = set(tweet.split(" "))
        users = {w for w in words if w.startswith("@")}
        tags = {w for w in words if w.startswith("#")}
        counts["users"].update((u,) for u in users)
        counts["hashtags"].update((h,) for h in tags)
        counts["users_hashtags"].update((u, h) for u in users for h in tags if ":" not in u)
    return counts


def stored_counts(client: redis.Redis, state: str, namespace: str = "") -> dict[tuple[str, ...], int]:
    """A state's hash by key tuple: "user:hashtag" is cut at its first ':' (the hashtag may hold more)."""
    cut = (lambda f: tuple(f.split(":", 1))) if state == "users_hashtags" else (lambda f: (f,))
    return {cut(k.decode()): int(v) for k, v in client.hgetall(namespace + state).items()}


def test_the_demo_commits_every_tweet_exactly_once(demo: tuple[dict[str, str], str]) -> None:
    env, out = demo
    client = admin_client(env)
    stored_tweets = [v.decode() for v in client.mget([str(i) for i in range(1, TWEETS + 1)])]
    assert stored_tweets == sample_tweets(TWEETS)
    assert client.get("NEXT_WRITE") == str(TWEETS + 1).encode()
    for state, truth in recount(stored_tweets).items():
        assert stored_counts(client, state) == dict(truth), f"state {state} differs from the recount"
    txids = TWEETS // BATCH
    assert client.get("LAST_COMMITED_TRANSACTION") == str(txids).encode()

    # What it printed: a line per txid as it committed, in txid order, with each task's time; its own check.
    committed = re.findall(r"^demo: txid (\d+) committed at \+\d+ s: tweets (\d+)\.\.(\d+) \(attempt 1\); "
                           r"coordinate [\d.]+ s, process [\d.]+ s, commit [\d.]+ s$", out, re.M)
    assert [(int(t), int(a), int(b)) for t, a, b in committed] == [
        (n, (n - 1) * BATCH + 1, n * BATCH) for n in range(1, txids + 1)]
    assert f"demo: check: every count equals a recount of the {TWEETS} tweets in Redis" in out
    top_users = re.search(r"^top users: (.*)$", out, re.M)
    assert top_users is not None
    best = recount(stored_tweets)["users"].most_common(1)[0]
    assert top_users.group(1).startswith(f"{best[0][0]} {best[1]}")
    assert re.search(rf"^Airflow UI: http://127\.0\.0\.1:{env['TXDAG_AIRFLOW_PORT']} ", out, re.M)
    assert re.search(r"^demo: total \d+ s \(Spark mode: connect\)$", out, re.M)


def test_running_the_demo_again_changes_no_count(demo: tuple[dict[str, str], str]) -> None:
    env, _ = demo
    client = admin_client(env)
    before = {state: client.hgetall(state) for state in ("users", "hashtags", "users_hashtags")}
    out = run_demo(env)
    assert "demo: nothing new to read: every tweet was committed already, up to txid 5" in out
    assert "services: Redis     127.0.0.1:6396 already running" in out  # the first run's services, reused
    assert "airflow: already running" in out
    assert {state: client.hgetall(state) for state in before} == before
    assert client.get("LAST_COMMITED_TRANSACTION") == b"5"


def test_the_kafka_demo_counts_the_topic_exactly_once(demo: tuple[dict[str, str], str]) -> None:
    """`bash scripts/demo.sh --kafka`: the sample tweets produced to the topic `tweets`, counted through Airflow
    (Airflow restarted with dags_kafka/), checked against the topic read back here by offset."""
    env, _ = demo
    out = run_demo(env, "--kafka")
    bootstrap = f"127.0.0.1:{env['TXDAG_KAFKA_PORT']}"
    tweets = [value for p in (0, 1) for _, value in read_range(bootstrap, "tweets", p, 0, watermarks(bootstrap,
                                                                                                     "tweets", p)[1])]
    assert sorted(tweets) == sorted(sample_tweets(TWEETS))
    client = admin_client(env)
    for state, truth in recount(tweets).items():
        assert stored_counts(client, state, "kafka:") == dict(truth), f"state kafka:{state} differs from the recount"
    per = BATCH // 2  # dags_kafka/tweets_kafka.py: 50 a partition a txid, 2 partitions
    committed = re.findall(r"^demo: txid (\d+) committed at \+\d+ s: offsets 0:(\d+)\.\.(\d+), 1:(\d+)\.\.(\d+) "
                           r"\(attempt 1\); coordinate [\d.]+ s, process [\d.]+ s, commit [\d.]+ s$", out, re.M)
    assert [tuple(map(int, c)) for c in committed] == [
        (n, (n - 1) * per, n * per - 1, (n - 1) * per, n * per - 1) for n in range(1, TWEETS // BATCH + 1)]
    assert f"demo: check: every count equals a recount of the {TWEETS} tweets in the Kafka topic 'tweets'" in out
    assert group_offsets(bootstrap, "txdag-tweets_kafka", "tweets", 2) == [TWEETS // 2] * 2
    assert re.search(r"^demo: total \d+ s \(Spark mode: connect, source: the Kafka topic tweets\)$", out, re.M)

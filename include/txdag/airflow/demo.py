"""The README's demo: seed 000's tweets analytics through Airflow, Spark, ZooKeeper and Redis.

    bash scripts/demo.sh      (installs and starts everything, then runs this)

Loads 500 sample tweets (if the source is empty), triggers runs of ``tweets_analytics`` two at a time until the
spout has nothing left (each run is one txid: coordinate -> Spark -> commit in txid order), then prints the top
users and hashtags from Redis, and the URL and login of the Airflow UI where the runs are.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta

from txdag.airflow.api import AirflowAPI, api_from_env, unique_run_id
from txdag.cli import _redis, _store

DAG = "tweets_analytics"


def drain(api: AirflowAPI, at_once: int = 2) -> list[str]:
    """Trigger runs ``at_once`` at a time (logical dates just past, growing) until one finds nothing to read."""
    runs: list[str] = []
    while True:
        base = datetime.now(UTC) - timedelta(seconds=30)
        batch = [api.trigger(DAG, logical_date=base + timedelta(milliseconds=i), run_id=unique_run_id("demo"))
                 for i in range(at_once)]
        states = [api.wait_run(DAG, run, timeout=900) for run in batch]
        runs += batch
        coordinate = [api.task_instance(DAG, run, "coordinate")["state"] for run in batch]
        print(f"demo: runs {', '.join(batch)}: {', '.join(states)} (coordinate: {', '.join(coordinate)})")
        if "failed" in states:
            raise SystemExit(f"demo: a run failed; see its task logs in the Airflow UI ({api.base_url})")
        if "skipped" in coordinate:
            return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tweets", type=int, default=500, help="sample tweets to load when the source is empty")
    args = parser.parse_args()
    api = api_from_env()
    api.wait_dag_parsed(DAG, timeout=180)
    client = _redis("redis_default")
    if not client.exists("NEXT_WRITE"):
        from txdag.sample import sample_tweets
        from txdag.spouts import append_tweets

        append_tweets(client, sample_tweets(args.tweets))
        db = client.get_connection_kwargs().get("db", 0)
        print(f"demo: loaded {args.tweets} sample tweets at keys 1..{args.tweets} of Redis database {db}")
    api.unpause(DAG)
    started = time.monotonic()
    drain(api)
    store = _store(DAG, "zookeeper_default")
    topo, _ = store.read_topology()
    print(f"demo: committed up to txid {topo.committed_txid} in {time.monotonic() - started:.0f} s "
          f"(LAST_COMMITED_TRANSACTION = {client.get('LAST_COMMITED_TRANSACTION').decode()})")
    for state in ("users", "hashtags"):
        top = sorted(((int(v), k.decode()) for k, v in client.hgetall(state).items()), reverse=True)[:5]
        print(f"top {state}: " + ", ".join(f"{name} {count}" for count, name in top))
    print(f"Airflow UI: {api.base_url}  (user {api.username}, password {api.password})")
    print('more tweets: eval "$(bash scripts/airflow.sh env)"; txdag seed tweets_analytics --count 500')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

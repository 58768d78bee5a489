"""Commit rate of a state kept in PostgreSQL (PostgresStore) beside the same state in Redis, at several batch sizes.

    .venv/bin/python bench/store_commit.py [--sizes 10000,100000,300000] [--repeat 3]
        [--redis-url redis://127.0.0.1:6391/0] [--postgres-url postgres://...]

For each size and kind (transactional, opaque), keys/s of txid 4's numeric partials committed over keys that txids
1 to 3 wrote (a topology's steady state: every key an update, onto pages that hold earlier versions; txids 1-3 are
applied first, not timed), the partials staged in a Redis hash beforehand as the process task's executors leave them
(not timed):
- Redis: ``apply_staged`` (the commit's server-side script), the baseline;
- PostgreSQL, in SQL: the staged hash read, then ``PostgresBackingMap.add_sums`` (one JSON document of partials
  into one ``INSERT ... ON CONFLICT`` for the state) inside the txid's transaction, committed with
  ``txdag_commits``, as the commit task runs it;
- PostgreSQL, through the map state: the same, by ``multi_update`` (a read and a write statement per 5,000 keys),
  the path a store without ``add_sums`` takes;
- PostgreSQL's own upsert, the best a user could write by hand: the rows COPY'd into a temporary table, then one
  ``INSERT ... SELECT ... ON CONFLICT DO UPDATE SET v = v + EXCLUDED.v`` into a plain table of (text, bigint), no
  txid, no jsonb: what the database does without txdag (issue 33 item 7's baseline), with default storage ("raw")
  and with the fillfactor txdag gives its tables ("raw ff").
Ratios are against Redis and against both plain upserts. The PostgreSQL URL defaults to the set-up's server
(``bash scripts/postgres.sh start`` and ``ensure-db txdag_bench``). A figure, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import subprocess
import time
import uuid
from operator import add
from pathlib import Path

import psycopg
import redis
from commit_throughput import STAGE_CHUNK

from txdag.airflow.stores import PostgresStore
from txdag.staging.format import decode_number
from txdag.state import NonTransactionalMap, OpaqueMap, StagedPartials, StateKind, TransactionalMap, apply_staged
from txdag.state.base import shared_transactions
from txdag.state.combine_apply import apply_combined
from txdag.state.keys import DEFAULT_KEY_CODEC
from txdag.state.postgres import FILLFACTOR
from txdag.state.values import committed_value

ROOT = Path(__file__).resolve().parents[1]
TIMED = 4  # the txid timed, after the ones before it
MAPS = {"transactional": TransactionalMap, "opaque": OpaqueMap, "non_transactional": NonTransactionalMap}


def stage(client: redis.Redis, keys: int) -> tuple[str, dict[str, int]]:
    """One-string keys, staged in their fields as a job stages them (DEFAULT_KEY_CODEC: ``user7``, as is)."""
    deltas = {DEFAULT_KEY_CODEC.encode((f"user{i}",)): (i % 7) + 1 for i in range(keys)}
    key = f"bench:{uuid.uuid4().hex[:8]}:staged"
    items = list(deltas.items())
    for first in range(0, keys, STAGE_CHUNK):
        client.hset(key, mapping=dict(items[first:first + STAGE_CHUNK]))
    return key, deltas


def timed(keys: int, run) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    run()
    return keys / (time.perf_counter() - start)


def redis_rate(client: redis.Redis, kind: str, keys: int) -> float:
    key, _ = stage(client, keys)
    ns = f"bench:{uuid.uuid4().hex[:8]}"
    for txid in range(1, TIMED):
        apply_staged(client, txid, [StagedPartials(ns, StateKind(kind), key)])
    results = []
    rate = timed(keys, lambda: results.append(apply_staged(client, TIMED, [StagedPartials(ns, StateKind(kind),
                                                                                           key)])))
    if results[0].applied != keys:
        raise RuntimeError(f"Redis applied {results[0].applied} of {keys} keys")
    client.delete(key, ns, *(f"{{{ns}}}:{suffix}" for suffix in ("txid", "prev", "meta")))
    return rate


def postgres_rate(client: redis.Redis, url: str, kind: str, keys: int, in_sql: bool) -> float:
    key, _ = stage(client, keys)
    topology = f"bench_{uuid.uuid4().hex[:8]}"
    backing = PostgresStore(schema="txdag_bench").open(topology, "words", 1, lambda: psycopg.connect(url))
    state = MAPS[kind](backing)

    def commit(txid: int) -> None:
        partials = {f.decode(): decode_number(v) for f, v in client.hscan_iter(key, count=5000)}
        with shared_transactions([backing], txid, resumed=False):
            if in_sql:
                state.begin_commit(txid)
                written = backing.add_sums(txid, kind, [(state.key_codec.decode(f), v) for f, v in partials.items()])
                state.commit(txid)
            else:
                written = len(apply_combined(state, txid, partials, add))
        if written != keys:
            raise RuntimeError(f"{written} of {keys} keys written")

    for txid in range(1, TIMED):
        commit(txid)
    rate = timed(keys, lambda: commit(TIMED))
    last = keys - 1
    found = [committed_value(v) for v in backing.multi_get([("user0",), (f"user{last}",)])]
    if found != [TIMED * 1, TIMED * ((last % 7) + 1)]:
        raise RuntimeError(f"{'in SQL' if in_sql else 'through the map state'}: user0 and user{last} hold {found}")
    client.delete(key)
    backing.session.close()
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(f'DROP TABLE txdag_bench."{topology}__words"')
        db.execute("DELETE FROM txdag_bench.txdag_commits WHERE topology = %s", (topology,))
    return rate


def plain_upsert_rate(url: str, keys: int, fillfactor: int = 100) -> float:
    """The rows in hand, COPY'd into a temporary table from one buffer, then one ``INSERT ... SELECT ... ON CONFLICT
    DO UPDATE`` into a plain table of (text, bigint), committed: all of it timed."""
    rows = "".join(f"user{i}\t{(i % 7) + 1}\n" for i in range(keys)).encode()
    table = f"txdag_bench.plain_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url) as db:
        db.execute("CREATE SCHEMA IF NOT EXISTS txdag_bench")
        db.execute(f"CREATE TABLE {table} (k text PRIMARY KEY, v bigint NOT NULL) WITH (fillfactor = {fillfactor})")
        db.execute("CREATE TEMP TABLE deltas (k text, v bigint) ON COMMIT DELETE ROWS")
        db.commit()

        def run() -> None:
            with db.cursor().copy("COPY deltas (k, v) FROM STDIN") as copy:
                copy.write(rows)
            db.execute(f"INSERT INTO {table} AS t SELECT * FROM deltas ON CONFLICT (k) DO UPDATE SET v = t.v + "
                       f"EXCLUDED.v")
            db.commit()

        for _ in range(1, TIMED):  # the keys exist: the timed run updates each, as the txdag rows do
            run()
        rate = timed(keys, run)
        db.execute(f"DROP TABLE {table}")
        db.commit()
    return rate


def default_postgres_url() -> str:
    def script(*args: str) -> str:
        return subprocess.run(["bash", str(ROOT / "scripts/postgres.sh"), *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    script("start")
    script("ensure-db", "txdag_bench")
    return script("url", "txdag_bench").replace("postgresql+psycopg2://", "postgresql://", 1)


def sizes(text: str) -> list[int]:
    return [int(size) for size in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=sizes, default=[10_000, 100_000, 300_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6391/0")
    parser.add_argument("--postgres-url", default=None)
    args = parser.parse_args()
    client = redis.Redis.from_url(args.redis_url)
    client.ping()
    url = args.postgres_url or default_postgres_url()
    with psycopg.connect(url) as db:
        version = db.execute("SHOW server_version").fetchone()[0]
    print(f"best of {args.repeat}; Redis {client.info()['redis_version']}, PostgreSQL {version}; keys/s")
    print(f"{'keys':>8} {'kind':14} {'redis':>9} {'pg sql':>9} {'pg map':>9} {'pg raw':>9} {'raw ff':>9} "
          f"{'sql/redis':>9} {'sql/map':>8} {'sql/raw':>8} {'sql/ff':>7}")
    for keys in args.sizes:
        raw = max(plain_upsert_rate(url, keys) for _ in range(args.repeat))
        raw_ff = max(plain_upsert_rate(url, keys, FILLFACTOR) for _ in range(args.repeat))
        for kind in ("transactional", "opaque"):
            r = max(redis_rate(client, kind, keys) for _ in range(args.repeat))
            sql = max(postgres_rate(client, url, kind, keys, True) for _ in range(args.repeat))
            via_map = max(postgres_rate(client, url, kind, keys, False) for _ in range(args.repeat))
            print(f"{keys:>8} {kind:14} {r:9,.0f} {sql:9,.0f} {via_map:9,.0f} {raw:9,.0f} {raw_ff:9,.0f} "
                  f"{sql / r:9.2f} {sql / via_map:8.2f} {sql / raw:8.2f} {sql / raw_ff:7.2f}")


if __name__ == "__main__":
    main()

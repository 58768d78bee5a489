"""Commit throughput of the server-side apply script for 100k distinct keys, beside redis-benchmark.

    .venv/bin/python bench/commit_throughput.py [--keys 100000] [--repeat 3] [--redis-url redis://127.0.0.1:6391/0]

Prints keys/s for the txdag commit as a topology's commit task runs it (transactional and opaque, a first commit and
a replay): the partials staged in a hash beforehand, as the process task's executors leave them, then applied
inside Redis by ``apply_staged`` (timed). Beside it the library's ``apply_encoded`` (the partials sent by the
client), a plain pipelined HINCRBY from Python (no txid check), and `redis-benchmark -t hset -P 16` against the same
server in the same run, and the ratios. A figure, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import redis

from txdag.state import EncodedPartials, StagedPartials, StateKind, apply_encoded, apply_staged

STAGE_CHUNK = 5000  # fields per HSET, as the executors stage them (txdag.spark.stage)


def best_rate(n: int, repeat: int, run) -> float:  # type: ignore[no-untyped-def]
    rates = []
    for i in range(repeat):
        start = time.perf_counter()
        run(i)
        rates.append(n / (time.perf_counter() - start))
    return max(rates)


def staged_commit(client: redis.Redis, kind: StateKind, keys: int, repeat: int, replay: bool) -> float:
    """keys/s of apply_staged over ``keys`` staged fields (the staging written first, not timed); ``replay``: the
    same txid applied a second time (every key skipped, or recomputed from prev for opaque), timed."""
    deltas = [(f"user{i}", (i % 7) + 1) for i in range(keys)]
    rates = []
    for _ in range(repeat):
        ns = f"bench:{uuid.uuid4().hex[:8]}"
        stage = f"{{{ns}}}:staged"
        for first in range(0, keys, STAGE_CHUNK):
            client.hset(stage, mapping=dict(deltas[first:first + STAGE_CHUNK]))
        partials = [StagedPartials(ns, kind, stage)]
        if replay:
            apply_staged(client, 1, partials)
        start = time.perf_counter()
        result = apply_staged(client, 1, partials)
        rates.append(keys / (time.perf_counter() - start))
        expected = (0, keys) if replay and kind is StateKind.TRANSACTIONAL else (keys, 0)
        if (result.applied, result.skipped) != expected:
            raise RuntimeError(f"apply_staged applied {result.applied} and skipped {result.skipped} of {keys} keys, "
                               f"expected {expected}")
        cleanup(client, [ns])
        client.delete(stage)
    return max(rates)


def txdag_commit(client: redis.Redis, kind: StateKind, keys: int, repeat: int, replay: bool) -> float:
    deltas = {f"user{i}": (i % 7) + 1 for i in range(keys)}
    namespaces = []

    def run(i: int) -> None:
        ns = f"bench:{uuid.uuid4().hex[:8]}"
        namespaces.append(ns)
        if replay:  # the measured call re-applies a txid that is already in
            apply_encoded(client, 1, [EncodedPartials(ns, kind, deltas)])
        apply_encoded(client, 1, [EncodedPartials(ns, kind, deltas)])

    if replay:
        rate = replay_rate(client, kind, deltas, repeat)
    else:
        rate = best_rate(keys, repeat, run)
    cleanup(client, namespaces)
    return rate


def replay_rate(client: redis.Redis, kind: StateKind, deltas: dict[str, int], repeat: int) -> float:
    ns = f"bench:{uuid.uuid4().hex[:8]}"
    apply_encoded(client, 1, [EncodedPartials(ns, kind, deltas)])
    rate = best_rate(len(deltas), repeat, lambda i: apply_encoded(client, 1, [EncodedPartials(ns, kind, deltas)]))
    cleanup(client, [ns])
    return rate


def pipelined_hincrby(client: redis.Redis, keys: int, repeat: int) -> float:
    key = f"bench:{uuid.uuid4().hex[:8]}"

    def run(i: int) -> None:
        pipe = client.pipeline(transaction=False)
        for n in range(keys):
            pipe.hincrby(key, f"user{n}", 1)
            if n % 5000 == 4999:
                pipe.execute()
        pipe.execute()

    rate = best_rate(keys, repeat, run)
    client.delete(key)
    return rate


def redis_benchmark(client: redis.Redis, keys: int) -> tuple[float, float]:
    """requests/s of redis-benchmark HSET with 16 commands per pipeline, and the same for HINCRBY."""
    exe = shutil.which("redis-benchmark")
    if exe is None:
        sys.exit("redis-benchmark not found: install Debian's redis-tools (bash scripts/setup.sh does)")
    kw = client.connection_pool.connection_kwargs
    base = [exe, "-h", str(kw["host"]), "-p", str(kw["port"]), "--dbnum", str(kw.get("db", 0)),
            "-n", str(keys), "-r", str(keys), "-P", "16", "-q", "--csv"]
    with _benchmark_login(client) as login:
        hset = subprocess.run([*base, *login, "-t", "hset"], capture_output=True, text=True, check=True).stdout
        hincr = subprocess.run([*base, *login, "hincrby", "bench:rb", "user:__rand_int__", "1"],
                               capture_output=True, text=True, check=True).stdout
    client.delete("myhash", "bench:rb")
    return _csv_rps(hset), _csv_rps(hincr)


@contextlib.contextmanager
def _benchmark_login(client: redis.Redis) -> Iterator[list[str]]:
    """redis-benchmark takes its password on the command line only (``-a``), where ``ps`` shows it: with access
    control on, it logs in as a throwaway user that may only touch its two hashes, deleted afterwards."""
    if not client.connection_pool.connection_kwargs.get("password"):
        yield []
        return
    user, password = f"bench-rb-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    client.execute_command("ACL", "SETUSER", user, "on", f">{password}", "resetkeys", "~myhash", "~bench:rb",
                           "-@all", "+hset", "+hincrby", "+ping", "+select")
    try:
        yield ["--user", user, "-a", password]
    finally:
        client.execute_command("ACL", "DELUSER", user)


def _csv_rps(csv: str) -> float:
    line = [row for row in csv.splitlines() if row and not row.startswith('"test"')][-1]
    return float(line.split(",")[1].strip('"'))


def cleanup(client: redis.Redis, namespaces: list[str]) -> None:
    for ns in namespaces:
        client.delete(ns, *(f"{{{ns}}}:{suffix}" for suffix in ("txid", "prev", "meta")))


def measure(client: redis.Redis, keys: int, repeat: int) -> list[tuple[str, float]]:
    """keys/s of each path, best of ``repeat``; the last two rows are redis-benchmark's HSET and HINCRBY."""
    rb_hset, rb_hincrby = redis_benchmark(client, keys)
    return [
        ("txdag commit, transactional, new txid", staged_commit(client, StateKind.TRANSACTIONAL, keys, repeat, False)),
        ("txdag commit, transactional, replay", staged_commit(client, StateKind.TRANSACTIONAL, keys, repeat, True)),
        ("txdag commit, opaque, new txid", staged_commit(client, StateKind.OPAQUE, keys, repeat, False)),
        ("apply_encoded (sent by the client), transactional",
         txdag_commit(client, StateKind.TRANSACTIONAL, keys, repeat, False)),
        ("Python pipelined HINCRBY, no txid", pipelined_hincrby(client, keys, repeat)),
        ("redis-benchmark -t hset -P 16", rb_hset),
        ("redis-benchmark hincrby -P 16", rb_hincrby),
    ]


def where(client: redis.Redis) -> str:
    """host:port/db of the client, never its password."""
    kw = client.connection_pool.connection_kwargs
    return f"{kw['host']}:{kw['port']}/{kw.get('db', 0)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6391/0")
    args = parser.parse_args()
    client = redis.Redis.from_url(args.redis_url)
    client.ping()
    rows = measure(client, args.keys, args.repeat)
    rb_hset = rows[-2][1]
    print(
        f"{args.keys} distinct keys, best of {args.repeat}, Redis {client.info()['redis_version']} at {where(client)}"
    )
    print(f"{'path':50} {'keys/s':>12} {'vs redis-benchmark hset':>24}")
    for name, rate in rows:
        print(f"{name:50} {rate:12,.0f} {rate / rb_hset:23.2f}x")
    print(f"median of the txdag rows: {statistics.median(r for _, r in rows[:3]):,.0f} keys/s")


if __name__ == "__main__":
    main()

"""PostgreSQL as a state store (issue 33 item 2): txdag.airflow.stores.PostgresStore through the Postgres provider's
connection, on the set-up's PostgreSQL. The three map-state kinds through LocalTopology's commit: a txid's states
and the txid the database holds are one SQL transaction, so a commit that dies inside it leaves none of the txid
(a reader sees the txid before), a commit that dies after it is not applied twice (a non-transactional state stays
exact), and a reader polling during a large commit never sees part of a txid. Tables that are not txdag's, or
newer, are refused by name; a PostgreSQL that does not answer is named.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from access import ZK_AUTH
from support.postgres import DATABASE, close_sessions, postgres_url, superuser_psql, use_connection

from txdag.airflow.stores import PostgresStore
from txdag.attempt import TransactionAttempt
from txdag.commit import phase
from txdag.errors import ConfigError, FormatVersionError, ServiceUnavailable, StoreWentBackwards
from txdag.local import LocalTopology
from txdag.protocol import Committed
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.state import NonTransactionalMap, OpaqueMap, OpaqueValue, TransactionalMap, TransactionalValue
from txdag.state.base import combine_sum, shared_transactions
from txdag.state.postgres import PostgresBackingMap, PostgresSession
from txdag.topology.definition import State
from txdag.txid.coordinator import Coordinator, Emission
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore

SENTENCES = ["the cat sat", "on the mat", "the dog", "a cat and a dog", "the end", "cat dog cat", "mat", "one more"]
TRUTH = dict(Counter(w for s in SENTENCES for w in s.split()))


def word_count(records):
    words = Counter((w,) for r in records for w in r.value.split())
    return {"t": words, "o": words, "n": words}


@pytest.fixture
def reader(postgres_conn):
    """A connection of its own, as a user's dashboard reads the tables (autocommit: each query sees what is
    committed when it runs)."""
    with psycopg.connect(postgres_url(), autocommit=True) as db:
        yield db


@pytest.fixture
def schema(reader, prefix):
    yield prefix
    close_sessions()
    reader.execute(f'DROP SCHEMA IF EXISTS "{prefix}" CASCADE')


def counts(reader, schema: str, table: str) -> dict[str, int]:
    rows = reader.execute(f"SELECT k1 #>> '{{}}', value FROM \"{schema}\".\"{table}\"").fetchall()
    return {word: int(value) for word, value in rows}


def held(reader, schema: str, topology: str) -> int | None:
    row = reader.execute(f'SELECT txid FROM "{schema}".txdag_commits WHERE topology = %s', (topology,)).fetchone()
    return None if row is None else row[0]


@pytest.fixture
def topology(redis_client, zk_hosts, zk_root, prefix, postgres_conn, schema):
    append_tweets(redis_client, SENTENCES, prefix=f"{prefix}:")
    return build(redis_client, zk_hosts, zk_root, prefix, postgres_conn)


def build(redis_client, zk_hosts: str, zk_root: str, prefix: str, conn_id: str) -> LocalTopology:
    """The word count of SENTENCES, 3 tweets per txid, into three states of one PostgreSQL schema (``prefix``)."""
    spout = TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=3, topology=prefix)
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root), spout)
    store = PostgresStore(conn_id, schema=prefix)
    states = [State("t", store=store), State("o", kind="opaque", store=store),
              State("n", kind="non_transactional", store=store)]
    return LocalTopology(coordinator, redis_client, {s.name: s.build(redis_client, prefix) for s in states},
                         word_count)


KILLED = """
import sys
import redis
from test_postgres_store import build

topology = build(redis.Redis.from_url(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
for run in ("r1", "r2"):  # txid 2's commit is killed after its first state's writes (fault point 'applying')
    emission = topology.coordinate(run)
    topology.process(emission)
    topology.commit(emission.tx)
"""


def run_all(topology) -> None:
    coordinator = topology.coordinator
    while isinstance(emission := topology.coordinate(f"run{coordinator.status().topology.last_txid}"), Emission):
        topology.process(emission)
        assert isinstance(topology.commit(emission.tx), Committed)


def test_a_commit_that_dies_inside_the_transaction_leaves_none_of_the_txid(topology, reader, schema, prefix,
                                                                          monkeypatch):
    tables = {name: f"{prefix}__{name}" for name in "ton"}
    one = topology.coordinate("r1")
    topology.process(one)
    assert isinstance(topology.commit(one.tx), Committed)
    after_one = {name: counts(reader, schema, table) for name, table in tables.items()}
    assert held(reader, schema, prefix) == 1 and after_one["t"] and after_one["t"] == after_one["n"]

    backing = type(topology.states["o"].backing)
    add, seen = backing.add_sums, []

    def dies_inside_o(self, txid, kind, partials):  # 't' is written inside the txid's transaction, 'o' is being written
        written = add(self, txid, kind, partials)
        if self.name == tables["o"]:
            seen.append({name: counts(reader, schema, table) for name, table in tables.items()})
            raise ConnectionError("the store went away half way through the txid")
        return written

    monkeypatch.setattr(backing, "add_sums", dies_inside_o)
    two = topology.coordinate("r2")
    topology.process(two)
    with pytest.raises(ConnectionError, match="half way"):
        topology.commit(two.tx)
    monkeypatch.undo()
    assert seen == [after_one], "a reader saw part of txid 2 while it was being written"
    assert {name: counts(reader, schema, table) for name, table in tables.items()} == after_one
    assert held(reader, schema, prefix) == 1

    replay = topology.coordinate("r2")
    assert replay.tx.txid == 2 and replay.tx.attempt == 2
    topology.process(replay)
    assert isinstance(topology.commit(replay.tx), Committed)
    run_all(topology)
    assert {name: counts(reader, schema, table) for name, table in tables.items()} == {"t": TRUTH, "o": TRUTH,
                                                                                       "n": TRUTH}
    assert held(reader, schema, prefix) == topology.coordinator.status().topology.committed_txid == 3
    kinds = {name: {k for (k,) in reader.execute(f'SELECT DISTINCT kind FROM "{schema}"."{table}"')}
             for name, table in tables.items()}
    assert kinds == {"t": {"transactional"}, "o": {"opaque"}, "n": {"plain"}}


def test_a_commit_killed_inside_the_transaction_leaves_none_of_the_txid(redis_client, redis_url, zk_hosts, zk_root,
                                                                        prefix, postgres_conn, schema, reader,
                                                                        tmp_path):
    append_tweets(redis_client, SENTENCES, prefix=f"{prefix}:")
    (tmp_path / "killed.py").write_text(KILLED)
    tests = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TXDAG_FAULTS": f"applying:{prefix}:2", "TXDAG_FAULTS_ALLOWED": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), str(tests)])}
    done = subprocess.run([sys.executable, str(tmp_path / "killed.py"), redis_url, zk_hosts, zk_root, prefix,
                           postgres_conn], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    first = dict(Counter(w for s in SENTENCES[:3] for w in s.split()))
    tables = {name: f"{prefix}__{name}" for name in "ton"}
    assert {name: counts(reader, schema, table) for name, table in tables.items()} == {"t": first, "o": first,
                                                                                       "n": first}
    assert held(reader, schema, prefix) == 1
    topology = build(redis_client, zk_hosts, zk_root, prefix, postgres_conn)  # the commit task's retry
    assert isinstance(topology.commit(TransactionAttempt(2, 1)), Committed)
    run_all(topology)
    assert {name: counts(reader, schema, table) for name, table in tables.items()} == {"t": TRUTH, "o": TRUTH,
                                                                                       "n": TRUTH}


def test_a_commit_that_dies_after_the_database_committed_is_not_applied_twice(topology, reader, schema, prefix,
                                                                             monkeypatch):
    write_marker, died = phase.write_marker, []

    def dies_before_the_marker(*args, **kwargs):  # the database holds txid 1; Redis and ZooKeeper do not know
        if not died:
            died.append(held(reader, schema, prefix))
            raise ConnectionError("Redis went away before the marker")
        return write_marker(*args, **kwargs)

    monkeypatch.setattr(phase, "write_marker", dies_before_the_marker)
    one = topology.coordinate("r1")
    topology.process(one)
    with pytest.raises(ConnectionError, match="before the marker"):
        topology.commit(one.tx)
    assert died == [1]
    first = counts(reader, schema, f"{prefix}__n")
    assert isinstance(topology.commit(one.tx), Committed)  # the retry: the database's writes are dropped
    assert counts(reader, schema, f"{prefix}__n") == first, "the non-transactional state counted txid 1 twice"
    run_all(topology)
    assert counts(reader, schema, f"{prefix}__n") == counts(reader, schema, f"{prefix}__t") == TRUTH


def test_a_reader_polling_during_a_large_commit_never_sees_part_of_a_txid(postgres_conn, schema, reader, prefix):
    keys = [(f"k{i}",) for i in range(30_000)]
    store = PostgresStore(postgres_conn, schema=schema)
    backings = [store.backing_map(prefix, name, 1) for name in ("big", "other")]
    states = [TransactionalMap(backing) for backing in backings]
    tables = [f'"{schema}"."{prefix}__{name}"' for name in ("big", "other")]
    stop, seen, mixed = threading.Event(), [], []
    # one statement: two states and the txid the database holds, as a dashboard's query reads them
    query = ", ".join(f"(SELECT array[min(value::int), max(value::int), count(*)::int] FROM {t})" for t in tables)
    query = f'SELECT {query}, (SELECT txid FROM "{schema}".txdag_commits WHERE topology = %s)'

    def poll() -> None:
        with psycopg.connect(postgres_url(), autocommit=True) as db:
            while not stop.is_set():
                big, other, txid = db.execute(query, (prefix,)).fetchone()
                seen.append((tuple(big), tuple(other), txid))
                if seen[-1] != ((None, None, 0), (None, None, 0), None) and not (
                        big == other == [txid, txid, len(keys)]):
                    mixed.append(seen[-1])

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        for txid in (1, 2, 3):
            with shared_transactions(backings, txid):
                for state in states:
                    state.begin_commit(txid)
                    state.multi_update(keys, [combine_sum(1)] * len(keys))
                    state.commit(txid)
    finally:
        stop.set()
        poller.join()
    assert not mixed, f"a reader saw part of a txid: {mixed[:3]}"
    assert len(seen) > 3 and {txid for *_, txid in seen} <= {None, 1, 2, 3}
    assert reader.execute(query, (prefix,)).fetchone() == ([3, 3, len(keys)], [3, 3, len(keys)], 3)


def test_a_table_that_is_not_txdags_or_is_newer_is_refused_by_name(postgres_conn, schema, reader, prefix):
    reader.execute(f'CREATE SCHEMA "{schema}"')
    reader.execute(f'CREATE TABLE "{schema}"."{prefix}__theirs" (k1 jsonb PRIMARY KEY, value jsonb)')
    store = PostgresStore(postgres_conn, schema=schema)
    with pytest.raises(ConfigError, match=rf"table {schema}\.{prefix}__theirs exists and is not txdag's"):
        _fresh(store, prefix, "theirs", 1)
    _fresh(store, prefix, "newer", 1)  # txdag's, of this format
    reader.execute(f"""COMMENT ON TABLE "{schema}"."{prefix}__newer" IS 'txdag state (format 9)'""")
    with pytest.raises(FormatVersionError, match=rf"{prefix}__newer is of format 9, written by a newer txdag"):
        _fresh(store, prefix, "newer", 1)
    _fresh(store, prefix, "pairs", 2)
    options = f"SELECT reloptions FROM pg_class WHERE oid = '\"{schema}\".\"{prefix}__pairs\"'::regclass"
    assert reader.execute(options).fetchone()[0] == ["fillfactor=50"]  # room in each page for a txid's updates
    assert reader.execute(options.replace("reloptions", "relreplident")).fetchone()[0] == "f"  # no primary key
    reader.execute(f'ALTER TABLE "{schema}"."{prefix}__pairs" SET (fillfactor = 90)')  # the user's choice stays
    _fresh(store, prefix, "pairs", 2)
    assert reader.execute(options).fetchone()[0] == ["fillfactor=90"]
    with pytest.raises(ConfigError, match=r"has 2 key column\(s\), and the state has 1 key field"):
        _fresh(store, prefix, "pairs", 1)
    _fresh(store, "a-b", "c", 1)  # the table a_b__c, whose comment names topology a-b
    with pytest.raises(ConfigError, match=r"a_b__c holds 'a-b/c', not 'a_b/c' \(their names meet"):
        _fresh(store, "a_b", "c", 1)
    store.backing_map(prefix, "Words", 1)  # two states of one topology in one process: the second is refused too
    with pytest.raises(ConfigError, match=rf"holds '{prefix}/Words', not '{prefix}/words' \(their names meet in one "
                                          r"table name\): rename one of the two states"):
        store.backing_map(prefix, "words", 1)


def test_a_table_of_format_1_is_migrated_and_keeps_its_values(postgres_conn, schema, reader, prefix):
    """Format 1 (txdag before this one) had a primary key on the jsonb key columns; format 2 a unique index on their
    JSON text. The first writer migrates the table (a reader reads it as it is) and the values go on from it."""
    table = f'"{schema}"."{prefix}__old"'
    reader.execute(f'CREATE SCHEMA "{schema}"')
    reader.execute(f"CREATE TABLE {table} (k1 jsonb NOT NULL, k2 jsonb NOT NULL, kind text NOT NULL, value jsonb, "
                   f"txid bigint, prev jsonb, PRIMARY KEY (k1, k2))")
    reader.execute(f"COMMENT ON TABLE {table} IS 'txdag state (format 1): {prefix}/old'")
    reader.execute(f"""INSERT INTO {table} VALUES ('"a"', '1', 'opaque', '5', 3, '2'), ('"b"', '1.5', 'opaque',
                   '7', 3, NULL)""")
    store = PostgresStore(postgres_conn, schema=schema)
    as_read = PostgresBackingMap(PostgresSession(lambda: psycopg.connect(postgres_url()), prefix, schema, "a reader"),
                                 prefix, "old", 2, create=False)  # as txdag state get reads it
    assert as_read.multi_get([("a", 1)]) == [OpaqueValue(3, 5, 2)]
    as_read.session.close()
    assert reader.execute(f"SELECT obj_description('{table}'::regclass, 'pg_class')").fetchone()[0] == \
        f"txdag state (format 1): {prefix}/old"  # a reader migrates nothing
    backing = _fresh(store, prefix, "old", 2)
    assert reader.execute(f"SELECT obj_description('{table}'::regclass, 'pg_class')").fetchone()[0] == \
        f"txdag state (format 2): {prefix}/old"
    assert reader.execute(f"SELECT count(*) FROM pg_constraint WHERE conrelid = '{table}'::regclass AND "
                          f"contype = 'p'").fetchone()[0] == 0
    assert reader.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
                          (schema, f"{prefix}__old")).fetchone()[0].endswith("((k1)::text), ((k2)::text))")
    assert reader.execute(f"SELECT relreplident FROM pg_class WHERE oid = '{table}'::regclass").fetchone()[0] == "f"
    with shared_transactions([backing], 4):
        OpaqueMap(backing).begin_commit(4)
        assert backing.add_sums(4, "opaque", [(("a", 1), 10), (("b", 1.5), 1), (("c", 1), 1)]) == 3
    assert backing.multi_get([("a", 1), ("b", 1.5), ("c", 1)]) == [OpaqueValue(4, 15, 5), OpaqueValue(4, 8, 7),
                                                                    OpaqueValue(4, 1, None)]
    _fresh(store, prefix, "old", 2)  # once: format 2 now
    reader.execute(f"COMMENT ON TABLE {table} IS 'txdag state (format 0): {prefix}/old'")  # no migration from it
    with pytest.raises(FormatVersionError, match=rf"{prefix}__old is of format 0, which this txdag does not migrate"):
        _fresh(store, prefix, "old", 2)


def test_a_format_1_table_of_another_owner_is_refused_with_its_owner_and_the_sql_to_run(postgres_conn, schema,
                                                                                        reader, prefix):
    """Only a table's owner may build its index and drop its primary key: a writer granted the rows but not the
    table gets a ConfigError naming the owner and the statements, not PostgreSQL's bare refusal; the table stays."""
    table = f'"{schema}"."{prefix}__theirs"'
    reader.execute(f'CREATE SCHEMA "{schema}"')
    reader.execute(f"CREATE TABLE {table} (k1 jsonb NOT NULL, kind text NOT NULL, value jsonb, txid bigint, "
                   f"prev jsonb, PRIMARY KEY (k1))")
    reader.execute(f"COMMENT ON TABLE {table} IS 'txdag state (format 1): {prefix}/theirs'")
    me = reader.execute("SELECT current_user").fetchone()[0]
    superuser_psql(DATABASE, "DO $$ BEGIN CREATE ROLE txdag_test_owner NOLOGIN; EXCEPTION WHEN duplicate_object THEN "
                   f"NULL; END $$; ALTER TABLE {table} OWNER TO txdag_test_owner; "
                   f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {me}")
    store = PostgresStore(postgres_conn, schema=schema)
    with pytest.raises(ConfigError) as refused:
        _fresh(store, prefix, "theirs", 1)
    said = str(refused.value)
    assert (f"table {schema}.{prefix}__theirs is of format 1 and this txdag migrates it to 'txdag state (format 2): "
            f"{prefix}/theirs', which only its owner can do: it belongs to txdag_test_owner, and this connection's "
            f"role is {me} (PostgreSQL: must be owner of table {prefix}__theirs). Let one task run as "
            f"txdag_test_owner, or have txdag_test_owner run, in one transaction: CREATE UNIQUE INDEX") in said
    assert f"COMMENT ON TABLE {table} IS 'txdag state (format 2): {prefix}/theirs'" in said
    assert reader.execute(f"SELECT obj_description('{table}'::regclass, 'pg_class')").fetchone()[0] == \
        f"txdag state (format 1): {prefix}/theirs"  # rolled back: still format 1, still its primary key
    assert reader.execute(f"SELECT count(*) FROM pg_constraint WHERE conrelid = '{table}'::regclass AND "
                          f"contype = 'p'").fetchone()[0] == 1


def _fresh(store: PostgresStore, topology: str, state: str, key_fields: int):
    """The backing map as a new process builds it (its session has checked nothing yet)."""
    close_sessions()
    return store.backing_map(topology, state, key_fields)



def test_a_postgres_that_does_not_answer_is_named_with_how_to_start_it(prefix):
    conn_id = use_connection("postgres://nobody:secret@127.0.0.1:1/nothing", f"{prefix}_down")
    with pytest.raises(ServiceUnavailable) as failed:
        PostgresStore(conn_id).backing_map(prefix, "words", 1)
    message = str(failed.value)
    assert f"PostgreSQL connection '{conn_id}'" in message and "`bash scripts/postgres.sh start`" in message
    assert "secret" not in message


def test_a_postgres_that_refuses_the_connection_is_a_configuration_error_naming_why(prefix):
    """A wrong password or a missing database is not retried as if the server were down."""
    url = postgres_url()
    password = psycopg.conninfo.conninfo_to_dict(url.replace("postgres://", "postgresql://", 1))["password"]
    for bad, said in ((url.replace(f":{password}@", ":wrong@"), "password authentication failed for user"),
                      (url.rsplit("/", 1)[0] + "/no_such_db", 'database "no_such_db" does not exist')):
        conn_id = use_connection(bad, f"{prefix}_refused")
        with pytest.raises(ConfigError, match=rf"PostgreSQL connection '{conn_id}' .*: PostgreSQL refused the "
                                              rf"connection \(FATAL: +{said}.*\): fix the Airflow"):
            PostgresStore(conn_id).backing_map(prefix, "words", 1)
        close_sessions()


CLI_DAG_FILE = """
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.airflow.stores import PostgresStore
from txdag.attempt import TransactionAttempt
from txdag.topology.definition import State, TweetsSource

store = PostgresStore("txdag_postgres", schema="{topo}")
topology = TransactionalTopology(
    "{topo}",
    source=TweetsSource(prefix="{topo}:", max_transaction_size=40),
    job="spark_jobs/job.py",
    states=[State("users", store=store), State("hashtags", kind="opaque", store=store),
            State("users_hashtags", key_fields=2, separator=":", store=store)],
)
dag = render(topology, dag_file=__file__)
"""


@pytest.mark.usefixtures("airflow_home")
def test_txdag_state_get_and_top_read_a_postgres_state_as_of_the_txid_it_holds(
        monkeypatch, redis_url, redis_client, zk_hosts, zk_root, prefix, tmp_path, capsys, postgres_conn, schema,
        reader):
    import json

    from support.cli_project import dag_folder, set_connections

    from txdag.analytics.tweets import tweet_partials
    from txdag.cli.main import main
    from txdag.spouts import SpoutContext
    from txdag.spouts.samples import sample_tweets
    from txdag.topology.topology import load_definitions

    set_connections(monkeypatch, redis_url, zk_hosts, zk_root, 0)
    dag_folder(monkeypatch, tmp_path, prefix, CLI_DAG_FILE)
    capsys.readouterr()
    assert main(["state", "get", prefix, "users", "@ann"]) == 0  # before anything: no table is created to read
    assert "nothing committed yet" in capsys.readouterr().out.splitlines()[0]
    assert reader.execute("SELECT to_regclass(%s)", (f'"{schema}"."{prefix}__users"',)).fetchone() == (None,)
    tweets = sample_tweets(120, seed=3)
    append_tweets(redis_client, tweets, prefix=f"{prefix}:")
    definition = load_definitions(tmp_path / "dags")[0][prefix]
    spout = definition.source.build(SpoutContext(prefix, {"redis_default": redis_client}))
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root), spout)
    topology = LocalTopology(coordinator, redis_client,
                             {s.name: s.build(redis_client, prefix) for s in definition.states},
                             lambda records: tweet_partials(r.value for r in records))
    run_all(topology)
    close_sessions()  # the commands read on connections of their own (the connection's fields, not the hook)
    truth = tweet_partials(tweets)
    user, count = max(truth["users"].items(), key=lambda item: (item[1], item[0]))

    def run(*argv):
        capsys.readouterr()
        code = main(list(argv))
        return code, capsys.readouterr().out

    code, out = run("state", "get", prefix, "users", user[0], "@nobody", "--json")
    data = json.loads(out)
    assert code == 0 and data["committed_txid"] == 3 and data["isolated"] and data["store"].startswith("PostgresStore")
    assert data["values"] == [{"key": user[0], "value": count, "txid": 3, "kind": "transactional"},
                              {"key": "@nobody", "value": None, "txid": None, "kind": None, "found": False}]
    pair, pair_count = next(iter(truth["users_hashtags"].items()))
    code, out = run("state", "get", prefix, "users_hashtags", ":".join(pair))
    assert code == 0 and f"in PostgresStore('txdag_postgres', schema='{prefix}')" in out.splitlines()[0]
    assert "as of committed txid 3" in out.splitlines()[0] and str(pair_count) in out
    code, out = run("state", "top", prefix, "hashtags", "-n", "2", "--json")
    best = sorted(truth["hashtags"].values(), reverse=True)[:2]
    data = json.loads(out)
    assert code == 0 and data["total_keys"] == len(truth["hashtags"])
    assert [row["value"] for row in data["values"]] == best  # ties: any of the tied keys, each with its own count
    assert all(truth["hashtags"][(row["key"],)] == row["value"] for row in data["values"])
    assert all("prev" in row for row in data["values"])
    capsys.readouterr()
    code = main(["state", "get", prefix, "users_hashtags", "no-separator"])
    assert code == 2 and "'no-separator' is not a key of state 'users_hashtags': its keys are 2 fields joined by " \
                         "':'" in capsys.readouterr().err
    reader.execute(f'COMMENT ON TABLE "{schema}"."{prefix}__users" IS NULL')
    close_sessions()  # a new command: it checks the table again
    capsys.readouterr()
    code = main(["state", "get", prefix, "users", user[0]])
    assert code == 5 and f"table {schema}.{prefix}__users exists and is not txdag's" in capsys.readouterr().err

    # txdag reset: the states' tables and the topology's row go with its records; a table that is not the state's
    # is refused by name before anything is deleted
    capsys.readouterr()
    code = main(["reset", prefix, "--confirm"])
    assert code == 5 and f"table {schema}.{prefix}__users is not txdag's (its comment is None): txdag reset " \
                         f"deletes nothing" in capsys.readouterr().err
    assert coordinator.store.client.exists(coordinator.store.path)  # ZooKeeper's records are kept
    # another topology's table whose name meets this one's state's ({prefix.upper()} lower-cases to {prefix})
    reader.execute(f"COMMENT ON TABLE \"{schema}\".\"{prefix}__users\" IS 'txdag state (format 2): "
                   f"{prefix.upper()}/users'")
    code, out = run("reset", prefix)
    assert code == 1 and f"left alone, as another topology's or state's (their names meet in one table name): " \
                         f"{schema}.{prefix}__users" in out
    reader.execute(f"COMMENT ON TABLE \"{schema}\".\"{prefix}__users\" IS 'txdag state (format 2): {prefix}/users'")
    tables = [f"{schema}.{prefix}__{s}" for s in ("users", "hashtags", "users_hashtags")]
    code, out = run("reset", prefix)
    assert code == 1 and f", 3 table(s) of its states ({', '.join(tables)}), its row of txdag_commits at txid 3 " \
                         f"in PostgresStore('txdag_postgres', schema='{prefix}') and " in out
    assert reader.execute(f'SELECT count(*) FROM "{schema}".txdag_commits').fetchone() == (1,)  # a dry run
    code, out = run("reset", prefix, "--confirm", "--json")
    done = json.loads(out)
    assert code == 0 and done["tables"] == tables and done["committed_txid"] == 3 and done["stores_kept"] == []
    assert done["tables_of_others"] == []
    assert [reader.execute("SELECT to_regclass(%s)", (f'"{schema}"."{prefix}__{s}"',)).fetchone()[0]
            for s in ("users", "hashtags", "users_hashtags")] == [None, None, None]
    assert reader.execute(f'SELECT count(*) FROM "{schema}".txdag_commits').fetchone() == (0,)
    coordinator.store.client.stop()
    close_sessions()
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root),
                              definition.source.build(SpoutContext(prefix, {"redis_default": redis_client})))
    again = LocalTopology(coordinator, redis_client, {s.name: s.build(redis_client, prefix) for s in definition.states},
                          lambda records: tweet_partials(r.value for r in records))
    run_all(again)  # starts over at txid 1 from the source's start, and does not halt on the tables
    code, out = run("state", "get", prefix, "users", user[0], "--json")
    data = json.loads(out)
    assert code == 0 and data["committed_txid"] == 3 and data["values"][0]["value"] == count  # counted once
    coordinator.store.client.stop()


def test_a_database_that_holds_the_txid_of_a_commit_that_had_not_begun_halts_it(postgres_conn, schema, prefix):
    backing = PostgresStore(postgres_conn, schema=schema).backing_map(prefix, "words", 1)
    state = TransactionalMap(backing)
    with shared_transactions([backing], 1, resumed=False):
        state.begin_commit(1)
        state.multi_update([("a",)], [combine_sum(1)])
        state.commit(1)
    with pytest.raises(StoreWentBackwards, match=r"holds txid 1 .* already, and this commit of txid 1 had not begun"):
        with shared_transactions([backing], 1, resumed=False):  # a topology started over, its tables kept
            pass
    with shared_transactions([backing], 1, resumed=True):  # a retry of the commit that wrote it: writes dropped
        state.begin_commit(1)
        state.multi_update([("a",)], [combine_sum(1)])
        state.commit(1)
    assert backing.multi_get([("a",)]) == [TransactionalValue(1, 1)]


def test_states_used_alone_commit_each_on_its_own(postgres_conn, schema, reader, prefix):
    store = PostgresStore(postgres_conn, schema=schema)
    words, plain = store.backing_map(prefix, "words", 1), store.backing_map(prefix, "plain", 1)
    one, two = TransactionalMap(words), NonTransactionalMap(plain)
    for state in (one, two):
        state.begin_commit(1)
    one.multi_update([("a",)], [combine_sum(2)])
    assert counts(reader, schema, f"{prefix}__words") == {}, "a write seen before its state committed"
    one.commit(1)  # committed, whatever two does
    assert counts(reader, schema, f"{prefix}__words") == {"a": 2}
    two.multi_update([("a",)], [combine_sum(3)])
    two.commit(1)
    assert counts(reader, schema, f"{prefix}__plain") == {"a": 3}
    for txid in (2, 3):  # one after the other, in either order (Trident's states commit each on its own)
        for state in ((one, two) if txid == 2 else (two, one)):
            state.begin_commit(txid)
            state.multi_update([("a",)], [combine_sum(1)])
            state.commit(txid)
    one.begin_commit(4)  # one's txid 4 stays open while two commits txid 5: neither touches the other
    one.multi_update([("a",)], [combine_sum(1)])
    two.begin_commit(5)
    two.multi_update([("a",)], [combine_sum(1)])
    two.commit(5)
    one.commit(4)
    assert counts(reader, schema, f"{prefix}__words") == {"a": 5} and counts(reader, schema, f"{prefix}__plain") == {
        "a": 6}
    assert held(reader, schema, prefix) is None, "states used alone set the commit phase's row of txdag_commits"
    with pytest.raises(ValueError, match=r"a write to table .*__plain outside a txid"):
        plain.multi_put([("a",)], [9])
    assert idle(reader, words.alone) == "idle", "a connection left inside a transaction"


def idle(reader, session) -> str:
    return reader.execute("SELECT state FROM pg_stat_activity WHERE pid = %s",
                          (session._db.info.backend_pid,)).fetchone()[0]


def test_a_state_used_alone_that_fails_loses_its_own_transaction_only(postgres_conn, schema, reader, prefix):
    from txdag.state.cached_map import CachedMap

    store = PostgresStore(postgres_conn, schema=schema)
    words, plain = store.backing_map(prefix, "words", 1), store.backing_map(prefix, "plain", 1)
    one, two = TransactionalMap(CachedMap(words)), TransactionalMap(plain)
    for state in (one, two):
        state.begin_commit(1)
    one.multi_update([("a",)], [combine_sum(2)])
    two.multi_update([("a",)], [combine_sum(5)])
    with pytest.raises(psycopg.Error, match="unsupported Unicode escape"):  # PostgreSQL's jsonb refuses a NUL
        two.multi_update([("a\x00",)], [combine_sum(3)])
    assert idle(reader, plain.alone) == "idle", "the failed transaction was left open"
    with pytest.raises(ServiceUnavailable, match=rf"topology '{prefix}' txid 1: .* lost the transaction"):
        two.multi_update([("b",)], [combine_sum(1)])
    with pytest.raises(ServiceUnavailable, match=rf"topology '{prefix}' txid 1: .* lost the transaction"):
        two.commit(1)
    one.commit(1)
    assert counts(reader, schema, f"{prefix}__words") == {"a": 2} and counts(reader, schema, f"{prefix}__plain") == {}
    two.begin_commit(1)  # the retry: a new transaction
    two.multi_update([("a",)], [combine_sum(5)])
    two.commit(1)
    assert counts(reader, schema, f"{prefix}__plain") == {"a": 5}
    one.begin_commit(2)
    with pytest.raises(ConfigError, match=r"txid 2: .* table .*__words, key \('a',\): the value: nan has no JSON"):
        one.multi_put([("a",)], [float("nan")])  # refused before any SQL
    one.begin_commit(2)  # the state begins its txid again: the cache and the transaction start over
    one.multi_update([("a",)], [combine_sum(1)])
    one.commit(2)
    assert counts(reader, schema, f"{prefix}__words") == {"a": 3} and idle(reader, words.alone) == "idle"


def test_keys_of_every_json_type_are_found_again(postgres_conn, schema, prefix):
    backing = PostgresStore(postgres_conn, schema=schema).backing_map(prefix, "numbers", 2)
    state = OpaqueMap(backing)
    keys = [(10**16, "a"), (1.5, "a"), ("1.5", "a"), (1, "a"), ("1", "a"), (1e-7, "a"), (None, "a"), (True, "b")]
    for txid in (1, 2):
        with shared_transactions([backing], txid):
            state.begin_commit(txid)
            state.multi_update(keys, [combine_sum(txid)] * len(keys))
            state.commit(txid)
    # a key is its JSON text, as a Redis state's field: 1.0 is not the key 1, nor "1"
    assert backing.multi_get(keys + [(1.0, "a")]) == [OpaqueValue(2, 3, 1)] * len(keys) + [None]
    assert len(backing.read_committed(None, largest=100)[1]) == len(keys)


def test_a_connection_lost_inside_the_transaction_is_retried_and_stays_exact(topology, reader, schema, prefix,
                                                                          monkeypatch):
    backing = type(topology.states["o"].backing)
    add, killed = backing.add_sums, []

    def killed_inside_o(self, txid, kind, partials):  # the server ends this connection while the txid is half written
        if self.name == f"{prefix}__o" and not killed:
            pid = self.session.db.info.backend_pid
            killed.append(reader.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0])
        return add(self, txid, kind, partials)

    monkeypatch.setattr(backing, "add_sums", killed_inside_o)
    one = topology.coordinate("r1")
    topology.process(one)
    with pytest.raises(ServiceUnavailable, match=rf"topology '{prefix}' txid 1: PostgreSQL connection .* did not "
                                                 r"answer adding the partials of table"):
        topology.commit(one.tx)
    assert killed == [True] and held(reader, schema, prefix) is None
    assert counts(reader, schema, f"{prefix}__t") == {}, "a reader saw part of txid 1"
    assert isinstance(topology.commit(one.tx), Committed)  # the commit task's retry, on a new connection
    run_all(topology)
    assert counts(reader, schema, f"{prefix}__n") == counts(reader, schema, f"{prefix}__o") == TRUTH


def test_two_connection_ids_to_one_database_are_refused_by_name(postgres_conn, schema, prefix, monkeypatch):
    other = f"{prefix}_again"
    assert "@127.0.0.1:" in postgres_url(), "the test spells the same address another way"
    monkeypatch.setenv(f"AIRFLOW_CONN_{other.upper()}", postgres_url().replace("@127.0.0.1:", "@localhost:"))
    PostgresStore(postgres_conn, schema=schema).backing_map(prefix, "words", 1)
    with pytest.raises(ConfigError, match=rf"connection '{other}' \(schema {schema}\) reaches the database that "
                                          rf"PostgreSQL connection '{postgres_conn}' \(schema {schema}\) reaches"):
        PostgresStore(other, schema=schema).backing_map(prefix, "tags", 1)
    with pytest.raises(ConfigError, match="reaches the database"):  # refused again, not let through the second time
        PostgresStore(other, schema=schema).backing_map(prefix, "tags", 1)
    PostgresStore(other, schema=schema).backing_map(f"{prefix}_b", "tags", 1)  # another topology: its own row
    close_sessions()  # a new process: its session reconnects, and is the only one
    PostgresStore(postgres_conn, schema=schema).backing_map(prefix, "words", 1).session.close()
    PostgresStore(postgres_conn, schema=schema).backing_map(prefix, "tags", 1)  # reconnected: still its own


def test_a_cache_forgets_what_the_shared_transaction_rolled_back(postgres_conn, schema, prefix):
    from txdag.state.cached_map import CachedMap

    backing = PostgresStore(postgres_conn, schema=schema).backing_map(prefix, "words", 1)
    state = TransactionalMap(CachedMap(backing))
    with shared_transactions([state.backing], 1):
        state.begin_commit(1)
        state.multi_update([("a",)], [combine_sum(1)])
        state.commit(1)
    with pytest.raises(RuntimeError, match="another state"), shared_transactions([state.backing], 2):
        state.begin_commit(2)
        state.multi_update([("a",)], [combine_sum(1)])
        state.commit(2)  # this state is done; the txid's transaction is not
        raise RuntimeError("another state of txid 2 failed")
    with shared_transactions([state.backing], 2):  # the retry: 'a' is read from the database again
        state.begin_commit(2)
        state.multi_update([("a",)], [combine_sum(1)])
        state.commit(2)
    assert backing.multi_get([("a",)]) == [TransactionalValue(2, 2)]


def test_a_lock_held_past_lock_timeout_is_named_and_retried(postgres_conn, schema, prefix, monkeypatch):
    from txdag.state import postgres

    monkeypatch.setattr(postgres, "SESSION_SETTINGS", postgres.SESSION_SETTINGS.replace("'60s'", "'1s'"))
    backing = PostgresStore(postgres_conn, schema=schema).backing_map(prefix, "words", 1)
    with shared_transactions([backing], 1):
        pass
    with psycopg.connect(postgres_url()) as holder:  # a commit of this topology that is still running elsewhere
        holder.execute(f'SELECT txid FROM "{schema}".txdag_commits WHERE topology = %s FOR UPDATE', (prefix,))
        with pytest.raises(ServiceUnavailable, match=rf"topology '{prefix}' txid 2: PostgreSQL connection .* "
                                                     r"waited longer than its lock_timeout beginning the txid: another "
                                                     rf"session holds the topology's row of {schema}\.txdag_commits "
                                                     r".* the commit is retried$"):
            with shared_transactions([backing], 2):
                pass
    with shared_transactions([backing], 2):  # the lock is released: the retry goes on
        TransactionalMap(backing).begin_commit(2)
        backing.multi_put([("a",)], [TransactionalValue(2, 5)])
        backing.commit(2)
    assert backing.multi_get([("a",)]) == [TransactionalValue(2, 5)]


def test_a_value_without_a_json_form_names_topology_txid_table_and_key(postgres_conn, schema, prefix):
    backing = PostgresStore(postgres_conn, schema=schema).backing_map(prefix, "ratios", 1)
    with pytest.raises(ConfigError, match=rf"topology '{prefix}' txid 1: PostgreSQL connection .*: table "
                                          rf"{prefix}__ratios, key \('a',\): the value: inf has no JSON form"):
        with shared_transactions([backing], 1):
            OpaqueMap(backing).begin_commit(1)
            backing.multi_put([("a",)], [OpaqueValue(1, float("inf"), None)])
    assert backing.multi_get([("a",)]) == [None]


@pytest.mark.parametrize("path", ["straight", "summed by key"])
@pytest.mark.parametrize("kind", ["transactional", "opaque", "non_transactional"])
def test_sums_added_in_sql_are_what_the_map_state_makes_of_them(postgres_conn, schema, prefix, kind, path,
                                                                monkeypatch):
    """Both ways add_sums takes, each over several documents: str/int keys straight into the state, and float keys
    (``0.0`` is the key ``0`` in Python, another in JSON) summed by their JSON text in a temporary table first."""
    import random

    from txdag.errors import TxidOrderError
    from txdag.state import postgres
    from txdag.state.values import committed_value

    monkeypatch.setattr(postgres, "SUMS_CHUNK", 7)

    store = PostgresStore(postgres_conn, schema=schema)
    in_sql, in_python = store.backing_map(prefix, "in_sql", 2), store.backing_map(prefix, "in_python", 2)
    state = {"transactional": TransactionalMap, "opaque": OpaqueMap,
             "non_transactional": NonTransactionalMap}[kind](in_python)
    rng = random.Random(kind)

    def add(txid: int, partials: dict) -> int:
        written = in_sql.add_sums(txid, kind, list(partials.items()))
        state.begin_commit(txid)
        state.multi_update(list(partials), [combine_sum(delta) for delta in partials.values()])
        state.commit(txid)
        return written

    def stored(backing) -> dict:
        return {key: (value, type(committed_value(value))) for key, value in backing.read_committed(None, 10**6)[1]}

    for txid in (1, 2, 3):  # ints and floats (quarters: exact in binary and in numeric), keys of two JSON types
        partials = {(f"u{rng.randrange(30)}", rng.randrange(3) / (2 if path == "summed by key" else 1)):
                    rng.choice([rng.randrange(1, 9), rng.randrange(1, 90) / 4]) for _ in range(40)}
        with shared_transactions([in_sql, in_python], txid):
            assert add(txid, partials) == len(partials)
    assert len(stored(in_sql)) > 30 and stored(in_sql) == stored(in_python)
    in_sql.begin_commit(3)  # txid 3 again, states used alone (no txdag_commits): the kind's own replay rule
    assert add(3, partials) == (0 if kind == "transactional" else len(partials))
    in_sql.commit(3)
    assert stored(in_sql) == stored(in_python)
    with shared_transactions([in_sql], 3):  # a commit retried after the database committed txid 3: held
        assert in_sql.add_sums(3, kind, list(partials.items())) == 0
    assert stored(in_sql) == stored(in_python)
    if kind != "non_transactional":
        in_sql.begin_commit(2)
        with pytest.raises(TxidOrderError, match=r"txid 2 is behind the stored txid 3 at key \('u"):
            in_sql.add_sums(2, kind, list(partials.items()))
        in_sql.alone.rollback()
    if kind != "non_transactional":  # keys Python holds equal and JSON does not: two keys, as in Redis
        in_sql.begin_commit(4)
        assert in_sql.add_sums(4, kind, [((7, "x"), 1), ((7.0, "x"), 2)]) == 2
        in_sql.commit(4)
        assert [committed_value(v) for v in in_sql.multi_get([(7, "x"), (7.0, "x")])] == [1, 2]
        in_sql.begin_commit(5)  # a surrogate pair and its character: two strings in Python, one in JSON and jsonb
        assert in_sql.add_sums(5, kind, [(("\ud83d\ude00", "x"), 1), (("\U0001f600", "x"), 2)]) == 1
        in_sql.commit(5)
        assert committed_value(in_sql.multi_get([("\U0001f600", "x")])[0]) == 3
        in_sql.begin_commit(6)
        in_sql.multi_put([(7, "x")], [(TransactionalValue if kind == "transactional" else
                                        lambda txid, value: OpaqueValue(txid, value, None))(6, "three")])
        in_sql.commit(6)
        in_sql.begin_commit(7)
        with pytest.raises(ConfigError, match=r"holds \"three\" at key \(7, 'x'\), not a number"):
            in_sql.add_sums(7, kind, [((7, "x"), 1)])
        in_sql.alone.rollback()
    with pytest.raises(ConfigError, match=r"the key \(nan, 'x'\) or its partial 1 has no JSON form"):
        in_sql.begin_commit(7)
        in_sql.add_sums(7, kind, [((float("nan"), "x"), 1)])
    in_sql.alone.rollback()
    with pytest.raises(ConfigError, match=r"the partial None of key \('u1', 0\) is not a number"):
        in_sql.begin_commit(7)
        in_sql.add_sums(7, kind, [(("u1", 0), None)])
    in_sql.alone.rollback()
    other = "opaque" if kind == "transactional" else "transactional"
    in_sql.begin_commit(8)
    with pytest.raises(ConfigError, match=rf"table {prefix}__in_sql holds a {kind.replace('non_', 'plain')[:5]}"):
        in_sql.add_sums(8, other, list(partials.items()))
    in_sql.alone.rollback()


def test_the_store_commit_benchmark_runs_and_checks_what_each_path_wrote(redis_url, postgres_conn):
    """bench/store_commit.py at a small size: every path's count and values checked by the script itself."""
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, str(root / "bench/store_commit.py"), "--sizes", "300", "--repeat", "1",
                           "--redis-url", redis_url, "--postgres-url", postgres_url()],
                          capture_output=True, text=True, timeout=300, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines() if line.split()[:1] == ["300"]]
    assert [row[1] for row in rows] == ["transactional", "opaque"] and all(len(row) == 11 for row in rows)

"""The txdag CLI against real Redis and ZooKeeper: txids run in process, then read back through the commands.

Connections are AIRFLOW_CONN_* variables pointing at the test servers (Redis database 11, a znode root of the
test's own); the topology is a DAG file written to a temporary DAG folder.
"""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

import pytest
import redis
from access import ZK_AUTH, redis_user
from support.cli_project import dag_folder, drop_keys, set_connections, state_client

from txdag.analytics.tweets import tweet_partials
from txdag.cli.main import main
from txdag.local import LocalTopology
from txdag.spouts import SpoutContext
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import append_tweets
from txdag.topology.topology import load_definitions
from txdag.txid.coordinator import Coordinator, Emission
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore

pytestmark = pytest.mark.usefixtures("airflow_home")
DB = 11
DAG_FILE = """
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology(
    "{topo}",
    source=TweetsSource(prefix="{topo}:", max_transaction_size=40),
    job="spark_jobs/job.py",
    states=[
        State("users", namespace="{topo}:users"),
        State("hashtags", kind="opaque", namespace="{topo}:hashtags"),
        State("users_hashtags", namespace="{topo}:uh", key_fields=2, separator=":"),
    ],
)
dag = render(topology, dag_file=__file__)
"""


@pytest.fixture
def env(monkeypatch, redis_url, zk_hosts, zk_root, prefix, tmp_path):
    """Connections and a DAG folder holding one topology named after the test."""
    set_connections(monkeypatch, redis_url, zk_hosts, zk_root, DB)
    dag_folder(monkeypatch, tmp_path, prefix, DAG_FILE)
    client = state_client(redis_url, DB)
    yield client
    drop_keys(client, prefix)


@pytest.fixture
def ran(env, zk_hosts, zk_root, prefix, tmp_path):
    """Five txids of 40 tweets: 1-3 committed, 4 failed in processing (5 fails behind it), then the state."""
    tweets = sample_tweets(200, seed=5)
    append_tweets(env, tweets, prefix=f"{prefix}:")
    definition = load_definitions(tmp_path / "dags")[0][prefix]
    spout = definition.source.build(SpoutContext(prefix, {"redis_default": env}))
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root), spout,
                              max_active_transactions=5)
    states = {s.name: s.build(env) for s in definition.states}

    def process(records):
        if records and int(records[0].id) == 121:
            raise RuntimeError("injected failure in txid 4")
        return tweet_partials(r.value for r in records)

    topology = LocalTopology(coordinator, env, states, process)
    emissions = [topology.coordinate(f"run{n}") for n in range(1, 6)]
    assert all(isinstance(e, Emission) for e in emissions)
    for emission in emissions[:3]:
        topology.process(emission)
        topology.commit(emission.tx)
    with pytest.raises(RuntimeError):
        topology.process(emissions[3])
    yield tweet_partials(tweets[:120])
    coordinator.store.client.stop()


def run(capsys, *argv):
    capsys.readouterr()  # what the test logged before (kazoo's INFO lines, once Airflow set logging up): not the CLI's
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_status_names_the_committed_txid_the_failure_and_its_cascade(ran, capsys, prefix, tmp_path):
    code, out, _ = run(capsys, "status", prefix)
    assert code == 0
    assert out.splitlines()[:3] == [  # the failed txid leads, with its way out, before the figures
        "txid 4 FAILED (attempt 1, run run4): RuntimeError: injected failure in txid 4", "  failed behind it: txid 5",
        f"  way out: fix the cause, then replay it and every later txid: txdag replay {prefix} --from 4"]
    assert out.splitlines()[4] == f"topology {prefix}: committed up to txid 3, last txid 5, 0 in flight, 0 rejected " \
                                  "entries"

    code, out, _ = run(capsys, "status", prefix, "--json")
    data = json.loads(out)
    assert (data["committed_txid"], data["last_txid"], data["in_flight"]) == (3, 5, [])
    assert data["failed"] == [{"txid": 4, "attempt": 1, "run_id": "run4", "cascade": [5], "automatic_replay": False,
                               "error": "RuntimeError: injected failure in txid 4",
                               "headline": "RuntimeError: injected failure in txid 4",
                               "ways_out": [{"when": "fix the cause, then replay it and every later txid",
                                             "command": f"txdag replay {prefix} --from 4"}]}]
    assert data["rejections"] == 0

    code, out, _ = run(capsys, "status", "--json")
    assert code == 0 and [t["topology"] for t in json.loads(out)] == [prefix]
    idle = f"{prefix}_idle"  # a topology that never ran: its row has every key of one that ran (a script reads them)
    (tmp_path / "dags" / "idle.py").write_text(DAG_FILE.replace("{topo}", idle))
    rows = {r["topology"]: r for r in json.loads(run(capsys, "status", "--json")[1])}
    assert set(rows) == {prefix, idle} and set(rows[idle]) == set(rows[prefix]), (rows[idle], sorted(rows[prefix]))
    assert rows[idle]["never_ran"] is True and rows[prefix]["never_ran"] is False and rows[idle]["stalled"] == []
    (tmp_path / "dags" / "idle.py").unlink()
    code, out, _ = run(capsys, "status")
    lead, _, table_text = out.partition("\n\n")
    assert lead.splitlines()[0] == f"{prefix}: txid 4 FAILED (attempt 1, run run4): RuntimeError: injected failure " \
                                   "in txid 4"
    header, row = table_text.splitlines()
    assert header.split() == ["TOPOLOGY", "COMMITTED", "LAST", "TXID", "IN", "FLIGHT", "FAILED", "REJECTED"]
    assert row.split() == [prefix, "3", "5", "0", "2", "0"]


def test_status_lists_txids_in_flight_with_phase_and_attempt(env, zk_hosts, zk_root, prefix, tmp_path, capsys):
    append_tweets(env, sample_tweets(50, seed=1), prefix=f"{prefix}:")
    definition = load_definitions(tmp_path / "dags")[0][prefix]
    store = TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root)
    coordinator = Coordinator(store, definition.source.build(SpoutContext(prefix, {"redis_default": env})),
                              max_active_transactions=2)
    coordinator.coordinate("a")
    second = coordinator.coordinate("b")
    coordinator.mark_processed(second.tx)
    code, out, _ = run(capsys, "status", prefix, "--json")
    shown = ["txid", "attempt", "phase", "run_id", "waits_on"]
    assert [{k: row[k] for k in shown} for row in json.loads(out)["in_flight"]] == [
        {"txid": 1, "attempt": 1, "phase": "processing", "run_id": "a", "waits_on": "its process task (attempt 1)"},
        {"txid": 2, "attempt": 1, "phase": "waiting to commit", "run_id": "b",  # txid 1 is not committed
         "waits_on": "txid 1 to commit first"},
    ]
    code, out, _ = run(capsys, "status", prefix)
    rows = [re.split(r" {2,}", line) for line in out.splitlines()[3:]]  # columns are 2+ spaces apart
    assert [row[:4] + row[5:] for row in rows] == [
        ["TXID", "ATTEMPT", "PHASE", "WAITS ON", "RUN"], ["1", "1", "processing", "its process task (attempt 1)", "a"],
        ["2", "1", "waiting to commit", "txid 1 to commit first", "b"]]
    assert [row[4] for row in rows][0] == "FOR" and all(re.fullmatch(r"\d+ s", row[4]) for row in rows[1:]), rows
    store.client.stop()


def test_show_prints_a_txids_record(ran, capsys, prefix):
    code, out, _ = run(capsys, "show", prefix, "2")
    assert code == 0
    lines = dict(line.split(None, 1) for line in out.splitlines()[:5])
    assert lines == {"topology": prefix, "txid": "2", "attempt": "1", "phase": "committed", "run": "run2"}
    assert "batch       ids 41..80" in out and "batch size  40" in out
    code, out, _ = run(capsys, "show", prefix, "4", "--json")
    data = json.loads(out)
    assert (data["phase"], data["batch_size"], data["metadata"]["from"]) == ("failed", 40, 121)
    assert [h["status"] for h in data["history"]] == ["emitted", "failed"]


def test_show_of_an_unknown_txid_says_why_and_exits_1(ran, capsys, prefix):
    code, out, err = run(capsys, "show", prefix, "9")
    assert code == 1 and out == ""
    assert err.strip() == f"txdag show: topology {prefix!r} has no record of txid 9: it is not allocated yet " \
                          "(last txid 5)"
    code, _, err = run(capsys, "show", "nosuchtopology", "1")
    assert code == 1 and "no topology 'nosuchtopology': the DAG folder defines" in err


def test_state_get_unwraps_transactional_and_opaque_values(ran, capsys, prefix):
    user, users = max(ran["users"].items(), key=lambda kv: kv[1])
    code, out, _ = run(capsys, "state", "get", prefix, "users", user[0], "@nobody", "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["committed_txid"], data["newer"], data["isolated"]) == (3, 0, True)
    values = data["values"]
    assert values[0] == {"key": user[0], "value": users, "txid": 3, "kind": "transactional"}
    assert values[1]["value"] is None and values[1]["found"] is False

    tag, count = max(ran["hashtags"].items(), key=lambda kv: kv[1])
    code, out, _ = run(capsys, "state", "get", prefix, "hashtags", tag[0])
    head, columns, row = out.splitlines()
    assert head == f"state hashtags of topology {prefix} (opaque, Redis hash {prefix}:hashtags), as of committed txid 3"
    assert columns.split() == ["KEY", "VALUE", "TXID", "PREV"]
    key, value, txid, prev = row.split()
    assert (key, int(value)) == (tag[0], count) and 1 <= int(txid) <= 3 and (prev == "-" or int(prev) < count)


def test_state_top_ranks_the_largest_values(ran, capsys, prefix):
    code, out, _ = run(capsys, "state", "top", prefix, "users_hashtags", "-n", "3", "--json")
    assert code == 0
    data = json.loads(out)
    expected = sorted(ran["users_hashtags"].items(), key=lambda kv: (-kv[1], ":".join(kv[0])))[:3]
    assert [(v["key"], v["value"]) for v in data["values"]] == [(":".join(k), n) for k, n in expected]
    assert data["total_keys"] == len(ran["users_hashtags"])
    code, out, _ = run(capsys, "state", "top", prefix, "users", "-n", "2")
    assert len(out.splitlines()) == 4 and out.splitlines()[1].split() == ["KEY", "VALUE", "TXID"]
    code, _, err = run(capsys, "state", "top", prefix, "nosuch")
    assert code == 1 and f"topology {prefix!r} has no state 'nosuch' (its states: users, hashtags" in err


def test_seed_appends_with_progress_and_json(env, capsys, monkeypatch, redis_url):
    """In database 12, whose seed-000 keys (no prefix) belong to this test."""
    address = urlsplit(redis_url)
    monkeypatch.setenv("AIRFLOW_CONN_REDIS_DEFAULT", json.dumps(
        {"conn_type": "redis", "host": address.hostname, "port": address.port, "login": address.username,
         "password": address.password, "extra": {"db": 12}}))
    client = redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + "/12")
    client.delete("NEXT_WRITE", "sentences:0", "sentences:1", *[str(i) for i in range(1, 1501)])
    code, out, err = run(capsys, "seed", "tweets", "--count", "1500", "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["topology"], data["count"]) == ("tweets_analytics", 1500)
    assert (data["appended"][0]["first"], data["appended"][0]["last"]) == ("1", "1500")
    assert err.splitlines()[-2:] == ["[1000/1500] 1000 tweets appended to keys without prefix",
                                     "[1500/1500] 1500 tweets appended to keys without prefix"]
    assert int(client.get("NEXT_WRITE")) == 1501 and client.get("1500") is not None
    code, out, _ = run(capsys, "seed", "words", "--count", "10")
    assert code == 0 and "appended 10 sentences for topology word_count" in out
    assert client.xlen("sentences:0") == client.xlen("sentences:1") == 5
    code, out, _ = run(capsys, "seed", "words", "--count", "3")  # an odd count: the first stream takes the rest
    assert code == 0 and "appended 3 sentences for topology word_count" in out
    assert (client.xlen("sentences:0"), client.xlen("sentences:1")) == (7, 6)
    client.delete("NEXT_WRITE", "sentences:0", "sentences:1", *[str(i) for i in range(1, 1501)])
    client.close()


def test_doctor_passes_with_live_services_and_fails_on_a_dead_port(env, capsys, monkeypatch):
    code, out, _ = run(capsys, "doctor", "--check", "redis", "--check", "zookeeper")
    assert code == 0, out
    assert out.rstrip().endswith("all checks passed")
    monkeypatch.setenv("AIRFLOW_CONN_REDIS_DEFAULT", json.dumps({"conn_type": "redis", "host": "127.0.0.1",
                                                                 "port": unused_port()}))
    code, out, _ = run(capsys, "doctor", "--check", "redis", "--check", "zookeeper", "--timeout", "2")
    assert code == 1
    rows = {line.split()[0]: line.split()[2] for line in out.splitlines()[1:3]}
    assert rows == {"redis": "fail", "zookeeper": "ok"}
    assert "redis (redis_default): start it with `bash scripts/services.sh start`" in out
    code, out, _ = run(capsys, "doctor", "--check", "redis", "--json", "--timeout", "2")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and data["checks"][0]["status"] == "fail"


def test_doctor_passes_as_a_topologys_restricted_user(env, capsys, monkeypatch, prefix, tmp_path):
    """The user of `txdag acl redis` may not run INFO: doctor still finds Redis answering, and says so."""
    topologies, _ = load_definitions(tmp_path / "dags")
    with redis_user(env, f"{prefix}-user", list(topologies.values()), "s3cret-doctor") as client:
        kwargs = client.connection_pool.connection_kwargs
        monkeypatch.setenv("AIRFLOW_CONN_REDIS_DEFAULT", json.dumps(
            {"conn_type": "redis", "host": kwargs["host"], "port": kwargs["port"], "login": f"{prefix}-user",
             "password": "s3cret-doctor", "extra": {"db": DB}}))
        code, out, _ = run(capsys, "doctor", "--check", "redis", "--json")
    check = json.loads(out)["checks"][0]
    assert code == 0 and check["status"] == "ok", out
    assert "version hidden: this user may not run INFO" in check["detail"]
    assert "s3cret-doctor" not in out


def test_doctor_names_a_missing_connection(env, capsys, monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_ZOOKEEPER_DEFAULT")
    code, out, _ = run(capsys, "doctor", "--check", "zookeeper", "--zookeeper-conn-id", "zk_nowhere", "--json")
    check = json.loads(out)["checks"][0]
    assert code == 1 and check["status"] == "fail"
    assert "Airflow connection 'zk_nowhere' is not defined" in check["detail"]
    assert check["fix"].startswith("set AIRFLOW_CONN_ZK_NOWHERE=")


def unused_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_doctor_checks_each_topologys_stores_through_its_own_connection(env, capsys, monkeypatch, prefix, tmp_path):
    """--check stores reads each topology through its own connections, not the defaults: a topology whose ZooKeeper
    does not answer fails (nothing of it was checked), and so does a DAG file that does not load."""
    code, out, _ = run(capsys, "doctor", "--check", "stores", "--json")
    assert code == 0 and {c["status"] for c in json.loads(out)["checks"]} == {"ok"}, out
    dag = tmp_path / "dags" / f"{prefix}.py"
    dag.write_text(dag.read_text().replace("    ],\n)", "    ],\n    zookeeper_conn_id='zk_dead',\n)"))
    monkeypatch.setenv("AIRFLOW_CONN_ZK_DEAD", json.dumps({"conn_type": "zookeeper", "host": "127.0.0.1",
                                                           "port": unused_port()}))
    (tmp_path / "dags" / "broken.py").write_text("from txdag import TransactionalTopology\nthis is not python\n")
    code, out, _ = run(capsys, "doctor", "--check", "stores", "--timeout", "2", "--json")
    checks = {c["check"]: c for c in json.loads(out)["checks"]}
    assert code == 1, out
    stores = checks[f"stores of {prefix}"]
    assert stores["status"] == "fail" and "not checked" in stores["detail"], stores
    assert "or zk_dead" in stores["fix"]
    assert checks["dag file broken.py"]["status"] == "fail"
    code, out, _ = run(capsys, "doctor", "--check", "stores", "--check", "connections", "--timeout", "2", "--json")
    assert [c["check"] for c in json.loads(out)["checks"]].count("dag file broken.py") == 1, out  # listed once


def test_doctor_checks_the_connections_the_dag_folders_topologies_name(env, capsys, monkeypatch, prefix, tmp_path):
    """Rendering looks up no connection: doctor is where a missing one shows, with the topology and the fix."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[*]"}))
    code, out, _ = run(capsys, "doctor", "--check", "connections", "--json")
    checks = {c["check"]: c for c in json.loads(out)["checks"]}
    assert code == 0, out
    assert set(checks) == {"connection redis_default", "connection zookeeper_default", "connection spark_default"}
    assert checks["connection redis_default"]["detail"] == f"redis, used by {prefix}"
    source = (tmp_path / "dags" / f"{prefix}.py").read_text()
    (tmp_path / "dags" / f"{prefix}.py").write_text(source.replace("    ],\n)", "    ],\n    spark_mode='connect',\n)"))
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", raising=False)
    code, out, _ = run(capsys, "doctor", "--check", "connections")
    assert code == 1
    assert re.search(r"connection spark_connect_default +fail +Airflow connection 'spark_connect_default' is not "
                     r"defined", out), out
    assert f"used by {prefix}" in out
    assert ("connection spark_connect_default: add it in Admin > Connections or set AIRFLOW_CONN_SPARK_CONNECT_DEFAULT "
            "(a spark_connect connection, e.g. sc://") in out

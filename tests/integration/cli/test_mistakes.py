"""The corpus of mistakes, ``txdag`` against real Redis and ZooKeeper: every command driven against each service
unreachable, each wrong password, a missing connection, unknown names and out-of-range numbers, as a careless or
hostile user would. Each case gets its exit code (txdag.cli.exits), a message that names the problem and the fix,
and no traceback. The topology ran five txids: 1-3 committed, 4 failed, 5 failed behind it, one entry rejected.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
import redis
from access import ZK_AUTH, redis_user
from support.cli_project import dag_folder, set_connections
from support.mistakes import check_answer

from txdag.analytics.tweets import tweet_partials
from txdag.cli import exits
from txdag.cli.main import main
from txdag.local import LocalTopology
from txdag.spouts import SpoutContext
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import append_tweets
from txdag.state.marker import default_key
from txdag.topology.topology import load_definitions
from txdag.txid.coordinator import Coordinator
from txdag.txid.replays import replay_lock_path
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore

pytestmark = pytest.mark.usefixtures("airflow_home")
DB = 11
DAG_FILE = """
from dataclasses import dataclass

from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.state import MemoryBackingMap, StateFactory
from txdag.topology.definition import State, StreamsSource, TweetsSource

dag = render(TransactionalTopology(
    "{topo}", source=TweetsSource(prefix="{topo}:", max_transaction_size=40), job="spark_jobs/job.py",
    states=[State("users", namespace="{topo}:users"), State("uh", namespace="{topo}:uh", key_fields=2, separator=":"),
            State("clash", namespace="{topo}:clash")],
), dag_file=__file__)
fresh = render(TransactionalTopology(
    "{topo}_new", source=TweetsSource(prefix="{topo}_new:"), job="spark_jobs/job.py", states=[State("s")]),
    dag_file=__file__)
streams = render(TransactionalTopology(
    "{topo}_streams", source=StreamsSource(streams=["{topo}:s0"]), job="spark_jobs/job.py", states=[State("w")]),
    dag_file=__file__)


@dataclass(repr=False)
class Elsewhere(StateFactory):  # a store of the user's (docs/stores.md)
    table: str

    def backing_map(self, topology, state, key_fields):
        return MemoryBackingMap()


elsewhere = render(TransactionalTopology(
    "{topo}_elsewhere", source=TweetsSource(prefix="{topo}_elsewhere:"), job="spark_jobs/job.py",
    states=[State("kept", store=Elsewhere("t"))]), dag_file=__file__)
"""


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def dead_port() -> int:
    return unused_port()


@pytest.fixture(scope="module")
def web_server(tmp_path_factory) -> Iterator[str]:
    """A web server that is not Airflow (Python's, serving an empty folder: a POST is HTTP 501), as a
    TXDAG_AIRFLOW_URL pointing at the wrong port would reach."""
    folder = tmp_path_factory.mktemp("www")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def conns(monkeypatch, redis_url, zk_hosts, zk_root, prefix, tmp_path):
    """The connections of the test servers (Redis database 11, the test's znode root), as AIRFLOW_CONN_* values."""
    values = set_connections(monkeypatch, redis_url, zk_hosts, zk_root, DB, {"timeout": 2})
    dag_folder(monkeypatch, tmp_path, prefix, DAG_FILE)
    monkeypatch.setenv("TXDAG_AIRFLOW_URL", f"http://127.0.0.1:{unused_port()}")
    monkeypatch.delenv("TXDAG_AIRFLOW_PASSWORD", raising=False)
    return values


@pytest.fixture
def ran(conns, redis_url, zk_hosts, zk_root, prefix, tmp_path):
    """Five txids of 40 tweets (one of them not UTF-8: a rejection): 1-3 committed, 4 failed, 5 failed behind it;
    the state ``clash``'s key holds a Redis string, as if another program used it."""
    client = redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + f"/{DB}")
    tweets = sample_tweets(200, seed=5)
    tweets[7] = b"\xff\xfe @bad #bytes"
    append_tweets(client, tweets, prefix=f"{prefix}:")
    client.set(f"{prefix}:clash", "not a hash")
    definition = load_definitions(tmp_path / "dags")[0][prefix]
    spout = definition.source.build(SpoutContext(prefix, {"redis_default": client}))
    store = TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root)
    topology = LocalTopology(Coordinator(store, spout, max_active_transactions=5), client,
                             {s.name: s.build(client) for s in definition.states if s.name != "clash"}, process)
    emissions = [topology.coordinate(f"run{n}") for n in range(1, 6)]
    for emission in emissions[:3]:
        topology.process(emission)
        topology.commit(emission.tx)
    with pytest.raises(RuntimeError):
        topology.process(emissions[3])
    yield client
    store.client.stop()
    store.client.close()
    leftovers = list(client.scan_iter(match=f"*{prefix}*", count=1000))
    if leftovers:
        client.delete(*leftovers)
    client.close()


def process(records):
    """The users and user-hashtag counts; txid 4 (ids 121..160) fails."""
    if records and int(records[0].id) == 121:
        raise RuntimeError("injected failure in txid 4")
    partials = tweet_partials(r.value for r in records)
    return {"users": partials["users"], "uh": partials["users_hashtags"]}


def set_conn(monkeypatch, conns, name: str, **changes) -> None:
    value = {**conns[name], **changes}
    monkeypatch.setenv(f"AIRFLOW_CONN_{name.upper()}_DEFAULT", json.dumps({k: v for k, v in value.items()
                                                                           if v is not None}))


ENVIRONMENTS = {  # what is wrong with where the command runs
    "": lambda mp, conns, port: None,
    "zk down": lambda mp, conns, port: set_conn(mp, conns, "zookeeper", port=port),
    "zk wrong password": lambda mp, conns, port: set_conn(mp, conns, "zookeeper", password="wrong-password"),
    "zk no password": lambda mp, conns, port: set_conn(mp, conns, "zookeeper", login=None, password=None),
    "redis down": lambda mp, conns, port: set_conn(mp, conns, "redis", port=port),
    "redis wrong password": lambda mp, conns, port: set_conn(mp, conns, "redis", password="wrong-password"),
    "no zk connection": lambda mp, conns, port: mp.delenv("AIRFLOW_CONN_ZOOKEEPER_DEFAULT"),
    "no redis connection": lambda mp, conns, port: mp.delenv("AIRFLOW_CONN_REDIS_DEFAULT"),
    "airflow down": lambda mp, conns, port: mp.setenv("TXDAG_AIRFLOW_PASSWORD", "x"),
    "airflow url not a url": lambda mp, conns, port: (mp.setenv("TXDAG_AIRFLOW_PASSWORD", "x"),
                                                      mp.setenv("TXDAG_AIRFLOW_URL", "airflow.example:8080")),
    "airflow url another server": lambda mp, conns, port: mp.setenv("TXDAG_AIRFLOW_PASSWORD", "x"),  # + web_server
    "redis at another server": lambda mp, conns, port: None,  # its port: web_server's (see the test)
    "no admin login": lambda mp, conns, port: (mp.delenv("TXDAG_REDIS_ADMIN_USER", raising=False),
                                               mp.delenv("TXDAG_REDIS_ADMIN_PASSWORD", raising=False)),
    # these three also change Redis: see arrange()
    "the topologies' redis user": lambda mp, conns, port: None,  # the user `txdag acl redis` sets up, not the admin
    "store behind zookeeper": lambda mp, conns, port: None,  # the commit marker says txid 1, ZooKeeper 3: HALTED
    "entry of txid 5 lost": lambda mp, conns, port: None,  # a source entry of txid 5's batch deleted
    "halted, the topologies' redis user": lambda mp, conns, port: None,  # the two above: the demo's connection
    "a replay in progress": lambda mp, conns, port: None,  # another replay holds the topology's replay lock
    "a replay under way": lambda mp, conns, port: None,  # a replay from 4 is done and Airflow runs run4 again
    "a replay that failed again": lambda mp, conns, port: None,  # ... and run4 failed again
    "a copy first in path order": lambda mp, conns, port: None,  # dags/a_takeover.py: the DAG file copied
}
DOWN_ZK = ["ZooKeeper is not reachable at", "start it with `bash scripts/services.sh start`"]
NOAUTH = ["ZooKeeper refused to list", "(NoAuth)", "give this connection the digest user and password"]
DOWN_REDIS = ["Redis at 127.0.0.1:", "is unreachable", "start it with `bash scripts/services.sh start`"]
WRONGPASS = ["refused user", "check the login and password of the Airflow Redis connection"]
NO_ZK = ["Airflow connection 'zookeeper_default' is not defined", "set AIRFLOW_CONN_ZOOKEEPER_DEFAULT"]
NO_REDIS = ["Airflow connection 'redis_default' is not defined", "set AIRFLOW_CONN_REDIS_DEFAULT"]
UNAVAILABLE, CONFIG, FAILED, REFUSED, USAGE, OK = (exits.UNAVAILABLE, exits.CONFIG, exits.FAILED, exits.REFUSED,
                                                   exits.USAGE, exits.OK)

MISTAKES = [  # the environment, what the user types ({t}: the topology), the exit code, what the answer must say
    # each service unreachable
    ("zk down", "status", UNAVAILABLE, DOWN_ZK),
    ("zk down", "status {t}", UNAVAILABLE, DOWN_ZK),
    ("zk down", "show {t} 2", UNAVAILABLE, DOWN_ZK),
    ("zk down", "replay {t} --from 4 --dry-run", UNAVAILABLE, DOWN_ZK),
    ("zk down", "doctor --check zookeeper --timeout 1", FAILED, ["zookeeper (zookeeper_default)  fail",
                                                                 "ZooKeeper is not reachable", "start it"]),
    ("zk down", "doctor --check stores --timeout 1", FAILED, ["stores of {t}", "fail", "not checked",
                                                              "fix connection redis_default or zookeeper_default"]),
    ("redis down", "doctor --check stores --timeout 1", FAILED, ["stores of {t}", "fail", "not checked"]),
    ("redis at another server", "state get {t} users @a", CONFIG, ["is no Redis (it answered", "give the Redis "
                                                                    "server's"]),
    ("redis at another server", "seed words --count 2", CONFIG, ["is no Redis (it answered"]),
    ("redis down", "state get {t} users @a", UNAVAILABLE, DOWN_REDIS),
    ("redis down", "state top {t} users", UNAVAILABLE, DOWN_REDIS),
    ("redis down", "rejections {t}", UNAVAILABLE, DOWN_REDIS),
    ("redis down", "seed words --count 2", UNAVAILABLE, DOWN_REDIS),
    ("redis down", "state dump {t}:step", UNAVAILABLE, DOWN_REDIS),
    ("redis down", "status {t}", UNAVAILABLE, ["rejections of topology '{t}' unknown: Redis at 127.0.0.1:",
                                               "is unreachable", "start it", "committed up to txid 3"]),
    ("redis down", "status", UNAVAILABLE, ["rejections of topology '{t}' unknown", "is unreachable", "start it"]),
    ("redis down", "reset {t}", UNAVAILABLE, ["Redis stopped answering", "start it"]),
    ("zk down", "reset {t}", UNAVAILABLE, DOWN_ZK),
    ("redis down", "doctor --check redis --timeout 1", FAILED, ["redis (redis_default)  fail", "does not answer",
                                                                "start it"]),
    ("airflow down", "replay {t} --from 4", UNAVAILABLE, ["cannot use Airflow's REST API at http://127.0.0.1:",
                                                          "it does not answer", "start Airflow"]),
    ("airflow down", "pools sync", UNAVAILABLE, ["does not answer", "TXDAG_AIRFLOW_URL"]),
    ("airflow url another server", "status {t}", OK, ["Airflow's run states of topology '{t}' unknown",
                                                     "that server is not Airflow's API server"]),
    ("airflow down", "status {t}", OK, ["txdag status: Airflow's run states of topology '{t}' unknown: cannot use "
                                       "Airflow's REST API at http://127.0.0.1:", "it does not answer",
                                       "start Airflow"]),
    # each wrong (or missing) password
    ("zk wrong password", "status", CONFIG, NOAUTH),
    ("zk wrong password", "status {t}", CONFIG, NOAUTH),
    ("zk wrong password", "show {t} 2", CONFIG, ["ZooKeeper refused access to", "(NoAuth)", "same user and password"]),
    ("zk wrong password", "replay {t} --from 4 --dry-run", CONFIG, ["(NoAuth)", "same user and password"]),
    ("zk wrong password", "doctor --check zookeeper", FAILED, ["zookeeper (zookeeper_default)  fail",
                                                               "ZooKeeper refused to list", "login/password"]),
    ("zk no password", "status", CONFIG, NOAUTH),
    ("zk no password", "show {t} 2", CONFIG, ["(NoAuth)"]),
    ("redis wrong password", "state get {t} users @a", CONFIG, WRONGPASS),
    ("redis wrong password", "state top {t} users", CONFIG, WRONGPASS),
    ("redis wrong password", "rejections {t}", CONFIG, WRONGPASS),
    ("redis wrong password", "seed words --count 2", CONFIG, WRONGPASS),
    ("redis wrong password", "reset {t}", CONFIG, ["Redis refused txdag's login", "check the login and password"]),
    ("zk wrong password", "reset {t} --confirm", CONFIG, ["(NoAuth)", "same user and password"]),
    ("redis wrong password", "status {t}", CONFIG, ["rejections of topology '{t}' unknown", "refused user",
                                                    "check the login and password", "committed up to txid 3"]),
    ("redis wrong password", "state dump {t}:step", CONFIG, WRONGPASS),
    ("redis wrong password", "state migrate {t}:step", CONFIG, WRONGPASS),
    ("redis down", "state migrate {t}:step", UNAVAILABLE, DOWN_REDIS),
    ("", "acl redis {t} --apply redis://admin:wrong@{redis}", CONFIG, ["refused the admin login",
                                                                        "check TXDAG_REDIS_ADMIN_USER"]),
    ("redis down", "acl redis {t} --apply redis://admin:pw@127.0.0.1:{port}", UNAVAILABLE,
     ["is unreachable while logging in as the admin user 'admin'", "check the URL given to --apply"]),
    ("no admin login", "acl redis {t} --apply redis://{redis}", CONFIG, ["--apply needs a Redis admin login",
                                                                        "set TXDAG_REDIS_ADMIN_USER"]),
    ("", "acl redis {t} --password-env TXDAG_NO_SUCH_VARIABLE", CONFIG,
     ["--password-env TXDAG_NO_SUCH_VARIABLE: that environment variable is not set or empty"]),
    ("redis wrong password", "doctor --check redis", FAILED, ["redis (redis_default)  fail", "fix the login/password"]),
    ("airflow url not a url", "replay {t} --from 4", CONFIG, ["TXDAG_AIRFLOW_URL 'airflow.example:8080' is not a URL",
                                                              "http://HOST:8080"]),
    ("", "replay {t} --from 4", CONFIG, ["cannot use Airflow's REST API", "set TXDAG_AIRFLOW_PASSWORD"]),
    ("airflow url another server", "pools sync", CONFIG, ["that server is not Airflow's API server",
                                                          "HTTP 501", "set TXDAG_AIRFLOW_URL"]),
    # a missing connection
    ("no zk connection", "status {t}", CONFIG, NO_ZK),
    ("no zk connection", "show {t} 2", CONFIG, NO_ZK),
    ("no redis connection", "rejections {t}", CONFIG, NO_REDIS),
    ("no redis connection", "state get {t} users @a", CONFIG, NO_REDIS),
    # unknown names
    ("", "status nosuch", FAILED, ["no topology 'nosuch'", "check the name"]),
    ("", "show nosuch 1", FAILED, ["no topology 'nosuch'", "ZooKeeper has no", "check the name"]),
    ("", "replay nosuch --from 1 --dry-run", FAILED, ["no topology 'nosuch'"]),
    ("", "status {t}_new", FAILED, ["topology '{t}_new' has not run yet", "trigger its DAG in Airflow"]),
    ("", "replay {t}_new --from 1 --dry-run", FAILED, ["has not run yet"]),
    ("", "state get nosuch users @a", FAILED, ["topology 'nosuch' is not defined in the DAG folder", "check the name"]),
    ("", "state get {t} nosuch @a", FAILED, ["topology '{t}' has no state 'nosuch' (its states: users, uh, clash)"]),
    ("", "state top {t} nosuch", FAILED, ["has no state 'nosuch'"]),
    ("", "rejections nosuch", FAILED, ["topology 'nosuch' is not defined", "--redis-conn-id"]),
    ("", "state dump {t}:nosuch", FAILED, ["no KeyValueState '{t}:nosuch'", "check the namespace"]),
    ("", "state dump nosuchns", FAILED, ["no KeyValueState 'nosuchns' in Redis at", "check the namespace"]),
    ("", "state migrate {t}:nosuch --key-serializer base64 --value-serializer base64 --from-key-serializer json "
         "--from-value-serializer json", FAILED, ["no KeyValueState '{t}:nosuch' in Redis at", "check the namespace"]),
    ("the topologies' redis user", "state dump nosuchns", FAILED,
     ["no KeyValueState 'nosuchns' that Redis user '{t}-user' at 127.0.0.1:", "may read",
      "check the namespace (TOPOLOGY:STEP)", "give a connection whose user may read it"]),
    ("the topologies' redis user", "state dump {t}:nosuch", FAILED, ["no KeyValueState '{t}:nosuch' in Redis at"]),
    ("", "pools sync nosuch", FAILED, ["no topology nosuch in the DAG folder"]),
    ("", "reset nosuch --confirm", FAILED, ["topology 'nosuch' is not defined in the DAG folder"]),
    ("", "reset {t}", FAILED, ["would reset topology {t}", "nothing deleted: add --confirm to do it"]),
    ("", "topology owner nosuch", FAILED, ["topology 'nosuch' is not defined in the DAG folder"]),
    ("", "topology accept nosuch", FAILED, ["topology 'nosuch' is not defined in the DAG folder"]),
    ("zk down", "topology owner {t}", UNAVAILABLE, DOWN_ZK),
    ("zk wrong password", "topology accept {t}", CONFIG, ["(NoAuth)", "same user and password"]),
    ("no zk connection", "topology owner {t}", CONFIG, NO_ZK),
    ("", "acl redis nosuch", FAILED, ["no topology ['nosuch'] in the DAG folder", "give topology ids defined there"]),
    ("", "acl redis {t} --apply notaurl", USAGE, ["--apply needs a Redis URL redis://HOST:PORT[/DB]",
                                                 "got 'notaurl'"]),
    ("", "acl redis {t} --apply http://admin:secret@{redis}", USAGE, ["got 'http://admin:***@127.0.0.1:"]),
    ("", "acl redis {t} --apply redis://127.0.0.1:99999", USAGE, ["--apply needs a Redis URL redis://HOST:PORT[/DB]",
                                                                  "got 'redis://127.0.0.1:99999'"]),
    # a failed txid leads the status, with its way out
    ("", "status {t}", OK, ["txid 4 FAILED (attempt 1, run run4): RuntimeError: injected failure in txid 4",
                            "failed behind it: txid 5", "way out: fix the cause, then replay it and every later "
                            "txid: txdag replay {t} --from 4"]),
    ("", "status", OK, ["{t}: txid 4 FAILED (attempt 1, run run4): RuntimeError: injected failure",
                        "txdag replay {t} --from 4"]),
    ("", "show {t} 03", OK, ["txid        3", "committed"]),  # leading zeros: a txid znode's name works too
    # a halted topology: status exits 4 (refused) after the report that leads with it
    ("store behind zookeeper", "status {t}", REFUSED, ["HALTED: topology '{t}': ZooKeeper records txid 3 committed",
                                                      "commit marker 1", "txdag reset {t} --confirm"]),
    ("store behind zookeeper", "status", REFUSED, ["{t} HALTED: topology '{t}'", "HALTED"]),
    # the way out it prints runs as printed with the connection the demo sets up (issue 37): no SCAN needed
    ("halted, the topologies' redis user", "status {t}", REFUSED, ["HALTED: topology '{t}'",
                                                                   "txdag reset {t} --confirm"]),
    ("halted, the topologies' redis user", "doctor --check stores", FAILED, ["stores of {t}", "fail",
                                                                             "txdag reset {t} --confirm"]),
    ("halted, the topologies' redis user", "reset {t}", FAILED, ["would reset topology {t}: its records at",
                                                                 "(committed up to txid 3)", "Redis key(s) it wrote",
                                                                 "nothing deleted: add --confirm to do it"]),
    ("halted, the topologies' redis user", "reset {t} --confirm", OK,
     ["reset topology {t}: its records at", "(committed up to txid 3)", "Redis key(s) it wrote; its source is kept; "
      "the next run starts at txid 1, from the source's start"]),
    ("", "show {t} 5", OK, ["txid 5 FAILED behind txid 4 (attempt 1, run run5): txid 4 failed (attempt 1): "
                            "RuntimeError", "txdag replay {t} --from 4"]),
    # two replays of one topology: the second sees the first (issue 37)
    ("a replay in progress", "replay {t} --from 4", REFUSED,
     ["topology '{t}': a replay of it is in progress (txdag replay {t} --from 4 in another terminal)",
      "this one would spend their attempts for nothing", "Wait for it to finish, then see `txdag status {t}`"]),
    ("a replay under way", "replay {t} --from 4", REFUSED,
     ["topology '{t}': a replay from txid 4 cleared the runs of txids 4..5 at ",
      "txid 4's run run4 is queued again in Airflow: the replay is already under way",
      "Wait for it: `txdag status {t}`; replay again only if it fails"]),
    ("a replay that failed again", "replay {t} --from 4", OK, ["txid 4: clearing run run4", "txid 5: clearing run run5",
                                                              "cleared 2 run(s) of topology {t}, from txid 4"]),
    # two DAG files for one topology id: the one Airflow loads, the owner, which to keep; status exits 5 (issue 37)
    ("a copy first in path order", "status {t}", CONFIG,
     ["TWO DAG FILES: topology '{t}' is defined by 2 DAG files: Airflow loads", "a_takeover.py (the first in path "
      "order; the others fail to import), so its runs use", "(no owner recorded). Keep one:", "  keep the file whose "
      "definition you mean to run and delete the others", "the next coordinate records the loaded one as the owner",
      "txid 4 FAILED"]),
    ("a copy first in path order", "status", CONFIG, ["TWO DAG FILES: topology '{t}'", "a_takeover.py"]),
    ("a copy first in path order", "topology owner {t}", OK, ["loaded by Airflow", "a_takeover.py (the first in path "
                                                              "order: its definition runs)", "(fails to import)"]),
    # accept-missing where it has nothing to accept or would break the guarantee
    ("", "accept-missing {t} 2 --confirm", REFUSED, ["txid 2 is committed", "would rewrite history"]),
    ("", "accept-missing {t} 4 --confirm", REFUSED, ["no entry of txid 4's batch is missing in the source now",
                                                     "there is no hole to accept", "txdag replay {t} --from 4"]),
    ("", "accept-missing {t} 5 --confirm", REFUSED, ["no entry of txid 5's batch is missing in the source now",
                                                     "txdag replay {t} --from 4`"]),  # 5 failed behind 4
    ("entry of txid 5 lost", "accept-missing {t} 5 --confirm", OK,
     ["accepted 1 id(s) of txid 5's batch missing in the source (170)", "next: txdag replay {t} --from 4 (the lowest "
      "failed txid: txid 4 failed before txid 5; fix its cause first, see `txdag show {t} 4`)"]),
    ("entry of txid 5 lost", "accept-missing {t} 5", FAILED, ["would accept 1 id(s) of txid 5's batch",
                                                              "add --confirm to do it"]),
    ("", "accept-missing {t}_streams 1 --confirm", REFUSED,
     ["reads a streams source", "entries lost from it cannot be listed one by one", "restore the entries, then "
      "`txdag replay {t}_streams --from 1`", "`txdag reset {t}_streams --confirm`"]),
    ("", "accept-missing nosuch 1", FAILED, ["topology 'nosuch' is not defined in the DAG folder"]),
    ("", "accept-missing {t} 9 --confirm", REFUSED, ["has txids 1..5, so there is no txid 9"]),
    ("", "accept-missing {t}_new 1", FAILED, ["topology '{t}_new' has not run yet"]),
    ("zk down", "accept-missing {t} 4", UNAVAILABLE, DOWN_ZK),
    ("zk wrong password", "accept-missing {t} 4", CONFIG, ["(NoAuth)", "same user and password"]),
    ("redis down", "accept-missing {t} 4 --confirm", UNAVAILABLE, ["Redis at 127.0.0.1:", "is unreachable"]),
    ("airflow down", "accept-missing {t} 4 --confirm --replay", UNAVAILABLE,
     ["cannot use Airflow's REST API", "it does not answer"]),
    # out-of-range numbers and keys
    ("", "show {t} 9", FAILED, ["has no record of txid 9: it is not allocated yet (last txid 5)"]),
    ("", "replay {t} --from 9 --dry-run", REFUSED, ["has txids 1..5, so there is no txid 9 to replay from",
                                                    "give one in 1..5"]),
    ("", "state get {t} uh onlyone", USAGE, ["'onlyone' is not a key of state 'uh'", "2 fields joined by ':'"]),
    ("", "state get {t} users", USAGE, ["state 'users' of topology '{t}'", "give one or more"]),
    # txdag retry: a txid with no task to retry
    ("zk down", "retry {t} 4", UNAVAILABLE, DOWN_ZK),
    ("zk wrong password", "retry {t} 4", CONFIG, ["(NoAuth)", "same user and password"]),
    ("", "retry {t} 9", FAILED, ["has no record of txid 9", "txdag status {t}"]),
    ("", "retry {t} 2", REFUSED, ["txid 2 is committed, so no task of it is running: nothing to do"]),
    ("", "retry {t} 4", REFUSED, ["txid 4 is failed", "txdag replay {t} --from 4"]),
    # a key or a record another program wrote
    ("", "state top {t} clash", CONFIG, ["the Redis key '{t}:clash' of state 'clash' is not a hash (WRONGTYPE)",
                                         "give the state a namespace of its own"]),
    ("", "state get {t} clash k", CONFIG, ["is not a hash (WRONGTYPE)"]),
    # a state in a store of the user's (docs/stores.md): read there
    ("", "state get {t}_elsewhere kept k", CONFIG, ["state 'kept' of topology '{t}_elsewhere' is kept in Elsewhere, "
                                                    "not in Redis: txdag state get reads Redis states only"]),
    ("", "state top {t}_elsewhere kept", CONFIG, ["is kept in Elsewhere, not in Redis"]),
]


@pytest.mark.parametrize("environment, command, code, fragments", MISTAKES,
                         ids=[f"{e or 'ok'}: {c}" for e, c, _, _ in MISTAKES])
def test_a_mistake_gets_its_exit_code_and_a_message_naming_the_fix(ran, conns, monkeypatch, capsys, prefix, tmp_path,
                                                                   dead_port, web_server, environment, command,
                                                                   code, fragments) -> None:
    ENVIRONMENTS[environment](monkeypatch, conns, dead_port)
    if environment == "airflow url another server":
        monkeypatch.setenv("TXDAG_AIRFLOW_URL", web_server)
    if environment == "redis at another server":
        set_conn(monkeypatch, conns, "redis", port=int(web_server.rsplit(":", 1)[1]))
    redis_address = f"{conns['redis']['host']}:{conns['redis']['port']}"
    argv = command.format(t=prefix, port=dead_port, redis=redis_address).split()
    with contextlib.ExitStack() as stack:
        arrange(environment, stack, ran, monkeypatch, conns, prefix, tmp_path)
        capsys.readouterr()  # what the fixtures logged: not the command's answer
        got = main(argv)
    out, err = capsys.readouterr()
    check_answer(got, out + err, code, [f.format(t=prefix) for f in fragments], what=f"{environment}: {command}")
    reports = ("doctor", "reset", "status", "accept-missing")  # report on stdout, and exit non-zero for "not done"
    if got != OK and argv[0] not in reports:  # (status: halted, or Redis unknown: what it read still shows)
        assert out == "", "a failed command prints its one line on stderr, nothing on stdout"


def arrange(environment: str, stack: contextlib.ExitStack, client: redis.Redis, monkeypatch, conns, prefix: str,
            tmp_path) -> None:
    """What an environment changes in Redis, undone by ``stack`` or with the test's keys."""
    if environment in ("the topologies' redis user", "halted, the topologies' redis user"):  # txdag acl redis
        definitions = list(load_definitions(tmp_path / "dags")[0].values())
        stack.enter_context(redis_user(client, f"{prefix}-user", definitions, "pw-" + prefix))
        set_conn(monkeypatch, conns, "redis", login=f"{prefix}-user", password="pw-" + prefix)
    if environment in ("store behind zookeeper", "halted, the topologies' redis user"):
        client.set(default_key(prefix), 1)
    elif environment == "entry of txid 5 lost":
        client.delete(f"{prefix}:170")
    elif environment == "a copy first in path order":
        (tmp_path / "dags" / "a_takeover.py").write_text((tmp_path / "dags" / f"{prefix}.py").read_text())
    elif environment.startswith("a replay"):
        airflow = ReplayingAirflow("failed" if environment.endswith("failed again") else "queued")
        monkeypatch.setattr("txdag.cli.ops.airflow_api", lambda: airflow)
        zk = conns["zookeeper"]
        store = TransactionStore(connect_zk(f"{zk['host']}:{zk['port']}", auth=ZK_AUTH), prefix,
                                 root=zk["extra"]["root"])
        stack.callback(store.client.close)
        stack.callback(store.client.stop)
        if environment == "a replay in progress":
            lock = store.client.Lock(replay_lock_path(store), identifier=f"txdag replay {prefix} --from 4 in another "
                                                                        "terminal")
            assert lock.acquire(timeout=10)
            stack.callback(lock.release)
        else:
            assert main(["replay", prefix, "--from", "4"]) == OK and airflow.cleared == ["run4", "run5"]


class ReplayingAirflow:
    """Airflow's REST API as far as a replay goes: it clears runs, and answers ``state`` for every run."""

    def __init__(self, state: str) -> None:
        self.state, self.cleared = state, []

    def clear_run(self, dag_id: str, run_id: str, **_) -> None:
        self.cleared.append(run_id)

    def run(self, dag_id: str, run_id: str) -> dict:
        return {"dag_run_id": run_id, "state": self.state}


def test_a_corrupt_znode_and_a_value_that_is_not_json_are_named(ran, zk_client, zk_root, prefix, capsys) -> None:
    """A hostile hand in ZooKeeper or Redis: the record or value is named, with how to inspect and fix it."""
    zk_client.set(f"{zk_root}/{prefix}/txids/{2:020d}", b"{not json")
    ran.hset(f"{prefix}:users", "@evil", "not json")
    capsys.readouterr()
    assert main(["show", prefix, "2"]) == CONFIG
    err = capsys.readouterr().err
    check_answer(CONFIG, err, CONFIG, [f"znode {zk_root}/{prefix}/txids/{2:020d} does not hold a valid txdag txid "
                                       "record", "inspect it (zkCli.sh get"], what="a corrupt txid znode")
    assert main(["state", "get", prefix, "users", "@evil"]) == CONFIG
    check_answer(CONFIG, capsys.readouterr().err, CONFIG, ["field '@evil' holds b'not json', which is not JSON"],
                 what="a state value that is not JSON")


def test_a_znode_that_is_no_topology_is_skipped_with_a_warning_and_named_when_asked_for(ran, zk_client, zk_root,
                                                                                       prefix, capsys) -> None:
    """A hostile hand under the root: the list still shows the topologies, the bad one is named on stderr."""
    zk_client.create(f"{zk_root}/garbage", b"{not json")
    zk_client.create(f"{zk_root}/bad name", b"")
    capsys.readouterr()
    assert main(["status"]) == OK
    out, err = capsys.readouterr()
    rows = out.split("\nTOPOLOGY ", 1)[1].splitlines()[1:]  # the table, after the failed txid that leads
    assert [line.split()[0] for line in rows] == [prefix, f"{prefix}_elsewhere", f"{prefix}_new", f"{prefix}_streams"]
    check_answer(OK, err, OK, ["skipped topology 'garbage': znode", "does not hold a valid txdag topology record",
                               "skipped topology 'bad name': topology id 'bad name' cannot name a znode"],
                 what="status over a root with foreign znodes")
    assert main(["status", "garbage"]) == CONFIG
    check_answer(CONFIG, capsys.readouterr().err, CONFIG, ["inspect it (zkCli.sh get", "then restore or delete it"],
                 what="status of a foreign znode")


def test_rejections_lists_each_rejected_entry_with_its_txid_reason_and_time(ran, capsys, prefix) -> None:
    capsys.readouterr()
    assert main(["rejections", prefix]) == OK
    out = capsys.readouterr().out
    head, columns, row = out.splitlines()
    assert head == f"topology {prefix}: 1 rejected entries (Redis hash txdag:rejected:{{{prefix}}}):"
    assert columns.split() == ["ID", "TXID", "ATTEMPT", "WHEN", "REASON"]
    assert row.split()[:3] == ["8", "1", "1"] and "not valid UTF-8" in row and row.split()[3].startswith("20")
    assert main(["rejections", prefix, "--json", "--limit", "0"]) == OK
    assert json.loads(capsys.readouterr().out) == {"topology": prefix, "key": f"txdag:rejected:{{{prefix}}}",
                                                   "total": 1, "rejections": []}

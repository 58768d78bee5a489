"""README shell lines that need only Redis and ZooKeeper, run from the README's own text in bash.

Each test takes its line(s) out of README.md (so an edit to the README is what gets tested) and changes only
what must differ here: the Redis port (the test server's), a key or user name of the test's own.

- the tour's ``eval "$(bash scripts/airflow.sh env)"`` then ``txdag seed``, ``txdag status`` and
  ``txdag state top``: through the console script on PATH, with an AIRFLOW_HOME whose components.env (what
  ``airflow.sh start`` records) points the connections at the test servers (Redis database 13, a znode root of
  the test's own), so no Airflow is needed; between the seed and the reads, two txids of tweets_analytics run in
  this process (txdag.local, the Python reference of its Spark job) where the demo's Airflow runs would;
- the demo's ``source .run/credentials.env; REDISCLI_AUTH=... redis-cli --user txdag-admin ... hgetall``;
- access control's ``txdag acl redis ... | redis-cli --user txdag-admin -p 6391`` (REDISCLI_AUTH from the line
  before it).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
from access import ZK_AUTH

from txdag.analytics.tweets import tweet_partials
from txdag.local import LocalTopology
from txdag.spouts import SpoutContext
from txdag.topology.topology import load_definitions
from txdag.txid.coordinator import Coordinator, Emission
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore

ROOT = Path(__file__).resolve().parents[2]
README = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])  # and docs/
DB = 13  # the tour test's Redis database (tweets_analytics' keys have no prefix): no other test uses it


def readme_line(start: str) -> str:
    """The README command line starting with ``start`` (backslash continuations joined, comment dropped)."""
    text = re.sub(r"\\\n\s*", "", README)
    for line in text.splitlines():
        line = line.strip().removeprefix("$ ")
        if line.startswith(start):
            return re.sub(r"\s+#\s.*$", "", line)
    raise AssertionError(f"README.md and docs/*.md have no command line starting with {start!r}")


def bash(script: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", f"set -eo pipefail\n{script}"], cwd=ROOT, env=env or dict(os.environ),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)


def test_the_tour_reads_and_seeds_through_the_env_of_airflow_sh(redis_url, zk_hosts, zk_root, tmp_path):
    address = urlsplit(redis_url)
    zk_host, zk_port = zk_hosts.split(",")[0].split(":")
    conns = {
        "AIRFLOW_CONN_REDIS_DEFAULT": json.dumps({"conn_type": "redis", "host": address.hostname,
                                                  "port": address.port, "login": address.username,
                                                  "password": address.password, "extra": {"db": DB}}),
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": json.dumps({"conn_type": "zookeeper", "host": zk_host, "port": int(zk_port),
                                                      "login": ZK_AUTH[0], "password": ZK_AUTH[1],
                                                      "extra": {"root": zk_root}}),
        "AIRFLOW__TXDAG__DAGS_FOLDER": str(ROOT / "dags"),
    }
    home = tmp_path / "airflow"
    home.mkdir()
    (home / "components.env").write_text(  # the shape scripts/airflow.sh start writes
        "# recorded by the test\n" + "".join(f"export {k}={shlex.quote(v)}\n" for k, v in conns.items())
        + f"export PATH={shlex.quote(str(ROOT / '.venv' / 'bin'))}:\"$PATH\"\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW_CONN_", "TXDAG_DAGS", "AIRFLOW__TXDAG__DAGS"))}
    env.update(AIRFLOW_HOME=str(home), PATH="/usr/bin:/bin")  # txdag comes from the eval'ed PATH, or not at all
    env_line = readme_line('eval "$(bash scripts/airflow.sh env)"')
    seed = [env_line, "command -v txdag", readme_line("txdag seed tweets_analytics --count 500")]
    read = [env_line, readme_line("txdag status tweets_analytics"),
            readme_line("txdag state top tweets_analytics hashtags")]
    client = redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + f"/{DB}")
    client.flushdb()
    store = TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), "tweets_analytics", root=zk_root)
    try:
        done = bash("\n".join(seed), env)
        assert done.returncode == 0, f"{seed}\n{done.stdout}\n{done.stderr}"
        assert done.stdout.splitlines()[0] == str(ROOT / ".venv" / "bin" / "txdag")
        assert "appended 500 tweets for topology tweets_analytics" in done.stdout
        assert int(client.get("NEXT_WRITE")) == 501

        definition = load_definitions(ROOT / "dags")[0]["tweets_analytics"]
        spout = definition.source.build(SpoutContext("tweets_analytics", {"redis_default": client}))
        coordinator = Coordinator(store, spout, max_active_transactions=2)
        topology = LocalTopology(coordinator, client, {s.name: s.build(client) for s in definition.states},
                                 lambda records: tweet_partials(r.value for r in records),
                                 marker_key=definition.commit_marker)  # as the DAG commits: seed 000's marker
        for run in ("run1", "run2"):
            emission = topology.coordinate(run)
            assert isinstance(emission, Emission)
            topology.process(emission)
            topology.commit(emission.tx)

        done = bash("\n".join(read), env)
        assert done.returncode == 0, f"{read}\n{done.stdout}\n{done.stderr}"
        assert "topology tweets_analytics: committed up to txid 2, last txid 2" in done.stdout
        assert "state hashtags of topology tweets_analytics" in done.stdout
        assert len(done.stdout.split("KEY")[-1].strip().splitlines()) == 1 + 5  # the header line, then -n 5 keys
    finally:
        store.client.stop()
        client.flushdb()
        client.close()


def test_the_demos_redis_cli_line_logs_in_as_the_admin(redis_url, redis_client, prefix):
    line = readme_line("source .run/credentials.env; REDISCLI_AUTH=")
    port = urlsplit(redis_url).port
    line = line.replace("-p 6391", f"-p {port}").replace(" hgetall hashtags", f" hgetall {prefix}:hashtags")
    db1 = redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + "/1")
    db1.hset(f"{prefix}:hashtags", mapping={"#storm": 3})
    try:
        done = bash(line)
        assert done.returncode == 0 and not re.search("AUTH failed|NOAUTH|WRONGPASS", done.stderr), done.stderr
        assert done.stdout.split() == ["#storm", "3"]
    finally:
        db1.delete(f"{prefix}:hashtags")
        db1.close()


def test_the_acl_line_piped_to_redis_cli_creates_the_user(redis_url, redis_client, prefix):
    """As written, with the admin's password where a user would give it (.run/credentials.env in the shell)."""
    line = readme_line("TXDAG_PW=... txdag acl redis")
    user, port = f"{prefix}-user", urlsplit(redis_url).port
    assert " --user txdag " in line and "| redis-cli " in line
    line = (line.replace("TXDAG_PW=...", "TXDAG_PW=acl-line-test-pw").replace(" --user txdag ", f" --user {user} ")
            .replace(" -p 6391", f" -p {port}").replace("txdag acl", ".venv/bin/txdag acl"))
    try:
        done = bash(f"{readme_line('source .run/credentials.env; export REDISCLI_AUTH')}\n{line}")
        detail = f"$ {line}\n{done.stdout}\n{done.stderr}"
        assert done.returncode == 0 and done.stdout.strip() == "OK", detail  # the README says: prints OK
        assert redis_client.execute_command("ACL", "GETUSER", user) is not None, detail
    finally:
        redis_client.execute_command("ACL", "DELUSER", user)


@pytest.mark.parametrize("start", ['eval "$(bash scripts/airflow.sh env)"', "source .run/credentials.env; REDISCLI",
                                   "TXDAG_PW=... txdag acl redis"])
def test_the_readme_still_has_the_lines(start):
    assert readme_line(start)

"""docker/txdag-init.sh, compose's one-shot set-up, run as it is (bash) against the loopback services.

No Docker: the script's hosts come from its environment (compose's values are only its defaults). It runs with
the test Redis (the admin user of .run/credentials.env), the repository's ``dags/`` and an ``airflow api-server``
of this module's own on SQLite (the ``api_server`` fixture). Then the real Redis must have the topologies' user
with exactly the rules ``txdag acl redis`` prints, saved in the server's ACL file (a restart keeps it), that user
may read and write a topology's key and nothing else, and the REST API must list the 1-slot commit pools.
"""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import redis

from txdag.airflow.api import AirflowAPI
from txdag.cli.main import main
from txdag.topology.topology import load_definitions

REPO = Path(__file__).resolve().parents[2]
INIT = REPO / "docker" / "txdag-init.sh"
DAGS = REPO / "dags"


@pytest.fixture(scope="module")
def topologies() -> dict:
    found, errors = load_definitions(DAGS)
    assert found and not errors, errors
    return found


@pytest.fixture
def init_env(api_server, redis_url: str, prefix: str, tmp_path: Path) -> dict[str, str]:
    """The environment of txdag-init.sh outside compose: the loopback Redis and the module's Airflow API."""
    url, password = api_server
    admin = urlsplit(redis_url)
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # the venv's txdag
        "AIRFLOW_HOME": str(tmp_path / "airflow-home"),
        "AIRFLOW__TXDAG__DAGS_FOLDER": str(DAGS),
        "TXDAG_REDIS_HOST": admin.hostname,
        "TXDAG_REDIS_PORT": str(admin.port),
        "TXDAG_REDIS_ADMIN_USER": unquote(admin.username or ""),
        "TXDAG_REDIS_ADMIN_PASSWORD": unquote(admin.password or ""),
        "TXDAG_REDIS_USER": f"{prefix}-init",
        "TXDAG_REDIS_PASSWORD": secrets.token_hex(16),
        "TXDAG_AIRFLOW_URL": url,
        "TXDAG_AIRFLOW_USER": "admin",
        "TXDAG_AIRFLOW_PASSWORD": password,
    }


@pytest.fixture
def admin(redis_url: str, init_env: dict[str, str]):
    """The admin client; the users the test names are deleted afterwards, and the ACL file saved without them."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    users = [init_env["TXDAG_REDIS_USER"], f"{init_env['TXDAG_REDIS_USER']}-ref"]
    yield client
    client.execute_command("ACL", "DELUSER", *users)
    if client.config_get("aclfile").get("aclfile"):
        client.execute_command("ACL", "SAVE")
    client.close()


def run_init(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(INIT)], env=env, capture_output=True, text=True, timeout=300, check=False)


def acl_file_users(client: redis.Redis) -> list[str]:
    """The user names in the server's ACL file (what a restart loads)."""
    path = client.config_get("aclfile")["aclfile"]
    assert path, "the test Redis runs without an ACL file (scripts/services.sh gives it one)"
    return [line.split()[1] for line in Path(path).read_text().splitlines() if line.startswith("user ")]


def the_rules(client: redis.Redis, user: str) -> dict:
    """ACL GETUSER of a user: flags, password hashes, commands, keys, channels, selectors (not the name)."""
    info = client.acl_getuser(user)
    assert info is not None, f"Redis has no user {user!r}"
    return info


def test_the_init_creates_the_redis_user_and_the_commit_pools(init_env, admin, topologies, capsys,
                                                             monkeypatch) -> None:
    user, password = init_env["TXDAG_REDIS_USER"], init_env["TXDAG_REDIS_PASSWORD"]
    api = AirflowAPI(init_env["TXDAG_AIRFLOW_URL"], "admin", init_env["TXDAG_AIRFLOW_PASSWORD"])
    pools = sorted(t.pool for t in topologies.values())
    for pool in pools:  # another test of this module may have created them
        api.request("DELETE", f"/pools/{pool}", ok=(404,))
    assert [p for p in pools if api.pool(p) is not None] == []
    assert admin.acl_getuser(user) is None and user not in acl_file_users(admin)

    done = run_init(init_env)
    assert done.returncode == 0, f"txdag-init.sh exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert "txdag-init: done" in done.stdout
    assert password not in done.stdout + done.stderr and init_env["TXDAG_REDIS_ADMIN_PASSWORD"] not in done.stdout

    # The user has exactly the rules `txdag acl redis` prints for the DAG folder (a reference user made from the
    # printed line has the same ACL GETUSER), its password included.
    monkeypatch.setenv("TXDAG_TEST_INIT_PW", password)
    assert main(["acl", "redis", "--dags", str(DAGS), "--user", f"{user}-ref", "--password-env",
                 "TXDAG_TEST_INIT_PW", "--source-write"]) == 0
    line = shlex.split(capsys.readouterr().out.strip())
    assert line[:3] == ["ACL", "SETUSER", f"{user}-ref"]
    admin.execute_command(*line)
    assert the_rules(admin, user) == the_rules(admin, f"{user}-ref")
    assert any(f"~txdag:stage:{{{name}}}:*" in the_rules(admin, user)["keys"] for name in topologies)

    # Saved in the ACL file: a restart of Redis loads it.
    assert user in acl_file_users(admin)

    # The user logs in with its password, reads and writes a topology's key, and is refused any other key.
    name = sorted(topologies)[0]
    mine, other = f"txdag:stage:{{{name}}}:{user}-probe", f"{user}-not-a-topology-key"
    kwargs = admin.connection_pool.connection_kwargs
    client = redis.Redis(host=kwargs["host"], port=kwargs["port"], username=user, password=password)
    try:
        assert client.set(mine, b"1") and client.get(mine) == b"1"
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.set(other, b"1")
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.get(other)
    finally:
        client.close()
        admin.delete(mine)
    assert admin.exists(other) == 0

    # The commit pools exist, one slot each.
    for pool in pools:
        got = api.pool(pool)
        assert got is not None, f"pool {pool} was not created"
        assert (got["slots"], got["include_deferred"]) == (1, False), got


def test_the_init_stops_naming_the_step_that_failed(init_env, admin) -> None:
    env = {**init_env, "TXDAG_REDIS_ADMIN_PASSWORD": "not-the-admin-password"}
    failed = run_init(env)
    assert failed.returncode == 1, f"exit {failed.returncode}:\n{failed.stdout}\n{failed.stderr}"
    assert "txdag-init: error: step 1/2 failed" in failed.stderr
    assert "refused the admin login" in failed.stderr and "step 2/2" not in failed.stdout
    assert "not-the-admin-password" not in failed.stdout + failed.stderr
    assert admin.acl_getuser(init_env["TXDAG_REDIS_USER"]) is None

    env = {**init_env, "TXDAG_AIRFLOW_PASSWORD": "not-the-airflow-password"}
    failed = run_init(env)
    assert failed.returncode == 1, f"exit {failed.returncode}:\n{failed.stdout}\n{failed.stderr}"
    assert "txdag-init: error: step 2/2 failed" in failed.stderr
    assert "cannot use Airflow's REST API" in failed.stderr and "txdag-init: done" not in failed.stdout

    env = {**init_env}
    del env["TXDAG_REDIS_PASSWORD"]
    failed = run_init(env)
    assert failed.returncode == 1 and "TXDAG_REDIS_PASSWORD is not set" in failed.stderr

"""docker-compose.yaml, checked statically (Docker does not run on the development machines).

It is valid against the Compose Specification's JSON schema (check-jsonschema's vendored copy); every service has
an image or a build and a health check; the ZooKeeper ensemble's nodes list each other; a Kafka broker in KRaft mode
that keeps its topics on a volume, and the Kafka connection pointing at it; a Spark master and two workers; the
Airflow components with the project's folders mounted and the FAB auth manager; the init scripts it runs exist
and get the environment they need; Redis keeps its ACL file and append-only file on its volume; the connections it
sets are the ones the DAGs use, with the types they expect; the ports the README promises are published; every
path it mounts or builds from exists. tests/integration/test_compose_redis.py runs the redis service's command,
tests/e2e/test_compose_init.py runs docker/txdag-init.sh.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from txdag.topology.topology import load_definitions

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yaml"
README = ROOT / "README.md"
README_SECTION = "## Running it with docker compose"
AIRFLOW_COMMANDS = {"api-server": "airflow-apiserver", "scheduler": "airflow-scheduler",
                    "dag-processor": "airflow-dag-processor", "triggerer": "airflow-triggerer",
                    "celery worker": "airflow-worker"}
MOUNTED_FOLDERS = ("dags", "plugins", "include", "spark_jobs")
ZK_SERVICES = ("zk1", "zk2", "zk3")
FAB_AUTH_MANAGER = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
DOCKER_DIR_IN_CONTAINERS = "/opt/txdag/docker"
_VAR = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::?-(?P<default>[^}]*))?\}|\$(?P<bare>[A-Za-z_]\w*)")


def interpolate(value: str) -> str:
    """Compose's interpolation with nothing set: ``${VAR:-default}`` -> default, ``${VAR}`` -> "", ``$$`` -> $."""
    parts = value.split("$$")
    return "$".join(_VAR.sub(lambda m: m.group("default") or "", part) for part in parts)


@pytest.fixture(scope="module")
def compose() -> dict:
    assert COMPOSE.is_file(), f"{COMPOSE} is missing"
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), "no services: mapping"
    return data


@pytest.fixture(scope="module")
def services(compose) -> dict[str, dict]:
    return compose["services"]


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: interpolate(str(v)) for k, v in env.items()}


def command_of(service: dict) -> str:
    command = service.get("command") or ""
    return interpolate(" ".join(command) if isinstance(command, list) else str(command))


def bind_mounts(service: dict) -> dict[str, str]:
    """Target -> host path of the service's bind mounts (short syntax ``./x:/y[:ro]`` or long syntax)."""
    mounts = {}
    for volume in service.get("volumes") or []:
        if isinstance(volume, dict):
            if volume.get("type") == "bind":
                mounts[volume["target"]] = volume["source"]
            continue
        source, target = volume.split(":")[:2]
        if source.startswith((".", "/")):
            mounts[target] = source
    return mounts


def published(service: dict) -> list[tuple[str, int, int]]:
    """(host ip or "", host port, container port) of each published port."""
    out = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            out.append((port.get("host_ip", ""), int(interpolate(str(port["published"]))), int(port["target"])))
            continue
        parts = interpolate(str(port)).split(":")
        host_ip = parts[0] if len(parts) == 3 else ""
        out.append((host_ip, int(parts[-2]), int(parts[-1].split("/")[0])))
    return out


def airflow_services(services: dict) -> dict[str, dict]:
    """The services that run an Airflow component (their command is one)."""
    return {name: s for name, s in services.items()
            if any(command_of(s) == c for c in AIRFLOW_COMMANDS)}


def test_the_compose_file_parses_into_the_whole_system(services):
    expected = {"redis", *ZK_SERVICES, "kafka", "spark-master", "postgres", *AIRFLOW_COMMANDS.values()}
    missing = expected - set(services)
    assert not missing, f"services missing from docker-compose.yaml: {sorted(missing)}"


def test_every_service_has_an_image_or_a_build_and_a_health_check(services):
    for name, service in services.items():
        assert service.get("image") or service.get("build"), f"service {name} has neither image nor build"
        check = service.get("healthcheck") or {}
        assert check.get("test") and not check.get("disable"), f"service {name} has no health check"


def test_the_images_built_have_their_dockerfile_and_context(services):
    builds = [(name, s["build"]) for name, s in services.items() if s.get("build")]
    assert builds, "no service builds the txdag image"
    for name, build in builds:
        build = {"context": build} if isinstance(build, str) else build
        context = ROOT / build.get("context", ".")
        dockerfile = context / build.get("dockerfile", "Dockerfile")
        assert context.is_dir(), f"service {name}: build context {context} does not exist"
        assert dockerfile.is_file(), f"service {name}: Dockerfile {dockerfile} does not exist"
        text = dockerfile.read_text()
        assert re.search(r"^FROM apache/airflow:\$\{AIRFLOW_VERSION\}-python3\.11", text, re.M), dockerfile
        assert "pyspark==" not in text, "pin pyspark in pyproject.toml, not the image"
        assert "/opt/txdag" in text and "pip install" in text, f"{dockerfile} does not install txdag"


def test_the_zookeeper_nodes_form_one_ensemble_listing_each_other(services):
    ids = {}
    for name in ZK_SERVICES:
        service = services[name]
        assert str(service.get("image", "")).startswith("zookeeper:3.9"), f"{name}: image {service.get('image')}"
        env = env_of(service)
        ids[name] = env.get("ZOO_MY_ID")
        servers = dict(re.findall(r"server\.(\d+)=([\w.-]+):2888:3888", env.get("ZOO_SERVERS", "")))
        assert servers == {"1": "zk1", "2": "zk2", "3": "zk3"}, f"{name}: ZOO_SERVERS lists {servers}"
    assert sorted(ids.values()) == ["1", "2", "3"], f"ZOO_MY_ID of the nodes: {ids}"
    for name in ZK_SERVICES:
        assert ids[name] == name[-1], f"{name} has ZOO_MY_ID {ids[name]}, but ZOO_SERVERS gives it {name[-1]}"


def test_the_zookeeper_nodes_keep_their_znodes_on_volumes(compose, services):
    """The image keeps snapshots in /data and the transaction log in /datalog: both on named volumes, so that a
    restart (or a new container) keeps the txids; autopurge bounds them."""
    for name in ZK_SERVICES:
        volumes = {v.split(":")[1]: v.split(":")[0] for v in services[name].get("volumes", []) if isinstance(v, str)}
        for target in ("/data", "/datalog"):
            assert target in volumes, f"{name}: {target} is not on a volume"
            assert volumes[target] in compose.get("volumes", {}), f"{name}: {volumes[target]} is not a named volume"
        env = env_of(services[name])
        assert int(env.get("ZOO_AUTOPURGE_PURGEINTERVAL", 0)) >= 1, f"{name}: autopurge is off"
        assert int(env.get("ZOO_AUTOPURGE_SNAPRETAINCOUNT", 0)) >= 3, f"{name}: autopurge keeps < 3 snapshots"


def test_kafka_is_one_kraft_node_that_keeps_its_topics_on_a_volume(compose, services):
    kafka = services["kafka"]
    assert re.match(r"apache/kafka:4\.\d+\.\d+$", str(kafka.get("image", ""))), f"kafka: image {kafka.get('image')}"
    env = env_of(kafka)
    assert set(env.get("KAFKA_PROCESS_ROLES", "").split(",")) == {"broker", "controller"}, "not a combined KRaft node"
    assert env.get("KAFKA_CONTROLLER_QUORUM_VOTERS") == f"{env.get('KAFKA_NODE_ID')}@kafka:9093", "its own voter"
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", env.get("CLUSTER_ID", "")), "CLUSTER_ID: 16 bytes, base64url"
    listeners = dict(re.findall(r"(\w+)://[\w.]*:(\d+)", env.get("KAFKA_LISTENERS", "")))
    advertised = dict(re.findall(r"(\w+)://([\w.-]+:\d+)", env.get("KAFKA_ADVERTISED_LISTENERS", "")))
    assert advertised.get(env.get("KAFKA_INTER_BROKER_LISTENER_NAME", "")) == "kafka:9092", advertised
    assert env.get("KAFKA_CONTROLLER_LISTENER_NAMES") in listeners, "no controller listener"
    host = [name for name, address in advertised.items() if address.startswith("127.0.0.1:")]
    assert host, f"no listener advertised to the host: {advertised}"
    port = int(advertised[host[0]].split(":")[1])
    assert ("127.0.0.1", port, int(listeners[host[0]])) in published(kafka), "the host listener is not published"
    volumes = {v.split(":")[1]: v.split(":")[0] for v in kafka.get("volumes", []) if isinstance(v, str)}
    log_dirs = env.get("KAFKA_LOG_DIRS", "")
    assert volumes.get(log_dirs) in compose.get("volumes", {}), f"kafka: {log_dirs!r} is not on a named volume"
    # what the broker acknowledged is on disk (as Redis's appendfsync always); topics are created, not guessed
    assert env.get("KAFKA_LOG_FLUSH_INTERVAL_MESSAGES") == "1", "kafka: a write is acknowledged before its fsync"
    assert env.get("KAFKA_AUTO_CREATE_TOPICS_ENABLE") == "false"
    for key in ("OFFSETS_TOPIC_REPLICATION_FACTOR", "TRANSACTION_STATE_LOG_REPLICATION_FACTOR"):
        assert env.get(f"KAFKA_{key}") == "1", f"kafka: {key} above 1 on one node: the topic could not be created"
    for name, service in airflow_services(services).items():
        assert service["depends_on"]["kafka"]["condition"] == "service_healthy", f"{name} does not wait for kafka"


def test_the_kafka_connection_is_the_providers_type_and_points_at_the_broker(services):
    from airflow.models.connection import Connection

    for name, service in airflow_services(services).items():
        value = env_of(service).get("AIRFLOW_CONN_KAFKA_DEFAULT", "")
        assert value.startswith("{"), f"{name}: AIRFLOW_CONN_KAFKA_DEFAULT is not set (as JSON)"
        conn = Connection.from_json(value, conn_id="kafka_default")
        assert conn.conn_type == "kafka", f"{name}: kafka_default has type {conn.conn_type!r}"
        # the provider's hook takes the client's config from the extra; bootstrap.servers is required
        servers = conn.extra_dejson.get("bootstrap.servers", "")
        assert servers == "kafka:9092", f"{name}: bootstrap.servers {servers!r} is not the kafka service's listener"


def test_a_spark_master_and_two_workers(services):
    master = services["spark-master"]
    assert "org.apache.spark.deploy.master.Master" in command_of(master)
    assert any(container == 7077 for _, _, container in published(master)) or "7077" in command_of(master)
    workers = [name for name, s in services.items()
               if "org.apache.spark.deploy.worker.Worker" in command_of(s)]
    assert len(workers) == 2, f"Spark workers: {workers}"
    for name in workers:
        assert "spark://spark-master:7077" in command_of(services[name]), f"{name} does not join spark-master"
        assert bind_mounts(services[name]).get("/opt/txdag/include") == "./include", \
            f"{name}: the executors need txdag: mount ./include at /opt/txdag/include"
        assert env_of(services[name]).get("PYTHONPATH") == "/opt/txdag/include", f"{name}: PYTHONPATH"


def test_the_airflow_components_run_with_celery_and_the_project_mounted(services):
    running = {command_of(s): name for name, s in airflow_services(services).items()}
    assert set(running) == set(AIRFLOW_COMMANDS), f"Airflow components: {running}"
    for name, service in airflow_services(services).items():
        env = env_of(service)
        assert env.get("AIRFLOW__CORE__EXECUTOR") == "CeleryExecutor", f"{name}: executor"
        broker = env.get("AIRFLOW__CELERY__BROKER_URL", "")
        assert re.match(r"redis://[^@]*@([\w-]+):\d+/\d+$", broker), f"{name}: broker {broker!r}"
        assert re.match(r"redis://[^@]*@([\w-]+)", broker).group(1) in services, f"{name}: no broker service"
        backend = env.get("AIRFLOW__CELERY__RESULT_BACKEND", "")
        assert backend.startswith("db+postgresql://") and "@postgres:" in backend, f"{name}: backend {backend!r}"
        assert "@postgres:" in env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", ""), f"{name}: metadata database"
        mounts = bind_mounts(service)
        dags_folder = env.get("AIRFLOW__CORE__DAGS_FOLDER", "/opt/airflow/dags")
        for folder in MOUNTED_FOLDERS:
            assert f"./{folder}" in mounts.values(), f"{name} does not mount ./{folder}"
        assert mounts.get(dags_folder) == "./dags", f"{name}: ./dags is not at the DAG folder {dags_folder}"
        # a job path is relative to the folder above dags/ (TransactionalTopology.job_path)
        assert mounts.get(str(Path(dags_folder).parent / "spark_jobs")) == "./spark_jobs", f"{name}: spark_jobs"
        assert mounts.get(env.get("AIRFLOW__CORE__PLUGINS_FOLDER", "/opt/airflow/plugins")) == "./plugins"
        # Airflow's local settings (the image's AIRFLOW_HOME is /opt/airflow): the Celery workers preload the client
        assert mounts.get("/opt/airflow/config") == "./config", f"{name}: ./config is not at AIRFLOW_HOME/config"
        assert (ROOT / "config" / "airflow_local_settings.py").is_file()


def test_the_commit_pools_are_created_once_the_api_server_is_healthy(services):
    init = [name for name, s in services.items()
            if "txdag-init.sh" in command_of(s) or "pools sync" in command_of(s)]
    assert init, "no service runs txdag pools sync"
    for name in init:
        assert services[name]["depends_on"]["airflow-apiserver"]["condition"] == "service_healthy"
        script = ROOT / "docker" / "txdag-init.sh"
        assert script.is_file() and "txdag pools sync" in script.read_text()


def test_the_scripts_the_services_run_are_mounted_where_they_are_run(services):
    for name, service in services.items():
        for path in re.findall(rf"{DOCKER_DIR_IN_CONTAINERS}/([\w.-]+)", command_of(service)):
            assert bind_mounts(service).get(DOCKER_DIR_IN_CONTAINERS) == "./docker", f"{name}: ./docker not mounted"
            assert (ROOT / "docker" / path).is_file(), f"{name} runs docker/{path}, which does not exist"


def test_txdag_init_applies_the_redis_user_itself_and_gets_what_it_needs(services):
    script = (ROOT / "docker" / "txdag-init.sh").read_text()
    # no Python heredoc fed by a pipe (its stdin is the heredoc, not the pipe): txdag applies the ACL itself
    assert "<<" not in script and "python" not in script, "txdag-init.sh pipes into an interpreter"
    assert re.search(r"txdag acl redis .*--apply", script.replace("\\\n", " ")), "txdag acl redis --apply"
    assert "set -euo pipefail" in script
    env = env_of(services["txdag-init"])
    for var in ("TXDAG_REDIS_ADMIN_USER", "TXDAG_REDIS_ADMIN_PASSWORD", "TXDAG_REDIS_USER", "TXDAG_REDIS_PASSWORD",
                "TXDAG_AIRFLOW_URL", "TXDAG_AIRFLOW_USER", "TXDAG_AIRFLOW_PASSWORD", "AIRFLOW__TXDAG__DAGS_FOLDER"):
        assert env.get(var), f"txdag-init: {var} is not set"
        assert var in script, f"txdag-init.sh does not read {var}"
    # the Redis user it creates is the one the tasks log in as
    redis_conn = env["AIRFLOW_CONN_REDIS_DEFAULT"]
    assert f'"login": "{env["TXDAG_REDIS_USER"]}"' in redis_conn
    assert f'"password": "{env["TXDAG_REDIS_PASSWORD"]}"' in redis_conn
    host = re.search(r"TXDAG_REDIS_HOST:-([\w-]+)", script).group(1)
    assert host in services and env.get("TXDAG_REDIS_HOST", host) == "redis", f"txdag-init's Redis: {host}"
    redis_env = env_of(services["redis"])
    for var in ("TXDAG_REDIS_ADMIN_USER", "TXDAG_REDIS_ADMIN_PASSWORD"):
        assert env[var] == redis_env[var], f"txdag-init's {var} is not the redis service's"


def test_redis_keeps_its_acl_file_and_its_data_on_its_volume(services):
    redis = services["redis"]
    command = command_of(redis)
    volumes = {v.split(":")[1]: v.split(":")[0] for v in redis.get("volumes", []) if isinstance(v, str)}
    data_dir = re.search(r"--dir (\S+)", command).group(1)
    acl_file = re.search(r"\bf=(\S+)", command).group(1)
    assert "--aclfile \"$f\"" in command and "--appendonly yes" in command, command
    # what Redis acknowledged is on disk before txdag records the commit in ZooKeeper
    assert re.search(r"--appendfsync always\b", command), f"Redis must fsync before it answers: {command}"
    assert not re.search(r"--appendfsync (?!always\b)", command) and "--appendonly no" not in command, command
    # the ACL file is not rewritten from scratch at a start: its other users (txdag-init's) are kept
    assert re.search(r"grep -v -e '\^user default ' -e \"\^user \$TXDAG_REDIS_ADMIN_USER \" \"\$f\"", command), command
    assert data_dir in volumes and not volumes[data_dir].startswith((".", "/")), f"--dir {data_dir}: no volume"
    assert str(Path(acl_file).parent) == data_dir, f"the ACL file {acl_file} is not on the volume ({data_dir})"
    assert "docker-entrypoint.sh redis-server" in command, "redis-server runs as root (bypasses the entrypoint)"


def test_the_airflow_components_use_the_fab_auth_manager(services):
    for name, service in services.items():
        env = env_of(service)
        if "AIRFLOW__CORE__EXECUTOR" not in env:
            continue
        assert env.get("AIRFLOW__CORE__AUTH_MANAGER") == FAB_AUTH_MANAGER, f"{name}: auth manager"
        assert not [k for k in env if "SIMPLE_AUTH_MANAGER" in k], f"{name}: Simple auth manager settings left"
        assert env.get("TXDAG_AIRFLOW_PASSWORD") == interpolate("${AIRFLOW_ADMIN_PASSWORD:-changeme}"), name
    dockerfile = (ROOT / "docker" / "airflow.Dockerfile").read_text()
    assert re.search(r"pip install .*apache-airflow-providers-fab", dockerfile), "the image lacks the FAB provider"
    init = services["airflow-init"]
    assert "airflow-init.sh" in command_of(init)
    script = (ROOT / "docker" / "airflow-init.sh").read_text()
    env = env_of(init)
    assert "airflow db migrate" in script
    create = re.search(r"airflow users create (.*?)\)\"", script.replace("\\\n", " "), re.S)
    assert create, "airflow-init.sh creates no FAB user"
    assert "--role Admin" in create.group(1) and '--password "$TXDAG_AIRFLOW_PASSWORD"' in create.group(1)
    assert '--username "$LOGIN"' in create.group(1) and 'LOGIN="${TXDAG_AIRFLOW_USER:-admin}"' in script
    assert env.get("TXDAG_AIRFLOW_USER", "admin") == env_of(services["txdag-init"])["TXDAG_AIRFLOW_USER"]
    assert "airflow users reset-password" in script, "a changed AIRFLOW_ADMIN_PASSWORD would not be applied"


def check_jsonschema() -> str:
    found = Path(sys.executable).parent / "check-jsonschema"
    path = str(found) if found.exists() else shutil.which("check-jsonschema")
    assert path, "check-jsonschema is not installed: pip install -e '.[dev]' (bash scripts/setup.sh)"
    return path


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([check_jsonschema(), "--builtin-schema", "vendor.compose-spec", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_file_is_valid_against_the_compose_specification_schema():
    done = validate(COMPOSE)
    assert done.returncode == 0, f"docker-compose.yaml is not valid compose:\n{done.stdout}\n{done.stderr}"


def test_the_schema_check_catches_a_broken_file(tmp_path):
    text = COMPOSE.read_text()
    broken = tmp_path / "docker-compose.yaml"
    broken.write_text(text.replace("\n    command: api-server\n", "\n    comand: api-server\n", 1))
    assert broken.read_text() != text
    done = validate(broken)
    assert done.returncode != 0 and "comand" in done.stdout + done.stderr, done.stdout + done.stderr


def test_the_connections_are_the_ones_the_dags_use_with_their_types(services):
    from airflow.models.connection import Connection

    topologies, errors = load_definitions(ROOT / "dags")
    assert topologies and not errors, errors
    needed: dict[str, str] = {}
    for topology in topologies.values():
        needed.update(topology.conn_ids())
        needed[topology.spark_connect_conn_id] = "spark_connect"  # a topology with spark_mode="connect" uses it
        needed[topology.spark_conn_id] = "spark"
    for name, service in airflow_services(services).items():
        env = env_of(service)
        for conn_id, kind in needed.items():
            value = env.get(f"AIRFLOW_CONN_{conn_id.upper()}")
            assert value, f"{name}: AIRFLOW_CONN_{conn_id.upper()} is not set ({kind}, used by the DAGs)"
            conn = Connection.from_json(value, conn_id=conn_id) if value.startswith("{") else \
                Connection(conn_id=conn_id, uri=value)
            assert conn.conn_type == kind, f"{name}: {conn_id} has type {conn.conn_type!r}, the DAGs need {kind!r}"
            hosts = [h.split(":")[0] for h in (conn.host or "").replace("spark://", "").split(",")]
            for host in hosts:
                assert host in services, f"{name}: {conn_id} points at {host!r}, which no service is"
            if kind == "zookeeper":
                assert sorted(hosts) == list(ZK_SERVICES) and conn.extra_dejson.get("root") == "/txdag"
                assert conn.login and conn.password, f"{conn_id}: digest login/password"
            if kind == "redis":
                assert conn.login and conn.password, f"{conn_id}: the Redis ACL user and password"
            if kind == "spark":
                assert conn.host == "spark://spark-master:7077", f"{conn_id}: {conn.host}"


def test_the_ports_the_readme_promises_are_published(services):
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]  # the section may live in docs/
    text = next((p.read_text() for p in pages if README_SECTION in p.read_text()), "")
    assert README_SECTION in text, f"README has no section {README_SECTION!r}"
    section = text.split(README_SECTION, 1)[1].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("|") and "`" in r]
    promised = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        names = re.findall(r"`([\w-]+)`", cells[1])
        addresses = re.findall(r"`(?:\w+://)?([\w.]+):(\d+)", cells[2])
        if len(names) == 1:
            names = names * len(addresses)
        assert len(names) == len(addresses) and names, f"README row {row!r}: services and addresses do not pair"
        promised += [(name, host, int(port)) for name, (host, port) in zip(names, addresses)]
    assert len(promised) >= 6, f"README promises only {promised}"
    for name, host, port in promised:
        assert name in services, f"README names service {name}, which docker-compose.yaml does not have"
        ports = published(services[name])
        match = [p for p in ports if p[1] == port]
        assert match, f"README promises {host}:{port} for {name}; it publishes {ports}"
        if host == "127.0.0.1":
            assert match[0][0] == "127.0.0.1", f"{name}: {port} is published on every interface, not loopback"


def test_every_mounted_path_exists_in_the_repository(services):
    for name, service in services.items():
        for target, source in bind_mounts(service).items():
            assert (ROOT / source).exists(), f"service {name} mounts {source} (at {target}), which does not exist"


def test_the_passwords_are_placeholders_to_change(compose):
    text = COMPOSE.read_text()
    secrets = re.findall(r"\$\{(\w*(?:PASSWORD|SECRET|KEY)\w*)(?::-([^}]*))?\}", text)
    assert secrets, "no password variables"
    for name, default in secrets:
        assert default == "" or default.startswith("changeme"), f"${{{name}}} defaults to {default!r}: a placeholder"


def test_interpolation_as_compose_does_it():
    assert interpolate("a${X:-b}c${Y}d$$HOME") == "abcd$HOME"

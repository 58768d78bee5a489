"""Where txdag runs, and so which fix an error message should name.

An error that says "start it with `bash scripts/services.sh start`" helps in a checkout of the repository and
misleads everywhere else. Three kinds of deployment, each with its own fixes:

- ``checkout``: the package is imported from a clone of the repository (an editable install), so
  ``scripts/services.sh`` sits at the root next to ``include/txdag``: the dev scripts are the fix.
- ``container``: the image of ``docker/airflow.Dockerfile`` run by ``docker-compose.yaml``, which says so with
  ``TXDAG_DEPLOYMENT=container`` in its environment: the compose services are the fix. Being in *a* container
  is not enough (``/.dockerenv`` exists on development and CI machines that are containers themselves, where the
  fix is theirs, not docker-compose.yaml's).
- ``installed``: a wheel installed next to an Airflow of one's own (``pip install txdag``): the fix is in that
  Airflow's connections and the servers it points at; there are no scripts to name.

``TXDAG_DEPLOYMENT`` (one of the three) overrides the detection of a checkout too. Only messages depend on it,
never behaviour, except the defaults of :func:`airflow_home` and :func:`airflow_url` (where the REST API and its
password are).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from txdag.defaults import ZK_ROOT

Kind = Literal["checkout", "container", "installed"]
KINDS: tuple[Kind, ...] = ("checkout", "container", "installed")
ENV = "TXDAG_DEPLOYMENT"
SERVICES = ("redis", "redis_cluster", "zookeeper", "kafka", "spark_connect", "airflow", "postgres")
DEV_AIRFLOW_PORT = "8791"  # scripts/airflow.sh's default TXDAG_AIRFLOW_PORT


def repo_root() -> Path | None:
    """The root of the checkout this package is imported from, or None (a wheel in site-packages)."""
    root = Path(__file__).resolve().parents[2]  # <root>/include/txdag/hints.py
    return root if (root / "scripts" / "services.sh").is_file() else None


def deployment() -> Kind:
    """``checkout``, ``container`` or ``installed`` (see the module's docstring)."""
    forced = os.environ.get(ENV, "").strip().lower()
    if forced in KINDS:
        return forced
    return "checkout" if repo_root() is not None else "installed"


_START: dict[Kind, dict[str, str]] = {
    "checkout": {
        "redis": "start it with `bash scripts/services.sh start`",
        "redis_cluster": "start its nodes with `bash scripts/cluster.sh start redis` (the loopback cluster)",
        "zookeeper": "start it with `bash scripts/services.sh start`",
        "kafka": "start it with `bash scripts/services.sh start`",
        "spark_connect": "start it with `bash scripts/spark-connect.sh start`",
        "airflow": "start Airflow (bash scripts/airflow.sh start)",
        "postgres": "start it with `bash scripts/postgres.sh start`",
    },
    "container": {
        "redis": "start it on the Docker host with `docker compose up -d redis`",
        "redis_cluster": "start that Redis Cluster's nodes (`docker compose` runs a single Redis, no cluster)",
        "zookeeper": "start it on the Docker host with `docker compose up -d zk1 zk2 zk3`",
        "kafka": "start it on the Docker host with `docker compose up -d kafka`",
        "spark_connect": "start it on the Docker host with `docker compose up -d spark-connect`",
        "airflow": "start Airflow (on the Docker host: docker compose up -d; `docker compose ps` shows what is down)",
        "postgres": "start it on the Docker host with `docker compose up -d postgres`",
    },
    "installed": {
        "redis": "start that Redis server",
        "redis_cluster": "start that Redis Cluster's nodes",
        "zookeeper": "start those ZooKeeper servers",
        "kafka": "start that Kafka broker",
        "spark_connect": "start a Spark Connect server at that address (sbin/start-connect-server.sh of a Spark "
                         "distribution)",
        "airflow": "start Airflow's components (airflow api-server, scheduler, dag-processor, triggerer)",
        "postgres": "start that PostgreSQL server",
    },
}

_ENV: dict[Kind, str] = {
    "checkout": 'eval "$(bash scripts/airflow.sh env)" on a development machine',
    "container": "the services of docker-compose.yaml set them in their environment: run txdag in one of them, "
                 "e.g. `docker compose exec airflow-worker txdag ...`",
    "installed": "run txdag where the `airflow` CLI sees the same connections as the scheduler: "
                 "the same AIRFLOW_HOME, AIRFLOW_CONN_* variables or secrets backend",
}


_SPARK_CONNECT_EXAMPLE: dict[Kind, str] = {
    "checkout": "sc://127.0.0.1:15092 (`bash scripts/spark-connect.sh start` runs one there)",
    "container": "sc://spark-connect:15002 (the spark-connect service of docker-compose.yaml)",
    "installed": "sc://HOST:15002 (a Spark Connect server: sbin/start-connect-server.sh of a Spark distribution)",
}


HOW_TO_ADD = {
    "redis": "redis://HOST:PORT (extra {\"db\": N} for another database)",
    "zookeeper": f"zookeeper://HOST:PORT (extra {{\"root\": \"{ZK_ROOT}\"}})",
    "spark": "spark://local[*], or your master (spark://host:7077, yarn, k8s://...)",
    "kafka": "'{\"conn_type\": \"kafka\", \"extra\": {\"bootstrap.servers\": \"HOST:9092\"}}'",
    "postgres": "postgres://ROLE:PASSWORD@HOST:5432/DATABASE (a database and role of the states' own)",
}


def connection_example(kind: str, deployment_kind: Kind | None = None) -> str:
    """An example connection of ``kind`` (redis, zookeeper, spark, spark_connect); for Spark Connect, the server
    of the deployment txdag runs in."""
    return spark_connect_example(deployment_kind) if kind == "spark_connect" else HOW_TO_ADD[kind]


def how_to_add_connection(conn_id: str, kind: str) -> str:
    """How to define the Airflow connection ``conn_id`` of type ``kind``, as a clause after a colon."""
    return (f"add it in Admin > Connections or set AIRFLOW_CONN_{conn_id.upper()} (a {kind} connection, e.g. "
            f"{connection_example(kind)})")


def how_to_start(service: str, kind: Kind | None = None) -> str:
    """How to bring ``service`` (redis, zookeeper, spark_connect, airflow) back where txdag runs, as a clause
    that follows a semicolon or a comma ("start it with ...")."""
    if service not in SERVICES:
        raise ValueError(f"unknown service {service!r}: one of {', '.join(SERVICES)}")
    return _START[kind or deployment()][service]


def how_to_env(kind: Kind | None = None) -> str:
    """How a shell gets the Airflow connections (and AIRFLOW_HOME) the DAGs use."""
    return _ENV[kind or deployment()]


def spark_connect_example(kind: Kind | None = None) -> str:
    """A spark_connect connection to suggest: the Connect server of the deployment."""
    return _SPARK_CONNECT_EXAMPLE[kind or deployment()]


def airflow_home(kind: Kind | None = None) -> Path:
    """$AIRFLOW_HOME, else the default of the deployment: ``<checkout>/.run/airflow`` (scripts/airflow.sh's),
    else Airflow's own ``~/airflow``."""
    if os.environ.get("AIRFLOW_HOME"):
        return Path(os.environ["AIRFLOW_HOME"]).expanduser()
    root = repo_root()
    if (kind or deployment()) == "checkout" and root is not None:
        return root / ".run" / "airflow"
    return Path("~/airflow").expanduser()


def airflow_url(kind: Kind | None = None) -> str:
    """$TXDAG_AIRFLOW_URL, else the API server of the deployment: scripts/airflow.sh's 127.0.0.1:$TXDAG_AIRFLOW_PORT
    (8791) in a checkout, Airflow's default 127.0.0.1:8080 (or $TXDAG_AIRFLOW_PORT) elsewhere."""
    if os.environ.get("TXDAG_AIRFLOW_URL"):
        return os.environ["TXDAG_AIRFLOW_URL"]
    default = DEV_AIRFLOW_PORT if (kind or deployment()) == "checkout" else "8080"
    return f"http://127.0.0.1:{os.environ.get('TXDAG_AIRFLOW_PORT', default)}"


def airflow_password_files(kind: Kind | None = None) -> list[Path]:
    """Where the Simple auth manager keeps the REST API's passwords, most specific first: the file Airflow is
    configured with, else the one scripts/airflow.sh and docker-compose.yaml name, else Airflow's default."""
    configured = os.environ.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE")
    if configured:
        return [Path(configured).expanduser()]
    home = airflow_home(kind)
    return [home / "simple_auth_manager_passwords.json", home / "simple_auth_manager_passwords.json.generated"]

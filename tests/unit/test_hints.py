"""txdag.hints: which deployment txdag runs in (a checkout, a container, an installed wheel), and the fix each
error message names there. Pure logic: the package's location, the container markers and the environment are
faked; no service is touched."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from txdag import hints

ROOT = Path(__file__).resolve().parents[2]
KINDS = hints.KINDS
# the demo modules are rewritten on another branch; hints.py holds the checkout's fixes on purpose
NOT_SCANNED = {"hints.py", "demo.py"}


@pytest.fixture
def where(monkeypatch, tmp_path):
    """Place the package in a fake tree: ``where("checkout" | "site-packages")``."""
    monkeypatch.delenv(hints.ENV, raising=False)
    for name in ("AIRFLOW_HOME", "TXDAG_AIRFLOW_URL", "TXDAG_AIRFLOW_PORT",
                 "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"):
        monkeypatch.delenv(name, raising=False)

    def place(layout: str) -> Path:
        if layout == "checkout":
            root = tmp_path / "repo"
            (root / "scripts").mkdir(parents=True)
            (root / "scripts" / "services.sh").write_text("#!/bin/bash\n")
            package = root / "include" / "txdag"
        else:
            root = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
            package = root / "txdag"
        package.mkdir(parents=True)
        (package / "hints.py").write_text("")
        monkeypatch.setattr(hints, "__file__", str(package / "hints.py"))
        return root

    return place


def test_a_checkout_is_recognised_by_the_dev_scripts_next_to_the_package(where) -> None:
    root = where("checkout")
    assert hints.repo_root() == root.resolve() and hints.deployment() == "checkout"


def test_a_wheel_is_installed_even_in_some_container(where, monkeypatch) -> None:
    where("site-packages")
    assert hints.repo_root() is None and hints.deployment() == "installed"
    monkeypatch.setattr(Path, "exists", lambda self: True)  # /.dockerenv and all: not txdag's image
    assert hints.deployment() == "installed"


def test_txdags_image_says_it_is_the_container(where, monkeypatch) -> None:
    where("site-packages")
    monkeypatch.setenv(hints.ENV, "container")
    assert hints.deployment() == "container"
    dockerfile = (ROOT / "docker" / "airflow.Dockerfile").read_text()
    assert f"{hints.ENV}=container" in dockerfile  # the image of docker-compose.yaml sets it


@pytest.mark.parametrize("kind", KINDS)
def test_the_environment_variable_overrides_the_detection(where, monkeypatch, kind) -> None:
    where("checkout")
    monkeypatch.setenv(hints.ENV, kind.upper())
    assert hints.deployment() == kind


def test_an_unknown_value_of_the_variable_falls_back_to_the_detection(where, monkeypatch) -> None:
    where("site-packages")
    monkeypatch.setenv(hints.ENV, "laptop")
    assert hints.deployment() == "installed"


@pytest.mark.parametrize("service", hints.SERVICES)
def test_each_kind_names_its_own_fix_for_each_service(service) -> None:
    checkout, container, installed = (hints.how_to_start(service, kind) for kind in KINDS)
    script = {"spark_connect": "scripts/spark-connect.sh", "airflow": "scripts/airflow.sh",
              "redis_cluster": "scripts/cluster.sh", "postgres": "scripts/postgres.sh"}.get(service,
                                                                                   "scripts/services.sh")
    assert script in checkout
    assert "docker compose" in container and "scripts/" not in container
    assert "scripts/" not in installed and "docker" not in installed
    assert len({checkout, container, installed}) == 3


def test_the_service_names_of_the_container_fixes_are_those_of_docker_compose() -> None:
    compose = (ROOT / "docker-compose.yaml").read_text()
    for service, names in {"redis": ["redis"], "zookeeper": ["zk1", "zk2", "zk3"],
                           "spark_connect": ["spark-connect"], "postgres": ["postgres"]}.items():
        hint = hints.how_to_start(service, "container")
        for name in names:
            assert f" {name}" in hint and f"\n  {name}:\n" in compose, (service, name)


def test_an_unknown_service_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown service 'mysql'"):
        hints.how_to_start("mysql", "checkout")


def test_how_to_get_the_connections_differs_per_kind() -> None:
    assert 'eval "$(bash scripts/airflow.sh env)"' in hints.how_to_env("checkout")
    assert "docker compose exec" in hints.how_to_env("container")
    installed = hints.how_to_env("installed")
    assert "AIRFLOW_CONN_" in installed and "scripts/" not in installed


def test_the_rest_api_defaults_follow_the_deployment(where, monkeypatch) -> None:
    root = where("checkout")
    assert hints.airflow_home() == root.resolve() / ".run" / "airflow"  # not relative to the working directory
    assert hints.airflow_url() == "http://127.0.0.1:8791"
    home = root.resolve() / ".run" / "airflow"
    assert hints.airflow_password_files()[0] == home / "simple_auth_manager_passwords.json"
    where("site-packages")
    assert hints.airflow_home() == Path("~/airflow").expanduser()
    assert hints.airflow_url() == "http://127.0.0.1:8080"
    assert [p.name for p in hints.airflow_password_files()] == ["simple_auth_manager_passwords.json",
                                                                "simple_auth_manager_passwords.json.generated"]
    monkeypatch.setenv("AIRFLOW_HOME", "/srv/airflow")
    monkeypatch.setenv("TXDAG_AIRFLOW_PORT", "9000")
    assert hints.airflow_home() == Path("/srv/airflow") and hints.airflow_url() == "http://127.0.0.1:9000"
    monkeypatch.setenv("TXDAG_AIRFLOW_URL", "http://airflow-apiserver:8080")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", "/opt/airflow/auth/p.json")
    assert hints.airflow_url() == "http://airflow-apiserver:8080"
    assert hints.airflow_password_files() == [Path("/opt/airflow/auth/p.json")]


@pytest.mark.parametrize("kind", KINDS)
def test_the_messages_of_the_library_follow_the_deployment(monkeypatch, kind) -> None:
    from txdag.redisio import how_to_start_redis
    from txdag.zk.client import how_to_start as zk_fix

    monkeypatch.setenv(hints.ENV, kind)
    for message, service in ((how_to_start_redis(), "redis"), (zk_fix(), "zookeeper")):
        assert message.startswith(hints.how_to_start(service, kind)), message
        assert ("scripts/" in message) == (kind == "checkout"), message


@pytest.mark.parametrize("kind", KINDS)
def test_the_spark_connect_example_follows_the_deployment(monkeypatch, kind) -> None:
    monkeypatch.setenv(hints.ENV, kind)
    example = hints.connection_example("spark_connect")
    assert example.startswith("sc://") and ("scripts/" in example) == (kind == "checkout")
    assert ("spark-connect:15002" in example) == (kind == "container")


def test_no_password_for_the_rest_api_names_the_files_looked_at_and_the_fix(where, monkeypatch, tmp_path) -> None:
    from txdag.airflow.api import api_from_env

    where("site-packages")
    monkeypatch.delenv("TXDAG_AIRFLOW_PASSWORD", raising=False)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    with pytest.raises(RuntimeError) as caught:
        api_from_env()
    message = str(caught.value)
    assert str(tmp_path / "home" / "simple_auth_manager_passwords.json.generated") in message
    assert "scripts/" not in message and "AIRFLOW_CONN_" in message


def test_the_password_of_a_home_is_found_under_airflows_default_name(where, monkeypatch, tmp_path) -> None:
    from txdag.airflow import api

    where("site-packages")
    monkeypatch.delenv("TXDAG_AIRFLOW_PASSWORD", raising=False)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    (tmp_path / "simple_auth_manager_passwords.json.generated").write_text('{"admin": "s3cret"}')
    seen = {}
    monkeypatch.setattr(api, "AirflowAPI", lambda url, user, password, **_: seen.update(url=url, password=password))
    api.api_from_env()
    assert seen == {"url": "http://127.0.0.1:8080", "password": "s3cret"}


def _message_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module that are not docstrings (f-string parts included)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_message_outside_hints_names_a_dev_script() -> None:
    offenders = [f"{path.relative_to(ROOT)}:{line}: {text[:80]!r}"
                 for path in sorted((ROOT / "include" / "txdag").rglob("*.py")) if path.name not in NOT_SCANNED
                 for line, text in _message_strings(path)
                 if "scripts/" in text or ".run/" in text]
    assert offenders == [], "name the fix through txdag.hints:\n" + "\n".join(offenders)

"""The wheel that deploys: built from a copy of the sources (``pip wheel --no-deps --no-build-isolation``, a few
seconds, no network), it carries the entry points Airflow loads txdag through (the provider with the ``zookeeper``
connection type, the plugin, the ``txdag`` command), every third-party import is declared, the supported Pythons
are admitted, and constraints/constraints-3.11.txt pins every declared dependency within its range.

Run from a checkout with the dev extra (setuptools and wheel for the build, packaging for the ranges)."""

from __future__ import annotations

import ast
import configparser
import email
import importlib.metadata
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "constraints" / "constraints-3.11.txt"
EXPECTED_ENTRY_POINTS = {
    ("apache_airflow_provider", "provider_info"): "txdag.airflow.provider:get_provider_info",
    ("airflow.plugins", "txdag"): "txdag.airflow.plugin:TxdagPlugin",
    ("console_scripts", "txdag"): "txdag.cli.main:main",
}
# Where the third-party imports of each tree must be declared: the library in the base dependencies or the
# airflow extra (checked more tightly by test_the_core_imports_with_the_base_dependencies_alone), bench/ may use
# the bench extra too, tests/ any extra.
TREES = {"include/txdag": ("", "airflow"), "dags": ("", "airflow"), "spark_jobs": ("", "airflow"),
         "bench": ("", "airflow", "bench"), "tests": ("", "airflow", "bench", "dev")}
# trees a tree imports modules from by path (the tests import bench/'s scripts)
ALSO_LOCAL = {"tests": ("bench", "scripts"), "bench": ("tests",)}  # each adds the other to sys.path
# txdag modules that belong to the Airflow/Spark side (the airflow extra); every other one is the core
AIRFLOW_SIDE = ("txdag.airflow", "txdag.spark", "txdag.trident", "txdag.analytics.spark_tweets")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel built from a copy of pyproject.toml, README.md and include/ (nothing is written into the
    checkout: an in-tree build would leave include/txdag.egg-info, a second txdag on sys.path)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "include", src / "include",
                    ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--disable-pip-version-check", "--no-index", "-w", str(out), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (path,) = out.glob("txdag-*.whl")
    return zipfile.ZipFile(path)


def _dist_info(wheel: zipfile.ZipFile, name: str) -> str:
    (member,) = [n for n in wheel.namelist() if n.endswith(f".dist-info/{name}")]
    return wheel.read(member).decode()


@pytest.fixture(scope="module")
def metadata(wheel) -> email.message.Message:
    return email.message_from_string(_dist_info(wheel, "METADATA"))


@pytest.fixture(scope="module")
def requirements(metadata) -> dict[str, list[Requirement]]:
    """Declared requirements by extra ("" = the base dependencies)."""
    by_extra: dict[str, list[Requirement]] = {"": []}
    for extra in metadata.get_all("Provides-Extra") or []:
        by_extra[extra] = []
    for line in metadata.get_all("Requires-Dist") or []:
        req = Requirement(line)
        extra = next((e for e in by_extra if e and req.marker and req.marker.evaluate({"extra": e})), "")
        req.marker = None
        by_extra[extra].append(req)
    return by_extra


def test_the_wheel_has_the_entry_points_airflow_loads_txdag_through(wheel) -> None:
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(_dist_info(wheel, "entry_points.txt"))
    found = {(group, name): parser[group][name].strip() for group in parser.sections() for name in parser[group]}
    assert found == EXPECTED_ENTRY_POINTS


@pytest.mark.parametrize(("group", "name"), list(EXPECTED_ENTRY_POINTS))
def test_each_entry_point_resolves_to_an_importable_object(group, name) -> None:
    target = importlib.metadata.EntryPoint(name=name, value=EXPECTED_ENTRY_POINTS[(group, name)], group=group).load()
    assert callable(target)


def test_the_plugin_is_an_airflow_plugin_with_the_listener_and_the_page() -> None:
    from airflow.plugins_manager import AirflowPlugin, is_valid_plugin

    from txdag.airflow import pools
    from txdag.airflow.page import app
    from txdag.airflow.plugin import TxdagPlugin

    assert issubclass(TxdagPlugin, AirflowPlugin) and is_valid_plugin(TxdagPlugin) and TxdagPlugin.name == "txdag"
    assert TxdagPlugin.listeners == [pools]
    assert [(a["app"], a["url_prefix"]) for a in TxdagPlugin.fastapi_apps] == [(app, "/txdag")]
    assert [v["href"] for v in TxdagPlugin.external_views] == ["txdag/"]


def test_the_provider_info_is_valid_for_airflow_and_lists_the_connection_type_the_uri_scheme_and_the_plugin() -> None:
    from airflow.providers_manager import _create_provider_info_schema_validator

    from txdag.airflow.provider import get_provider_info

    info = get_provider_info()
    _create_provider_info_schema_validator().validate(info)  # what Airflow runs on discovery
    assert info["package-name"] == "txdag"
    assert [(c["hook-class-name"], c["connection-type"]) for c in info["connection-types"]] == [
        ("txdag.airflow.hooks.ZooKeeperHook", "zookeeper")]
    assert info["asset-uris"] == [{"schemes": ["txdag"], "handler": "txdag.topology.assets.check_uri"}]
    plugin_entry_point = EXPECTED_ENTRY_POINTS[("airflow.plugins", "txdag")].replace(":", ".")
    assert info["plugins"] == [{"name": "txdag", "plugin-class": plugin_entry_point}]
    from txdag.airflow.links import TxidLink  # the extra link is importable where Airflow looks for it

    assert info["extra-links"] == [f"{TxidLink.__module__}.{TxidLink.__qualname__}"]
    token = info["config"]["txdag"]["options"]["metrics_token"]  # the scraper's token: masked, _SECRET/_CMD forms
    assert token["sensitive"] is True and token["default"] is None


def test_the_provider_info_lists_the_hooks_operators_and_trigger_and_declares_the_zookeeper_form() -> None:
    """The modules ``airflow providers get txdag --full`` lists, each holding what it is listed for; the connection
    form declared in the metadata (Airflow 3.2+ deprecates a hook's get_ui_field_behaviour), its fields the extra's
    keys that txdag.airflow.hooks.zookeeper_settings reads."""
    import importlib
    import inspect
    from types import SimpleNamespace

    from airflow.providers_manager import ProvidersManager
    from airflow.sdk import BaseHook, BaseOperator
    from airflow.triggers.base import BaseTrigger

    from txdag.airflow.hooks import ZooKeeperHook, zookeeper_settings
    from txdag.airflow.provider import get_provider_info

    info = get_provider_info()
    assert [i["integration-name"] for i in info["integrations"]] == ["txdag"]
    for kind, base in (("hooks", BaseHook), ("operators", BaseOperator), ("triggers", BaseTrigger)):
        (entry,) = info[kind]
        assert entry["integration-name"] == "txdag"
        for name in entry["python-modules"]:
            module = importlib.import_module(name)
            assert [c for _, c in inspect.getmembers(module, inspect.isclass)
                    if issubclass(c, base) and c.__module__ == name], f"{name} has no {kind}"
    (zookeeper,) = info["connection-types"]
    assert zookeeper["hook-name"] == ZooKeeperHook.hook_name and "get_ui_field_behaviour" not in vars(ZooKeeperHook)
    fields = {"root": "/apps/a", "timeout": 3}
    settings = zookeeper_settings(SimpleNamespace(host="zk", port=2181, login=None, password=None,
                                                  extra_dejson=fields))
    assert (settings.root, settings.timeout) == ("/apps/a", 3.0) and set(zookeeper["conn-fields"]) == set(fields)
    manager = ProvidersManager()  # Airflow reads the form from the metadata
    assert manager.field_behaviours["zookeeper"]["hidden_fields"] == ["schema", "extra"]
    assert {w.field_name for k, w in manager.connection_form_widgets.items()
            if k.startswith("extra__zookeeper__")} == set(fields)


def test_the_wheel_carries_the_package_and_nothing_of_the_checkout(wheel, metadata) -> None:
    from txdag import __version__

    names = wheel.namelist()
    for module in ("txdag/airflow/plugin.py", "txdag/airflow/provider.py", "txdag/hints.py", "txdag/cli/main.py",
                   "txdag/py.typed"):
        assert module in names, module
    assert not [n for n in names if n.split("/")[0] in ("plugins", "tests", "scripts", "dags", "include")]
    assert metadata["Name"] == "txdag" and metadata["Version"] == __version__


def test_requires_python_admits_3_11_to_3_13(metadata) -> None:
    supported = SpecifierSet(metadata["Requires-Python"])
    assert all(v in supported for v in ("3.11.0", "3.12.0", "3.13.0", "3.13.9"))
    assert "3.10.14" not in supported


def test_dependencies_are_ranges_except_the_twin_spark_pins(requirements) -> None:
    exact = {canonicalize_name(r.name): str(r.specifier) for reqs in requirements.values() for r in reqs
             if any(s.operator in ("==", "===") for s in r.specifier)}
    assert exact == {"pyspark": "==4.2.0", "pyspark-client": "==4.2.0"} or (
        set(exact) == {"pyspark", "pyspark-client"} and exact["pyspark"] == exact["pyspark-client"]), exact


def _constraints() -> dict[str, Version]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", f"{CONSTRAINTS.name}: {line} is not an exact pin"
            pins[canonicalize_name(req.name)] = Version(spec.version)
    return pins


def test_the_constraints_file_pins_every_declared_dependency_within_its_range(requirements) -> None:
    pins = _constraints()
    assert "txdag" not in pins
    problems = []
    for extra, reqs in requirements.items():
        for req in reqs:
            pinned = pins.get(canonicalize_name(req.name))
            if pinned is None:
                problems.append(f"{req} ({extra or 'base'}): not in {CONSTRAINTS.name}")
            elif not req.specifier.contains(pinned, prereleases=True):
                problems.append(f"{req} ({extra or 'base'}): {CONSTRAINTS.name} pins {pinned}")
    assert problems == []


def test_the_constraints_file_is_what_the_dev_venv_runs() -> None:
    """A drift between .venv and the file means scripts/setup.sh was bypassed or the file is stale."""
    pins = _constraints()
    drift = {name: (str(version), importlib.metadata.version(name)) for name, version in pins.items()
             if name not in ("pip",) and _installed(name) and Version(importlib.metadata.version(name)) != version}
    missing = [name for name in pins if not _installed(name)]
    assert drift == {} and missing == []


def _installed(name: str) -> bool:
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _local_names(tree: Path) -> set[str]:
    """Modules a tree imports from itself (sibling files, test helpers)."""
    return {p.stem for p in tree.rglob("*.py")} | {p.name for p in tree.rglob("*") if p.is_dir()}


def _third_party_imports(tree: Path) -> dict[str, set[str]]:
    """Imported module (top level, or airflow.providers.<a>[.<b>]) -> files importing it."""
    local = _local_names(tree) | {"txdag"}
    for other in ALSO_LOCAL.get(tree.name, ()):
        local |= _local_names(ROOT / other)
    found: dict[str, set[str]] = {}
    for path in tree.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                parts = module.split(".")
                if parts[0] in sys.stdlib_module_names or parts[0] in local or parts[0] == "__future__":
                    continue
                key = ".".join(parts[:4]) if parts[:2] == ["airflow", "providers"] else parts[0]
                found.setdefault(key, set()).add(str(path.relative_to(ROOT)))
    return found


def _distributions_of(module: str) -> set[str]:
    """The distributions that provide an imported module (canonical names)."""
    if module.startswith("airflow.providers."):
        parts = module.split(".")[2:]
        for n in (2, 1):
            name = canonicalize_name("apache-airflow-providers-" + "-".join(parts[:n]))
            if _installed(name):
                return {name}
        return {f"(no provider distribution for {module})"}
    if module == "airflow":
        return {"apache-airflow"}  # the distribution one declares; it pulls apache-airflow-core and the task SDK
    return {canonicalize_name(d) for d in importlib.metadata.packages_distributions().get(module, [module])}


@pytest.mark.parametrize("tree", list(TREES))
def test_every_third_party_import_is_declared_where_the_code_runs(tree, requirements) -> None:
    declared = {canonicalize_name(r.name) for extra in TREES[tree] for r in requirements[extra]}
    undeclared = {module: sorted(files)[:3] for module, files in _third_party_imports(ROOT / tree).items()
                  if not _distributions_of(module) & declared}
    assert undeclared == {}, f"declare them in pyproject.toml ({' or '.join(e or 'base' for e in TREES[tree])})"


def _closure(requirements: list[Requirement]) -> set[str]:
    """The distributions the base dependencies install (themselves and what they require, recursively)."""
    environment = default_environment()
    seen: set[str] = set()
    todo = [canonicalize_name(r.name) for r in requirements]
    while todo:
        name = todo.pop()
        if name in seen or not _installed(name):
            continue
        seen.add(name)
        for line in importlib.metadata.requires(name) or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({**environment, "extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen


def test_the_core_imports_with_the_base_dependencies_alone(requirements) -> None:
    """Every txdag module outside the Airflow/Spark side, and `txdag --version`, work in an environment that has
    only the base dependencies: every other third-party module is made unimportable."""
    allowed = _closure(requirements[""])
    blocked = sorted({module for module, dists in importlib.metadata.packages_distributions().items()
                      if not {canonicalize_name(d) for d in dists} & allowed} - set(sys.stdlib_module_names)
                     - {"txdag", "_pytest", "pytest", "py"} | {"airflow", "pyspark"})
    script = textwrap.dedent(f"""
        import importlib.abc, pkgutil, sys
        BLOCKED = set({blocked!r})
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError("not a base dependency: " + name)
        sys.meta_path.insert(0, Block())
        import txdag
        failed = []
        for info in pkgutil.walk_packages(txdag.__path__, "txdag."):
            if info.name.startswith({AIRFLOW_SIDE!r}):
                continue
            try:
                __import__(info.name)
            except ImportError as exc:
                failed.append(f"{{info.name}}: {{exc}}")
        from txdag.cli.main import main
        try:
            main(["--version"])
        except SystemExit as exc:
            assert exc.code == 0, exc.code
        print("FAILED", failed)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "FAILED []" in done.stdout, done.stdout[-3000:]
    assert done.stdout.startswith("txdag "), done.stdout


def test_txdag_version_prints_the_installed_version(capsys) -> None:
    from txdag.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"txdag {importlib.metadata.version('txdag')}"


def test_one_txdag_distribution_is_visible() -> None:
    """Two (an editable build's include/txdag.egg-info beside the installed dist-info) make Airflow load the
    plugin's entry point twice and report the second as a plugin import error; scripts/setup.sh removes it."""
    paths = [str(getattr(d, "_path", d)) for d in importlib.metadata.distributions()
             if canonicalize_name(d.metadata["Name"] or "") == "txdag"]
    assert len(paths) == 1, paths

"""scripts/ shares one sourced helper file, scripts/lib/common.sh, and no function is defined twice across scripts/:
a helper two scripts need lives in common.sh, with parameters where their callers differ, instead of a copy in each
that drifts. The exceptions are each script's own commands (``services.sh start zk`` and ``cluster.sh start zk``
do different jobs under one name), listed in OWN_COMMANDS.
"""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "scripts" / "lib" / "common.sh"
SCRIPTS = sorted((ROOT / "scripts").glob("*.sh"))
DEFINITION = re.compile(r"^\s*(?:function\s+)?([A-Za-z_][\w-]*)\s*\(\)\s*(?:\{|$)", re.MULTILINE)
# the functions behind a script's own command line: usage, its commands, the services it starts and stops by name
OWN_COMMANDS = {"usage", "status", "start", "stop", "wipe", "start_zk", "stop_zk", "start_redis", "stop_redis"}


def definitions(paths: list[Path]) -> dict[str, list[str]]:
    """Function name -> the files (one entry per definition) that define it."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        for name in DEFINITION.findall(path.read_text()):
            found[name].append(str(path.relative_to(ROOT)))
    return found


def code(path: Path) -> str:
    """The script without its comment lines."""
    return "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))


def test_the_parser_finds_definitions_and_twins() -> None:
    twins = definitions([LIB, LIB])
    assert {"die", "wait_for", "write_zk_config"} <= twins.keys() and twins["die"] == ["scripts/lib/common.sh"] * 2
    assert len(SCRIPTS) >= 10 and list((ROOT / "scripts" / "lib").iterdir()) == [LIB]


def test_no_function_is_defined_twice_across_scripts() -> None:
    twice = {name: files for name, files in definitions([*SCRIPTS, LIB]).items() if len(files) > 1}
    shared = {name: files for name, files in twice.items() if name not in OWN_COMMANDS}
    assert not shared, (
        f"defined more than once: {shared}. Keep one definition in scripts/lib/common.sh (a parameter where the "
        f"callers differ) and source it, or give a function that does another job a name that says which")
    for name in twice.keys() & OWN_COMMANDS:
        assert len(set(twice[name])) == len(twice[name]) and "scripts/lib/common.sh" not in twice[name], (
            f"{name}: a script's own command is defined once per script, never in the shared file: {twice[name]}")


def test_each_exception_is_still_a_command_of_two_scripts() -> None:
    found = definitions(SCRIPTS)
    stale = sorted(name for name in OWN_COMMANDS if len(found.get(name, [])) < 2)
    assert not stale, f"OWN_COMMANDS lists {stale}, defined in fewer than two scripts now: remove them"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_script_that_calls_a_shared_helper_sources_the_file(script: Path) -> None:
    helpers = definitions([LIB])
    text = code(script)
    called = sorted(name for name in helpers if re.search(rf"(?<![\w-]){name}(?![\w-])", text))
    if called:
        assert 'source "$ROOT/scripts/lib/common.sh"' in text, (
            f"{script.name} calls {called} of scripts/lib/common.sh without sourcing it")
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def zoo_cfg(tmp_path: Path, *args: str) -> tuple[dict[str, list[str]], str | None]:
    """Each key of the zoo.cfg that common.sh's write_zk_config writes with ``args``, and the node's myid."""
    done = subprocess.run(["bash", "-c", f'ROOT={ROOT}; source {LIB}; write_zk_config "$@"', "bash", str(tmp_path),
                           "127.0.0.1", "2999", *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    keys: dict[str, list[str]] = defaultdict(list)
    for line in (tmp_path / "zoo.cfg").read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            keys[key].append(value)
    myid = tmp_path / "data" / "myid"
    return keys, myid.read_text().strip() if myid.exists() else None


def test_the_zookeeper_config_has_each_setting_once_standalone_or_in_an_ensemble(tmp_path: Path) -> None:
    alone, myid = zoo_cfg(tmp_path / "alone")
    assert myid is None and "initLimit" not in alone and alone["clientPort"] == ["2999"]
    servers = [f"server.{n}=127.0.0.1:{2990 + n}:{3990 + n}" for n in (1, 2, 3)]
    member, myid = zoo_cfg(tmp_path / "member", "2", *servers)
    assert myid == "2" and member["server.3"] == ["127.0.0.1:2993:3993"]
    assert all(len(values) == 1 for values in member.values()), member
    assert member.keys() - {"initLimit", "syncLimit", *(s.split("=")[0] for s in servers)} == alone.keys()

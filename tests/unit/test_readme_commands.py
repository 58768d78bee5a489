"""Every command the README (and docs/*.md) tells a user to type is accounted for: run by a named test, or
listed with the reason no test runs it. A new command in neither list fails here with what to do.

Commands are the lines of ```sh, ```bash, ```shell and ```console blocks (in a console block only the ``$ ``
lines; backslash continuations joined, `` # comments`` dropped). Each is matched to the longest command prefix
of the tables below:

- RUN_BY: prefix -> the test that runs that command, and a text that test's source must contain (``file::text``
  for a fixture's file), so a test that stops running the command, is renamed or deleted fails this check;
- CANNOT_RUN_HERE: prefix -> why no test on a development or CI machine can run it;
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_FENCES = {"sh", "bash", "shell", "console"}

CLI = "tests/integration/cli/test_cli.py"
KV_CLI = "tests/integration/cli/test_kv_cli.py"
SERVICES = ("tests/integration/test_services_script.py::"
            "test_start_status_restart_redis_stop_and_what_a_stop_a_start_and_a_crash_keep")
RECIPES = "tests/integration/test_shell_recipes.py"
CLUSTER_E2E = ("tests/cluster/test_cluster_airflow.py::"
               "test_exactly_once_on_the_cluster_while_parts_of_it_are_killed")
RUN_BY: dict[str, tuple[str, str]] = {
    "bash scripts/cluster.sh start": (CLUSTER_E2E, 'tests/cluster/conftest.py::cluster("start")'),
    "bash scripts/cluster.sh stop": (CLUSTER_E2E, 'tests/cluster/conftest.py::cluster("stop")'),
    'eval "$(bash scripts/cluster.sh env)"': (  # tests/support/loopback.py's user_shell evaluates both lines
        CLUSTER_E2E, 'tests/support/loopback.py::eval "$(bash scripts/cluster.sh env)" && '),
    'eval "$(AIRFLOW_HOME=$TXDAG_CLUSTER_AIRFLOW_HOME bash scripts/airflow.sh env)"': (
        CLUSTER_E2E,
        'tests/support/loopback.py::eval "$(AIRFLOW_HOME=$TXDAG_CLUSTER_AIRFLOW_HOME bash scripts/airflow.sh env)"'),
    "airflow dags trigger": (CLUSTER_E2E, 'user_shell(f"airflow dags trigger {dag}")'),
    "bash scripts/services.sh status": (SERVICES, 'services("status")'),
    "bash scripts/services.sh stop": (SERVICES, 'services("stop")'),
    "bash scripts/services.sh restart-redis": (SERVICES, 'services("restart-redis")'),
    "bash scripts/services.sh wipe": (
        "tests/integration/test_services_script.py::test_wipe_deletes_the_data_of_stopped_services_and_keeps_the_users",
        'services.ok("wipe")'),
    'eval "$(bash scripts/airflow.sh env)"': (
        f"{RECIPES}::test_the_tour_reads_and_seeds_through_the_env_of_airflow_sh",
        """readme_line('eval "$(bash scripts/airflow.sh env)"')"""),
    "source .run/credentials.env; REDISCLI_AUTH=": (
        f"{RECIPES}::test_the_demos_redis_cli_line_logs_in_as_the_admin",
        'readme_line("source .run/credentials.env; REDISCLI_AUTH=")'),
    "source .run/credentials.env; export REDISCLI_AUTH=": (
        f"{RECIPES}::test_the_acl_line_piped_to_redis_cli_creates_the_user",
        "readme_line('source .run/credentials.env; export REDISCLI_AUTH')"),
    "bash scripts/demo.sh": ("tests/demo/test_demo.py::test_the_demo_commits_every_tweet_exactly_once",
                             'tests/demo/test_demo.py::["bash", "scripts/demo.sh", *args]'),
    'TXDAG_DAGS_FOLDER="$PWD/dags_warm" bash scripts/airflow.sh start': (
        "tests/demo/test_demo.py::test_the_demo_commits_every_tweet_exactly_once",
        'scripts/demo.sh::export TXDAG_DAGS_FOLDER="$dags_folder"'),  # demo.sh's default folder is dags_warm/
    "txdag state get trending_hashtags": (
        "tests/e2e/test_topologies.py::test_trending_hashtags_window_is_exact_through_replays_in_the_middle",
        '"state", "get", dag, "trending"'),
    "TXDAG_PW=... txdag acl redis": (f"{RECIPES}::test_the_acl_line_piped_to_redis_cli_creates_the_user",
                                     'readme_line("TXDAG_PW=... txdag acl redis")'),
    "txdag status": (f"{CLI}::test_status_names_the_committed_txid_the_failure_and_its_cascade",
                     'run(capsys, "status"'),
    "txdag show": (f"{CLI}::test_show_prints_a_txids_record", 'run(capsys, "show"'),
    "txdag rejections": ("tests/integration/cli/test_mistakes.py::"
                         "test_rejections_lists_each_rejected_entry_with_its_txid_reason_and_time",
                         'main(["rejections", prefix'),
    "txdag state get": (f"{CLI}::test_state_get_unwraps_transactional_and_opaque_values", '"state", "get"'),
    "txdag state top": (f"{CLI}::test_state_top_ranks_the_largest_values", '"state", "top"'),
    "txdag seed": (f"{CLI}::test_seed_appends_with_progress_and_json", 'run(capsys, "seed"'),
    "txdag reset": ("tests/integration/cli/test_reset.py::"
                    "test_status_and_doctor_lead_with_the_halt_and_reset_starts_over_exactly",
                    '"reset", prefix, "--confirm"'),
    "txdag accept-missing": ("tests/integration/cli/test_accept_missing.py::"
                             "test_a_hole_fails_its_txid_and_accepting_it_lets_the_replay_commit_exact_counts",
                             '["accept-missing", prefix, "2", "--confirm"]'),
    "txdag doctor": (f"{CLI}::test_doctor_passes_with_live_services_and_fails_on_a_dead_port",
                     '"doctor", "--check", "redis", "--check", "zookeeper"'),
    "txdag state dump": (f"{KV_CLI}::test_dump_shows_values_txids_and_staged_attempts", '"state", "dump"'),
    "txdag state migrate": (f"{KV_CLI}::test_migrate_on_the_command_line_resumes_and_reports",
                            '"state", "migrate", spec.namespace, "--provider", kv_provider.name, "--config-file"'),
    "txdag replay": ("tests/e2e/test_topologies.py::test_tweets_analytics_exactly_once_through_a_crash_and_replays",
                     'txdag_replay(airflow, dag, 4)'),  # e2e_runs.txdag_replay runs the CLI
    "txdag pools sync": ("tests/e2e/test_cli_e2e.py::test_pools_sync_creates_missing_pools_and_resets_resized_ones",
                         '"pools", "sync"'),
    "bash scripts/spark-connect.sh start": (
        "tests/integration/spark/test_spark_connect.py::test_tweets_analytics_on_spark_connect_stages_the_reference",
        'tests/integration/spark/conftest.py::[*script, "start"]'),  # its connect_url fixture starts the server
    "txdag pyfiles": ("tests/cluster/test_cluster_executors.py::test_spark_submit_ships_txdag_to_executors_without_it",
                      'tests/cluster/test_cluster_executors.py::"pyfiles", str(out), "--python"'),
    ".venv/bin/python bench/soak.py --txids 40 --seed 3": (
        "tests/integration/test_soak.py::test_short_soak_commits_every_txid_exactly_once_under_faults",
        '"--txids", "40", "--seed", "3"'),
}
CANNOT_RUN_HERE: dict[str, str] = {
    "docker compose": "no Docker on the development and CI machines; tests/unit/test_compose.py checks "
                      "docker-compose.yaml statically",
    "bash scripts/test.sh": "it is the command that runs this suite (.ci/run runs it)",
    ".venv/bin/python bench/soak.py --txids 500": "the full soak takes too long for the suite; the same script "
                                                  "runs with 40 txids in tests/integration/test_soak.py",
    ".venv/bin/python bench/throughput.py": "the benchmark takes 15-30 min on 2 cores (Airflow, warm Spark, 20,000 "
                                            "to 1,000,000 tweets); its parts are unit-tested in "
                                            "tests/unit/test_bench_throughput.py, its --help in test_entry_points",
    ".venv/bin/python bench/jepsen.py": "each schedule of the fault harness takes 5 to 15 min through Airflow; one "
                                        "runs in the jepsen tier (tests/jepsen/test_jepsen.py), the schedule and the "
                                        "checker in tests/unit/test_bench_jepsen.py",
}
def commands(path: Path) -> list[tuple[int, str]]:
    """(line number, command) of every shell code block of a Markdown file."""
    found: list[tuple[int, str]] = []
    fence: str | None = None
    pending, pending_line = "", 0
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if fence is None:
            match = re.fullmatch(r"```\s*(\w*).*", line)
            if match:
                fence = match.group(1)
            continue
        if line.startswith("```"):
            fence = None
            continue
        if fence not in SHELL_FENCES:
            continue
        if pending:
            line, number = f"{pending} {line}", pending_line
            pending = ""
        elif fence == "console":
            if not line.startswith("$ "):
                continue  # output
        if line.startswith("$ "):
            line = line[2:]
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending, pending_line = line[:-1].rstrip(), number
            continue
        found.append((number, " ".join(re.sub(r"\s+#\s.*$", "", line).split())))
    return found


COMMANDS = [(f"{p.relative_to(ROOT)}:{n}", c) for p in DOCS for n, c in commands(p)]
TABLES = {**{k: "run" for k in RUN_BY}, **{k: "cannot" for k in CANNOT_RUN_HERE}}


def entry_of(command: str) -> str | None:
    """The longest table prefix of ``command`` (a whole word: `txdag state` is no prefix of `txdag stats`)."""
    matches = [k for k in TABLES
               if command == k or command.startswith(k + " ") or (command.startswith(k) and not k[-1].isalnum())]
    return max(matches, key=len) if matches else None


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[f"{w} {c[:60]}" for w, c in COMMANDS])
def test_the_command_is_run_by_a_test_or_listed(where: str, command: str) -> None:
    assert entry_of(command) is not None, (
        f"{where}: `{command}` is neither run by a test nor listed. Write a test that runs it and add its prefix "
        f"to RUN_BY in {Path(__file__).relative_to(ROOT)} (with the test's node id and a text of its source), or "
        f"add it to CANNOT_RUN_HERE with the reason no test can run it")


@cache
def function_source(path: str, name: str) -> str | None:
    source = (ROOT / path).read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return ast.get_source_segment(source, node)
    return None


@pytest.mark.parametrize("prefix", sorted(RUN_BY))
def test_the_named_test_exists_and_runs_the_command(prefix: str) -> None:
    node, evidence = RUN_BY[prefix]
    path, _, name = node.partition("::")
    assert (ROOT / path).is_file(), f"{prefix!r}: {path} does not exist"
    source = function_source(path, name.split("[")[0])
    assert source is not None, f"{prefix!r}: {path} has no test {name}"
    where, _, text = evidence.rpartition("::")
    haystack = (ROOT / where).read_text() if where else source
    assert text in haystack, f"{prefix!r}: {where or node} no longer contains {text!r}: does it still run it?"


@pytest.mark.parametrize("prefix", sorted(TABLES))
def test_every_listed_command_is_still_in_the_docs(prefix: str) -> None:
    assert any(entry_of(c) == prefix for _, c in COMMANDS), f"{prefix!r} is in no command of the docs: remove it"


def test_the_extraction_finds_the_quick_start_and_a_console_block() -> None:
    found = [c for _, c in COMMANDS]
    assert found[:2] == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    assert "txdag show tweets_analytics 2" in found and not any(c.startswith("TOPOLOGY") for c in found)
    assert any(c.startswith("TXDAG_PW=... txdag acl redis") and c.endswith("redis-cli --user txdag-admin -p 6391")
               for c in found)

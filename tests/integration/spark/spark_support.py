"""Helpers of the Spark tests (imported by name: pytest puts this folder on sys.path, as it has no __init__)."""

from __future__ import annotations

import importlib.util
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from txdag.state import KeyClashError
from txdag.topology.definition import State

ROOT = Path(__file__).resolve().parents[3]
JOBS_DIR = ROOT / "spark_jobs"
JOB_NAMES = ("tweets_analytics", "global_count", "word_count")
TWEET_STATES = (State("users"), State("hashtags"), State("users_hashtags", key_fields=2, separator=":"))
GLOBAL_STATES = (State("global_count", key_fields=0),)
WORD_STATES = (State("words"),)


def load_job(name: str) -> ModuleType:
    """A job of spark_jobs/ by path: they are scripts, not a package, as spark-submit runs them."""
    spec = importlib.util.spec_from_file_location(f"txdag_spark_job_{name}", JOBS_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"no job {name} in {JOBS_DIR}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def expected_fields(state: State, partials: Mapping[tuple, int]) -> dict[str, int]:
    """The reference partials as staged hash fields; a key the state's codec refuses (it would share its joined
    field with another key) is not staged: it is a rejection."""
    codec, out = state.codec(), Counter()
    for key, value in partials.items():
        try:
            field = codec.encode(state.key(key))
        except KeyClashError:
            continue
        out[field] += value
    return dict(out)

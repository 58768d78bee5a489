"""The zip for executors without txdag (txdag.spark.pyfiles): what it holds, that the same code gives the same
bytes, and the executors' Pythons it refuses, each with what to do."""

from __future__ import annotations

import sys
import zipfile

import pytest

from txdag.errors import ConfigError
from txdag.spark.pyfiles import ExecutorPython, build, probe

HERE = (*sys.version_info[:2], 9)


def test_the_zip_holds_txdag_and_redis_py_sources_and_is_the_same_for_the_same_code(tmp_path):
    first = build(tmp_path / "a.zip", ExecutorPython("/w/python", HERE, "26.0.1"))
    second = build(tmp_path / "b.zip")
    assert first.path.read_bytes() == second.path.read_bytes()
    names = zipfile.ZipFile(first.path).namelist()
    assert "txdag/spark/stage.py" in names and "redis/client.py" in names and "txdag/__init__.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".so"))]
    assert set(first.files) == {"txdag", "redis"} and first.size == first.path.stat().st_size


def test_an_executors_python_the_job_cannot_run_on_is_refused(tmp_path):
    other = (sys.version_info[0], sys.version_info[1] + 1, 0)
    with pytest.raises(ConfigError, match=r"is 3\.\d+\.0 and this one is 3\.\d+: PySpark needs the same major.minor"):
        build(tmp_path / "z.zip", ExecutorPython("/w/python", other, "26.0.1"))
    with pytest.raises(ConfigError, match=r"has no pyarrow .*run `/w/python -m pip install pyarrow==\S+` on every"):
        build(tmp_path / "z.zip", ExecutorPython("/w/python", HERE, None))
    assert not (tmp_path / "z.zip").exists()


def test_an_older_executors_python_gets_async_timeout_or_says_how(tmp_path):
    old = ExecutorPython("/w/python", (*sys.version_info[:2], 2), "26.0.1") if sys.version_info[:2] == (3, 11) \
        else None
    if old is None:
        pytest.skip("redis-py needs async_timeout below 3.11.3 only: this Python is not 3.11")
    import importlib.util

    if importlib.util.find_spec("async_timeout") is None:
        with pytest.raises(ConfigError, match=r"async_timeout is not installed here.*pip install async-timeout"):
            build(tmp_path / "z.zip", old)
    else:
        assert "async_timeout" in build(tmp_path / "z.zip", old).files


def test_probe_reads_a_python_and_names_one_that_does_not_run():
    found = probe(sys.executable)
    assert found.version == tuple(sys.version_info[:3]) and found.pyarrow
    with pytest.raises(ConfigError, match=r"'/no/python' does not run .*spark.pyspark.python"):
        probe("/no/python")


def test_a_folder_and_a_program_that_is_no_python_are_named(tmp_path):
    with pytest.raises(ConfigError, match=r"is a folder: give the zip's file name, e\.g\. .*txdag-pyfiles\.zip"):
        build(tmp_path)
    with pytest.raises(ConfigError, match=r"out.txt does not end in .zip: .*name it e\.g\. .*out\.zip"):
        build(tmp_path / "out.txt")
    assert not (tmp_path / "out.txt").exists()
    with pytest.raises(ConfigError, match=r"'/bin/echo' did not answer as a Python does"):
        probe("/bin/echo")


def test_building_again_replaces_the_zip_a_running_job_may_be_reading(tmp_path):
    """spark-submit puts the zip on the driver's path too: a rebuild (cluster.sh start, an upgrade) while a driver
    imports from it must not hand it half a file. The new zip is another file renamed over the old one."""
    out = tmp_path / "txdag-pyfiles.zip"
    build(out)
    with out.open("rb") as reading:
        before = out.stat().st_ino
        build(out)
        assert out.stat().st_ino != before, "rewritten in place"
        assert zipfile.ZipFile(reading).testzip() is None, "the reader's zip changed under it"
    assert [p.name for p in tmp_path.iterdir()] == ["txdag-pyfiles.zip"], "a partial file was left behind"

"""``txdag pyfiles OUT.zip [--python EXECUTORS_PYTHON]``: the zip of txdag and redis-py for Spark executors whose
Python has no txdag (``txdag.spark.pyfiles``), and the topology settings that ship it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from txdag.cli.common import emit


def add_cli(sub: Any) -> None:
    p = sub.add_parser("pyfiles", help="build the zip of txdag and redis-py that Spark executors without txdag "
                       "need (the topology's spark_conf spark.submit.pyFiles)")
    p.add_argument("out", type=Path, help="the zip to write, e.g. /opt/txdag/txdag-pyfiles.zip")
    p.add_argument("--python", metavar="PATH", help="the Python the Spark workers run (spark.pyspark.python): "
                   "checked for the same major.minor as this one and for pyarrow; below 3.11.3 the zip gets "
                   "async_timeout too")
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of text")
    p.set_defaults(func=cmd_pyfiles)


def cmd_pyfiles(args: argparse.Namespace) -> int:
    from txdag.spark.pyfiles import build, probe

    executor = probe(args.python) if args.python else None
    built = build(args.out, executor)
    conf = {"spark.submit.pyFiles": str(built.path.resolve())}
    if executor is not None:
        conf["spark.pyspark.python"] = executor.path
    data = {"zip": str(built.path), "bytes": built.size, "files": built.files, "spark_conf": conf}
    emit(args, data, _text)
    return 0


def _text(data: dict[str, Any]) -> str:
    files = ", ".join(f"{name} {n} files" for name, n in data["files"].items())
    return (f"wrote {data['zip']} ({files}; {data['bytes'] / 1e6:.2f} MB). Put it where the Airflow workers read it, "
            f"and give the topology spark_conf={json.dumps(data['spark_conf'])} (both modes: spark-submit ships it, "
            f"and a Spark Connect session gets it uploaded)")

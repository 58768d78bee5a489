"""What the one-owner check costs at parse time: Airflow's DagBag over the shipped DAGs plus copies, with the check
and without it (the baseline, in the same process), and the check alone per DAG file.

Each copy is a shipped DAG file under another topology id (the usual case: no duplicate, every file is read by the
check and none fails); with --duplicates the copies keep the shipped ids and fail to import, naming both files.

    .venv/bin/python bench/parse_cost.py [--copies 20] [--rounds 5] [--duplicates]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def project(where: Path, copies: int, duplicates: bool) -> Path:
    """A project with dags/ (the shipped files + ``copies``) and spark_jobs/."""
    shutil.copytree(ROOT / "spark_jobs", where / "spark_jobs")
    dags = where / "dags"
    shutil.copytree(ROOT / "dags", dags)
    shipped = sorted(dags.glob("*.py"))
    for n in range(copies):
        source = shipped[n % len(shipped)]
        text = source.read_text()
        if not duplicates:
            text = re.sub(r'TransactionalTopology\(\s*"([^"]+)"', rf'TransactionalTopology(\n    "\1_{n}"',
                          text, count=1)
        (dags / f"copy_{n:02d}_{source.name}").write_text(text)
    return dags


def fill(dags: Path) -> tuple[float, int, int]:
    from airflow.dag_processing.dagbag import DagBag

    start = time.perf_counter()
    bag = DagBag(str(dags))
    return time.perf_counter() - start, len(bag.dag_ids), len(bag.import_errors)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duplicates", action="store_true", help="copies keep the shipped topology ids")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("AIRFLOW_HOME", str(Path(tmp) / "airflow-home"))
        os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
        import logging

        logging.disable(logging.ERROR)
        import txdag.airflow.rendering as rendering
        from txdag.airflow.rendering import defining_files
        from txdag.topology.owner import check_one_file

        dags = project(Path(tmp), args.copies, args.duplicates)
        files = sorted(str(p) for p in dags.glob("*.py"))
        fill(dags)  # warm: imports, first reads
        timings: dict[str, list[float]] = {"with the check": [], "without (baseline)": []}
        counts = {}
        for _ in range(args.rounds):
            for label, check in (("with the check", defining_files), ("without (baseline)", lambda *a: [])):
                rendering.defining_files = check  # type: ignore[assignment]
                seconds, dag_count, errors = fill(dags)
                timings[label].append(seconds)
                counts[label] = (dag_count, errors)
        rendering.defining_files = defining_files
        alone = []
        for path in files:
            topology_id = re.search(r'TransactionalTopology\(\s*"([^"]+)"', Path(path).read_text())[1]
            start = time.perf_counter()
            try:
                check_one_file(topology_id, path, defining_files(topology_id, path))
            except Exception:
                pass
            alone.append(time.perf_counter() - start)
    print(f"{len(files)} DAG files ({args.copies} copies, {'same' if args.duplicates else 'own'} topology ids), "
          f"{args.rounds} rounds, median seconds to fill a DagBag:")
    for label, values in timings.items():
        dag_count, errors = counts[label]
        print(f"  {label:20s} {statistics.median(values):.3f} s  ({dag_count} DAGs, {errors} import errors)")
    with_check, without = (statistics.median(v) for v in timings.values())
    print(f"  ratio                {with_check / without:.2f}x; the check adds "
          f"{(with_check - without) / len(files) * 1000:.2f} ms per file")
    print(f"  the check alone      median {statistics.median(alone) * 1000:.2f} ms per file "
          f"(its own topology id: listing the folder, reading its files, parsing those that hold the id)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

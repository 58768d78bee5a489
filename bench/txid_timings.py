"""Per-txid timings of a topology's runs, read from Airflow's REST API: coordinate, process and commit
durations, and the scheduler's gaps between them (end of one task to the start of the next).

    eval "$(bash scripts/airflow.sh env)"; .venv/bin/python bench/txid_timings.py tweets_analytics
"""

from __future__ import annotations

import argparse
import statistics

from txdag.airflow.api import api_from_env
from txdag.airflow.timings import TASKS, all_timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dag_id")
    args = parser.parse_args()
    rows = all_timings(api_from_env(), args.dag_id)
    if not rows:
        print(f"no run of {args.dag_id} with all three tasks successful")
        return 1
    columns = [*TASKS, "gap c>p", "gap p>c", "total"]
    print(f"{'run':<44}" + "".join(f"{c:>11}" for c in columns))
    for row in rows:
        print(f"{row['run']:<44}" + "".join(f"{row[c]:>10.1f}s" for c in columns))
    print(f"{'median':<44}" + "".join(f"{statistics.median(r[c] for r in rows):>10.1f}s" for c in columns))
    print("(a process task's wait, its job done, for txid - 1 to commit is in 'process')")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

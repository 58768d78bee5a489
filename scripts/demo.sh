#!/usr/bin/env bash
# The demo: installs what is missing, starts Redis and ZooKeeper on loopback, and runs txdag's demo.
#
#   bash scripts/demo.sh [demo args...]
#
# The services stay up afterwards; stop them with: bash scripts/services.sh stop
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh
bash scripts/services.sh start

export TXDAG_REDIS_URL="redis://127.0.0.1:${TXDAG_REDIS_PORT:-6391}/0"
export TXDAG_ZK_HOSTS="127.0.0.1:${TXDAG_ZK_PORT:-2191}"

# Exit 0 when txdag.demo exists, 1 when it does not; any other error (txdag fails to import) shows its traceback.
has_demo=0
.venv/bin/python - <<'PY' || has_demo=$?
import importlib.util
import sys

try:
    found = importlib.util.find_spec("txdag.demo") is not None
except ModuleNotFoundError:
    found = False
sys.exit(0 if found else 1)
PY

case "$has_demo" in
0) exec .venv/bin/python -m txdag.demo "$@" ;;
1)
    echo "demo: txdag.demo is not there yet: the demo lands with the Airflow wiring."
    echo "demo: Redis ($TXDAG_REDIS_URL) and ZooKeeper ($TXDAG_ZK_HOSTS) are up; stop them with: bash scripts/services.sh stop"
    ;;
*)
    echo "demo: error: could not look up txdag.demo (see above)" >&2
    exit "$has_demo"
    ;;
esac

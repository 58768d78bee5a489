#!/usr/bin/env bash
# The test command: installs what is missing, starts Redis and ZooKeeper on loopback, runs the whole pytest
# suite, and exits with pytest's exit code. Extra arguments go to pytest (e.g. -q, -x, -k expr, a path).
#
#   bash scripts/test.sh [pytest args...]
#
# The e2e tests (tests/e2e) start what else they need themselves: PostgreSQL (scripts/postgres.sh, through
# scripts/airflow.sh) and one Airflow instance for the session, which they stop at the end.
# Services are left running for the next run (stop them with: bash scripts/services.sh stop; bash
# scripts/postgres.sh stop), except under CI=true or TXDAG_STOP_SERVICES=1, where the ones this checkout started
# are stopped at the end (Redis, ZooKeeper, PostgreSQL, and an Airflow of the default AIRFLOW_HOME).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh
bash scripts/services.sh start

if [[ "${CI:-}" == true || "${TXDAG_STOP_SERVICES:-}" == 1 ]]; then
    # Each stop only touches what this checkout started (pid files and data directories under its .run/).
    trap 'env -u AIRFLOW_HOME bash scripts/airflow.sh stop || true; bash scripts/postgres.sh stop || true;
          bash scripts/services.sh stop || true' EXIT
fi

# Access control is on: the tests log in as the Redis admin user and authenticate to ZooKeeper with a digest,
# all from .run/credentials.env (scripts/credentials.sh); tests/access.py creates the restricted users it needs.
# shellcheck source=/dev/null
source "$(bash scripts/credentials.sh)"
export TXDAG_TEST_REDIS_URL="redis://$TXDAG_REDIS_ADMIN_USER:$TXDAG_REDIS_ADMIN_PASSWORD@127.0.0.1:${TXDAG_REDIS_PORT:-6391}/0"
export TXDAG_TEST_ZK_HOSTS="127.0.0.1:${TXDAG_ZK_PORT:-2191}"
export TXDAG_TEST_ZK_AUTH="$TXDAG_ZK_USER:$TXDAG_ZK_PASSWORD"

# Run the whole suite unless an argument already names a test path (tests/unit, tests/x.py::test_y, ...).
paths=(tests)
for arg in "$@"; do
    if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then
        paths=()
        break
    fi
done

echo "test: .venv/bin/python -m pytest ${paths[*]} $*"
rc=0
.venv/bin/python -m pytest "${paths[@]}" "$@" || rc=$?
exit "$rc"

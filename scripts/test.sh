#!/usr/bin/env bash
# The test command: installs what is missing, starts Redis, ZooKeeper and Kafka on loopback, runs the whole pytest
# suite in tiers (unit, integration, e2e, demo, cluster, jepsen: see below), prints each tier's time and result, and
# exits non-zero when a tier failed. Extra arguments go to pytest (e.g. -q, -x, -k expr); with a test path, only that runs.
#
#   bash scripts/test.sh [pytest args...]
#
# The e2e tests (tests/e2e) start what else they need themselves: PostgreSQL (scripts/postgres.sh, through
# scripts/airflow.sh) and one Airflow instance for the session, which they stop at the end.
# Services are left running for the next run (stop them with: bash scripts/services.sh stop; bash
# scripts/postgres.sh stop), except under CI=true or TXDAG_STOP_SERVICES=1, where the ones this checkout started
# are stopped at the end (Redis, ZooKeeper, Kafka, PostgreSQL, and an Airflow of the default AIRFLOW_HOME).
set -euo pipefail

if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then # the comment above, before anything runs or is created
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
    exit 0
fi

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
# Kafka listens on loopback only, without authentication.
# shellcheck source=/dev/null
source "$(bash scripts/credentials.sh)"
export TXDAG_TEST_REDIS_URL="redis://$TXDAG_REDIS_ADMIN_USER:$TXDAG_REDIS_ADMIN_PASSWORD@127.0.0.1:${TXDAG_REDIS_PORT:-6391}/0"
export TXDAG_TEST_ZK_HOSTS="127.0.0.1:${TXDAG_ZK_PORT:-2191}"
export TXDAG_TEST_ZK_AUTH="$TXDAG_ZK_USER:$TXDAG_ZK_PASSWORD"
export TXDAG_TEST_KAFKA_BOOTSTRAP="127.0.0.1:${TXDAG_KAFKA_PORT:-9391}"
export TXDAG_TEST_KAFKA_SASL_BOOTSTRAP="127.0.0.1:${TXDAG_KAFKA_SASL_PORT:-$((${TXDAG_KAFKA_PORT:-9391} + 2))}"

# An argument that names a test path (tests/unit, tests/x.py::test_y, ...) runs pytest on just that, once.
for arg in "$@"; do
    if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then
        echo "test: .venv/bin/python -m pytest $*"
        exec .venv/bin/python -m pytest "$@"
    fi
done

# Else the whole suite, tier by tier (each its own pytest run, all run even when one fails), then each tier's
# time and result. The integration tier runs on two workers (pytest-xdist): each test has its own key prefix and
# znode root, each worker its own Spark session; a worker that runs out of tests takes half of the other's pending
# ones (--dist worksteal), so that the slow tests do not run one after another on one worker while the other idles
# (tests/integration/conftest.py also starts the slowest first). The e2e tier shares one Airflow; the demo tier
# starts its own; the cluster tier starts and stops scripts/cluster.sh's loopback cluster on ports of its own, and
# prints what its tests printed (-rfEP: the failures and errors, then the passed tests' output, each kill's cost in
# time); the jepsen tier runs one short schedule of bench/jepsen.py's faults on servers and an Airflow of its own
# and prints the harness's lines (faults injected, violations).
TIERS=("unit:tests/unit" "integration:tests/integration -n 2 --dist worksteal" "e2e:tests/e2e" "demo:tests/demo"
    "cluster:tests/cluster -rfEP" "jepsen:tests/jepsen -rfEP")
LOGS="$ROOT/.run/test-logs"
mkdir -p "$LOGS"
summary=()
rc=0
passed=0
failed=0
for tier in "${TIERS[@]}"; do
    name="${tier%%:*}"
    read -r -a targs <<<"${tier#*:}"
    echo "test: tier $name: .venv/bin/python -m pytest ${targs[*]} $*"
    started=$SECONDS
    trc=0
    .venv/bin/python -m pytest "${targs[@]}" "$@" 2>&1 | tee "$LOGS/$name.log" || trc=${PIPESTATUS[0]}
    # pytest's closing line, e.g. "3 failed, 800 passed, 1 skipped in 61.2s" (or "no tests ran in 0.1s")
    result="$(grep -E ' in [0-9.]+s( \([0-9:]+\))? ?=*$' "$LOGS/$name.log" | tail -n 1 | sed -E 's/^=+ //; s/ =+$//')"
    p="$(grep -oE '[0-9]+ passed' <<<"$result" | grep -oE '[0-9]+' || echo 0)"
    passed=$((passed + p))
    for f in $(grep -oE '[0-9]+ (failed|error|errors)' <<<"$result" | grep -oE '^[0-9]+'); do
        failed=$((failed + f))
    done
    if ((trc == 5)); then
        trc=0 # this tier had no test selected (-k, -m): not a failure by itself
    fi
    if ((trc != 0 && rc == 0)); then
        rc=$trc
    fi
    summary+=("$(printf '%-12s %6d s   exit %-3d %s' "$name" "$((SECONDS - started))" "$trc" "$result")")
done
echo
echo "test: time and result by tier (logs in .run/test-logs/):"
printf '  %s\n' "${summary[@]}"
if ((passed == 0 && rc == 0)); then
    echo "test: no test ran in any tier" >&2
    rc=5
fi
echo "tiers: $passed passed, $failed failed"
# The failed tests by name (pytest's short summary lines), so that the end of a long CI log says which ones.
if ((failed > 0)); then
    for tier in "${TIERS[@]}"; do
        grep -hE '^(FAILED|ERROR) tests/' "$LOGS/${tier%%:*}.log" | cut -c1-300 | sed 's/^/  /' || true
    done
fi
exit "$rc"

#!/usr/bin/env bash
# One-shot set-up of docker-compose.yaml, run once the api-server is healthy (service txdag-init):
#   1. the topologies' Redis user (`txdag acl redis --apply`: only the keys of the topologies in the DAG folder,
#      source keys writable so that `txdag seed` works), created through the Redis admin user and saved to
#      Redis's ACL file (ACL SAVE), so that a restart of Redis keeps it;
#   2. the topologies' 1-slot commit pools (`txdag pools sync`, through Airflow's REST API).
# Exits non-zero, naming the step, when one fails.
#
# Environment (compose's values are the defaults; tests/e2e/test_compose_init.py runs it on loopback services):
#   AIRFLOW__TXDAG__DAGS_FOLDER                         the DAG folder (else TXDAG_DAGS_FOLDER, /opt/airflow/dags)
#   TXDAG_REDIS_HOST, TXDAG_REDIS_PORT                  txdag's Redis (default redis:6379)
#   TXDAG_REDIS_ADMIN_USER, TXDAG_REDIS_ADMIN_PASSWORD  its admin login (required)
#   TXDAG_REDIS_USER, TXDAG_REDIS_PASSWORD              the topologies' user to create (required)
#   TXDAG_AIRFLOW_URL, TXDAG_AIRFLOW_USER, TXDAG_AIRFLOW_PASSWORD   Airflow's REST API and its login
set -euo pipefail

DAGS="${AIRFLOW__TXDAG__DAGS_FOLDER:-${TXDAG_DAGS_FOLDER:-/opt/airflow/dags}}"
REDIS_URL="redis://${TXDAG_REDIS_HOST:-redis}:${TXDAG_REDIS_PORT:-6379}/0"

say() { printf 'txdag-init: %s\n' "$*"; }
die() {
    printf 'txdag-init: error: %s\n' "$*" >&2
    exit 1
}

for var in TXDAG_REDIS_ADMIN_USER TXDAG_REDIS_ADMIN_PASSWORD TXDAG_REDIS_USER TXDAG_REDIS_PASSWORD \
    TXDAG_AIRFLOW_PASSWORD; do
    [[ -n "${!var:-}" ]] || die "$var is not set"
done
[[ -d "$DAGS" ]] || die "the DAG folder $DAGS does not exist (AIRFLOW__TXDAG__DAGS_FOLDER)"

if ! grep -q -l 'TransactionalTopology(' "$DAGS"/*.py 2>/dev/null; then
    say "no topology in $DAGS: no Redis user and no pool to create"
    exit 0
fi

say "step 1/2: Redis user $TXDAG_REDIS_USER at ${REDIS_URL#redis://}, limited to the keys of the topologies in $DAGS"
txdag acl redis --dags "$DAGS" --user "$TXDAG_REDIS_USER" --password-env TXDAG_REDIS_PASSWORD \
    --source-write --apply "$REDIS_URL" ||
    die "step 1/2 failed: the Redis user $TXDAG_REDIS_USER was not created (see the message above)"

say "step 2/2: the commit pools, through Airflow's REST API at ${TXDAG_AIRFLOW_URL:-(TXDAG_AIRFLOW_URL not set)}"
txdag pools sync --dags "$DAGS" || die "step 2/2 failed: txdag pools sync (see the message above)"
say "done"

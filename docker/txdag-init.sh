#!/usr/bin/env bash
# One-shot set-up of docker-compose.yaml, run once the api-server is healthy (service txdag-init):
#   1. the topologies' Redis user (txdag acl redis: only the keys of the topologies in the DAG folder, source
#      keys writable so that `txdag seed` works), created through the admin user;
#   2. the topologies' 1-slot commit pools (txdag pools sync, through the REST API).
set -euo pipefail

DAGS="${TXDAG_DAGS_FOLDER:-/opt/airflow/dags}"
say() { printf 'txdag-init: %s\n' "$*"; }

if grep -q -l 'TransactionalTopology(' "$DAGS"/*.py 2>/dev/null; then
    txdag acl redis --dags "$DAGS" --user "$TXDAG_REDIS_USER" --password-env TXDAG_REDIS_PASSWORD --source-write |
        python - <<'PY'
import os, shlex, sys

import redis

r = redis.Redis(host=os.environ.get("TXDAG_REDIS_HOST", "redis"), port=int(os.environ.get("TXDAG_REDIS_PORT", "6379")),
                username=os.environ["TXDAG_REDIS_ADMIN_USER"], password=os.environ["TXDAG_REDIS_ADMIN_PASSWORD"])
for line in sys.stdin:
    if line.strip():
        print("txdag-init: Redis:", r.execute_command(*shlex.split(line)))
PY
    say "Redis user $TXDAG_REDIS_USER: only the keys of the topologies in $DAGS"
else
    say "no topology in $DAGS: no Redis user created"
fi

txdag pools sync --dags "$DAGS"
say "done"

#!/usr/bin/env bash
# The demo: seed 000's tweets analytics through Airflow 3, Spark (local mode), ZooKeeper and Redis.
#
#   bash scripts/demo.sh              the Airflow demo (installs and starts what is missing; everything on loopback)
#   bash scripts/demo.sh --in-process the same topology run in one Python process, without Airflow or Spark
#
# It installs what is missing (scripts/setup.sh), starts Redis and ZooKeeper (scripts/services.sh), PostgreSQL
# and Airflow's api-server, dag-processor, scheduler and triggerer (scripts/airflow.sh), loads 500 sample tweets
# into Redis database 1 (TXDAG_DEMO_REDIS_DB), runs the tweets_analytics DAG until every tweet is committed, and
# prints the top users and hashtags and the UI's URL and login. Everything stays up afterwards:
#   bash scripts/airflow.sh stop; bash scripts/services.sh stop
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh
bash scripts/services.sh start

if [[ "${1:-}" == --in-process ]]; then
    shift
    eval "$(bash scripts/services.sh env)" # the admin user and the ZooKeeper digest of .run/credentials.env
    exec .venv/bin/python -m txdag.demo "$@"
fi

TXDAG_AIRFLOW_REDIS_DB="${TXDAG_DEMO_REDIS_DB:-1}" bash scripts/airflow.sh start
eval "$(bash scripts/airflow.sh env)"
exec .venv/bin/python -m txdag.airflow.demo "$@"

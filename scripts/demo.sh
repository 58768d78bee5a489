#!/usr/bin/env bash
# The demo: seed 000's tweets analytics through Airflow 3, Spark, ZooKeeper and Redis.
#
#   bash scripts/demo.sh                 through Airflow, with warm Spark: a Spark Connect server that every txid
#                                        shares (scripts/spark-connect.sh), committed counts within about a minute;
#                                        its DAG folder is dags_warm/ (tweets_analytics with spark_mode="connect")
#   bash scripts/demo.sh --spark-submit  through Airflow, one spark-submit application per txid (the design's cold
#                                        path: about 20 s of Spark a txid on 2 cores); its DAG folder is dags/
#   bash scripts/demo.sh --kafka         through Airflow with warm Spark, over the Kafka topic `tweets` of
#                                        scripts/services.sh's broker (KafkaSource): it produces the sample tweets
#                                        there and checks the counts against the topic read back; DAG folder
#                                        dags_kafka/ (tweets_kafka, its states under kafka: in Redis)
#   bash scripts/demo.sh --in-process    the same topology run in one Python process, without Airflow or Spark
#   bash scripts/demo.sh --help          this text
#
# It installs what is missing (scripts/setup.sh), starts Redis and ZooKeeper (scripts/services.sh), PostgreSQL
# and Airflow's api-server, dag-processor, scheduler and triggerer (scripts/airflow.sh), loads 500 sample tweets
# into Redis database 1 (TXDAG_DEMO_REDIS_DB), keeps two runs of the tweets_analytics DAG in flight until every
# tweet is committed, printing a line per txid as it commits, checks the counts against a recount of the tweets,
# and prints the top users and hashtags and the UI's URL and login. Options of the demo itself: --tweets N (how
# many sample tweets to load into an empty source, default 500), --at-once N (runs kept in flight, default 2),
# --batch-size N (--in-process only, default 100). Everything stays up afterwards:
#   bash scripts/airflow.sh stop; bash scripts/spark-connect.sh stop; bash scripts/services.sh stop
# Ports: the environment variables of scripts/services.sh, postgres.sh, airflow.sh and spark-connect.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$ROOT/scripts/lib/common.sh"

usage_error() {
    printf 'demo: error: %s (bash scripts/demo.sh --help lists the options)\n' "$*" >&2
    exit 2
}

# The options are checked here, before anything is installed or started.
mode=connect
args=()
while (($#)); do
    case "$1" in
    -h | --help)
        usage
        exit 0
        ;;
    --spark-submit) mode=submit ;;
    --kafka) mode=kafka ;;
    --in-process) mode=in-process ;;
    --tweets | --at-once | --batch-size)
        [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || usage_error "$1 takes a whole number >= 1, got '${2:-}'"
        args+=("$1" "$2")
        shift
        ;;
    *) usage_error "unknown option '$1'" ;;
    esac
    shift
done
if [[ "$mode" == in-process && " ${args[*]} " == *" --at-once "* ]]; then
    usage_error "--at-once is for the Airflow demo (the in-process one keeps two txids in flight)"
fi
if [[ "$mode" != in-process && " ${args[*]} " == *" --batch-size "* ]]; then
    usage_error "--batch-size is for --in-process (the Airflow demo's batch is the DAG's max_transaction_size, 100)"
fi

started=$SECONDS
bash scripts/setup.sh
bash scripts/services.sh start
say "set-up and services ready in $((SECONDS - started)) s"

if [[ "$mode" == in-process ]]; then
    eval "$(bash scripts/services.sh env)" # the admin user and the ZooKeeper digest of .run/credentials.env
    exec .venv/bin/python scripts/demo_local.py "${args[@]}"
fi

# The Spark mode is part of the topology's definition: the demo's DAG folder is dags_warm/ (tweets_analytics with
# spark_mode="connect") or, with --spark-submit, dags/ (spark_mode "submit"). An Airflow already running with the
# other folder is restarted.
if [[ "$mode" == connect ]]; then
    dags_folder="$ROOT/dags_warm"
elif [[ "$mode" == kafka ]]; then
    dags_folder="$ROOT/dags_kafka"
    args+=(--kafka)
else
    dags_folder="$ROOT/dags"
fi
export TXDAG_DAGS_FOLDER="$dags_folder"
record="${AIRFLOW_HOME:-$ROOT/.run/airflow}/components.env"
if bash scripts/airflow.sh status >/dev/null 2>&1 && ! grep -qxF "export AIRFLOW__TXDAG__DAGS_FOLDER='$dags_folder'" "$record"; then
    say "Airflow runs with another DAG folder: restarting it with $dags_folder ($mode mode)"
    bash scripts/airflow.sh stop
fi
warming=""
if [[ "$mode" == connect || "$mode" == kafka ]]; then
    bash scripts/spark-connect.sh start
    # The first txid must not pay for a cold server: the topology's shared session is warmed while Airflow starts.
    dag=tweets_analytics
    [[ "$mode" == connect ]] || dag=tweets_kafka
    warm_log="$ROOT/.run/demo-warm.log"
    server=(--url "$(bash scripts/spark-connect.sh url)") # the connection airflow.sh defines, unless one is given
    [[ -z "${AIRFLOW_CONN_SPARK_CONNECT_DEFAULT:-}" ]] || server=()
    .venv/bin/txdag warm "$dag" "${server[@]}" >"$warm_log" 2>&1 &
    warming=$!
    trap 'kill "$warming" 2>/dev/null || true' EXIT # not left running if Airflow fails to start
fi
TXDAG_AIRFLOW_REDIS_DB="${TXDAG_DEMO_REDIS_DB:-1}" bash scripts/airflow.sh start
say "Airflow ready at +$((SECONDS - started)) s"
if [[ -n "$warming" ]]; then
    if wait "$warming"; then
        say "$(grep '^warmed' "$warm_log")"
    else
        say "warning: could not warm the Spark session ($warm_log); the first txid starts it: $(tail -n 1 "$warm_log")"
    fi
fi
eval "$(bash scripts/airflow.sh env)"
rc=0
.venv/bin/python scripts/demo_airflow.py "${args[@]}" || rc=$?
if [[ "$mode" == kafka ]]; then
    say "total $((SECONDS - started)) s (Spark mode: connect, source: the Kafka topic tweets)"
else
    say "total $((SECONDS - started)) s (Spark mode: $mode)"
fi
exit "$rc"

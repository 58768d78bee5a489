#!/usr/bin/env bash
# An Airflow 3.3 instance for txdag on loopback: PostgreSQL metadata database, LocalExecutor, and the four
# components as separate background processes (no 'airflow standalone': it serves logs on 0.0.0.0).
#
#   bash scripts/airflow.sh start     PostgreSQL + database, airflow.cfg, 'airflow db migrate', then api-server,
#                                     dag-processor, scheduler and triggerer; waits until all report healthy
#   bash scripts/airflow.sh stop      stop what this script started for this AIRFLOW_HOME, and wait
#   bash scripts/airflow.sh status    what answers; exit 0 only when the API and all components are healthy
#   bash scripts/airflow.sh env       export lines to eval, to use the airflow CLI against this instance
#   bash scripts/airflow.sh login     the UI's URL, user and password
#   bash scripts/airflow.sh crash C   SIGKILL component C's whole session (its workers too), like a dead machine
#   bash scripts/airflow.sh restart C start component C again (after a crash), with the recorded environment
#
# Environment (all optional):
#   AIRFLOW_HOME               default <repo>/.run/airflow
#   TXDAG_AIRFLOW_PORT         API server (UI, REST, execution API) port, default 8791
#   TXDAG_AIRFLOW_HOST         the loopback address the API server binds to (base_url, execution API) and the Spark
#                              drivers' SPARK_LOCAL_IP, default 127.0.0.1; TXDAG_REDIS_HOST, TXDAG_ZK_HOST,
#                              TXDAG_SPARK_CONNECT_HOST the addresses of the default connections (scripts/services.sh
#                              and spark-connect.sh read the same ones), TXDAG_PG_HOST PostgreSQL's (postgres.sh);
#                              each defaults to 127.0.0.1 and is refused outside 127.0.0.0/8 (Kafka stays on 127.0.0.1)
#   TXDAG_AIRFLOW_DB           metadata database name, default airflow (role "airflow"; see scripts/postgres.sh)
#   TXDAG_AIRFLOW_FRESH_DB=1   drop and recreate that database before migrating (ignored if already running)
#   TXDAG_DAGS_FOLDER          default <repo>/dags          TXDAG_PLUGINS_FOLDER   default <repo>/plugins
#   TXDAG_AIRFLOW_PARALLELISM  [core] parallelism, default 8 (the LocalExecutor pre-forks that many workers)
#   TXDAG_AIRFLOW_WAIT         seconds to wait for the components to become healthy, default 120
#   TXDAG_PG_PORT, TXDAG_REDIS_PORT, TXDAG_ZK_PORT   ports of PostgreSQL (5491), Redis (6391), ZooKeeper (2191)
#   TXDAG_AIRFLOW_REDIS_DB     Redis database number of the default redis_default connection, default 0
#
# Configuration: 'start' rewrites $AIRFLOW_HOME/airflow.cfg from these settings every time (do not edit it; use
# AIRFLOW__SECTION__KEY environment variables, which win over the file), and copies config/airflow_local_settings.py
# over $AIRFLOW_HOME/config/airflow_local_settings.py (an AIRFLOW_HOME of this script's, not one of yours). Generated secrets (fernet key, JWT
# secret, API secret key, admin password) are kept in $AIRFLOW_HOME/txdag-secrets.env and
# $AIRFLOW_HOME/simple_auth_manager_passwords.json and survive restarts.
# Environment of the components: they inherit the caller's environment. The script only fills in what is unset:
# AIRFLOW_CONN_REDIS_DEFAULT, AIRFLOW_CONN_ZOOKEEPER_DEFAULT, AIRFLOW_CONN_KAFKA_DEFAULT, AIRFLOW_CONN_SPARK_DEFAULT
# (JSON connections to the servers of scripts/services.sh and Spark local[*]), AIRFLOW_CONN_SPARK_CONNECT_DEFAULT (the
# server of scripts/spark-connect.sh, for spark_mode="connect") and SPARK_LOCAL_IP=$TXDAG_AIRFLOW_HOST; .venv/bin goes first
# on PATH.
# (Those connection ids are the defaults of txdag's topologies and CLI, defined in include/txdag/defaults.py.)
# Access control: redis_default logs in as TXDAG_REDIS_USER of .run/credentials.env, which 'start' (re)creates
# with `txdag acl redis` for the topologies in the DAGs folder; zookeeper_default has the ZooKeeper digest.
# So to add or override a connection, variable or option, export AIRFLOW_CONN_<ID>, AIRFLOW_VAR_<KEY> or
# AIRFLOW__<SECTION>__<KEY> before 'start'. The AIRFLOW_*, TXDAG_* and SPARK_* variables the components got are
# recorded in $AIRFLOW_HOME/components.env, which 'env' prints.
# Files: $AIRFLOW_HOME/<component>.log and <component>.pid (the pid is its process group: each component runs
# in its own session), logs/ (task logs), db-migrate.log.
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then # the comment above, before anything runs or is created
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
    exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
export AIRFLOW_HOME="${AIRFLOW_HOME:-$ROOT/.run/airflow}"
PORT="${TXDAG_AIRFLOW_PORT:-8791}"
DB="${TXDAG_AIRFLOW_DB:-airflow}"
DB_ROLE=airflow
# The DAG folder: TXDAG_DAGS_FOLDER (this script's input), else the one a shell that ran `eval "$(... env)"` holds.
# The components read it from airflow.cfg ([core] dags_folder below) and [txdag] dags_folder, never from
# TXDAG_DAGS_FOLDER (deprecated for them: the plugin warns); the txdag command of `env` reads it too
DAGS_FOLDER="${TXDAG_DAGS_FOLDER:-${AIRFLOW__TXDAG__DAGS_FOLDER:-$ROOT/dags}}"
export AIRFLOW__TXDAG__DAGS_FOLDER="$DAGS_FOLDER"
unset TXDAG_DAGS_FOLDER
PLUGINS_FOLDER="${TXDAG_PLUGINS_FOLDER:-$ROOT/plugins}"
PARALLELISM="${TXDAG_AIRFLOW_PARALLELISM:-8}"
WAIT_SECONDS="${TXDAG_AIRFLOW_WAIT:-120}"
COMPONENTS=(api-server dag-processor scheduler triggerer)
SECRETS="$AIRFLOW_HOME/txdag-secrets.env"
PASSWORDS="$AIRFLOW_HOME/simple_auth_manager_passwords.json"
ENV_RECORD="$AIRFLOW_HOME/components.env"

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$ROOT/scripts/lib/common.sh"
HOST="$(loopback_host TXDAG_AIRFLOW_HOST)"
REDIS_HOST="$(loopback_host TXDAG_REDIS_HOST)"
ZK_HOST="$(loopback_host TXDAG_ZK_HOST)"
SPARK_CONNECT_HOST="$(loopback_host TXDAG_SPARK_CONNECT_HOST)"
BASE_URL="http://$HOST:$PORT"

if ! [[ "$PORT" =~ ^[0-9]+$ ]] || ((PORT < 1 || PORT > 65535)); then
    die "not a port number: '$PORT'"
fi
[[ "$AIRFLOW_HOME" == /* ]] || AIRFLOW_HOME="$(pwd)/$AIRFLOW_HOME"

# --- probes -------------------------------------------------------------------------------------------------

# Prints the health JSON of the API server, or fails.
health_json() { curl -sf --max-time 3 "$BASE_URL/api/v2/monitor/health" 2>/dev/null; }

# Prints one line per part of the health JSON: "<part> <status>".
health_lines() {
    health_json | "$VENV/bin/python" -c '
import json, sys
for part, info in json.load(sys.stdin).items():
    print(part, (info or {}).get("status"))' 2>/dev/null
}

# Everything healthy: the metadata database, the scheduler, the triggerer and the DAG processor.
all_healthy() {
    local lines
    lines="$(health_lines)" || return 1
    [[ -n "$lines" ]] && ! grep -qv ' healthy$' <<<"$lines" &&
        grep -q '^scheduler healthy$' <<<"$lines" && grep -q '^triggerer healthy$' <<<"$lines" &&
        grep -q '^dag_processor healthy$' <<<"$lines"
}

pid_file() { printf '%s/%s.pid\n' "$AIRFLOW_HOME" "$1"; }
log_file() { printf '%s/%s.log\n' "$AIRFLOW_HOME" "$1"; }

# Prints fields of /proc/$1/stat after the command name: "<state> <ppid> <pgrp> <session> ... <starttime> ...".
proc_stat() {
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    printf '%s\n' "${stat##*) }"
}

# True when process $1 exists and is not a zombie.
alive() {
    local fields
    fields="$(proc_stat "$1")" || return 1
    [[ "${fields%% *}" != Z ]]
}

# Prints "<pid> <starttime>" of process $1 (start time in clock ticks since boot: tells a reused pid apart).
pid_identity() {
    local -a f
    read -r -a f <<<"$(proc_stat "$1")" || return 1
    printf '%s %s\n' "$1" "${f[19]}"
}

# Prints the pid of component $1 when the process recorded in its pid file is still that process: same pid and
# start time, alive. Each component is the leader of its own session, so the pid is also its session id.
component_pid() {
    local file recorded pid
    file="$(pid_file "$1")"
    [[ -f "$file" ]] || return 1
    recorded="$(head -n 1 "$file")"
    pid="${recorded%% *}"
    [[ "$pid" =~ ^[0-9]+$ ]] && alive "$pid" || return 1
    [[ "$(pid_identity "$pid")" == "$recorded" ]] || return 1
    printf '%s\n' "$pid"
}

# Pids of every live process in the sessions given (our components': the components, their workers, the task
# processes and what those start, unless they left the session).
session_pids() {
    local dir p sid
    local -a f
    (($#)) || return 0
    for dir in /proc/[0-9]*; do
        p="${dir#/proc/}"
        read -r -a f <<<"$(proc_stat "$p" 2>/dev/null)" || continue
        if ((${#f[@]} <= 4)) || [[ "${f[0]}" == Z ]]; then
            continue
        fi
        for sid in "$@"; do
            if [[ "${f[3]}" == "$sid" ]]; then
                printf '%s\n' "$p"
                break
            fi
        done
    done
}

# --- configuration ------------------------------------------------------------------------------------------

random_hex() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }

ensure_secrets() {
    if [[ ! -s "$SECRETS" ]]; then
        local fernet
        fernet="$("$VENV/bin/python" -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
        (
            umask 077
            cat >"$SECRETS" <<EOF
FERNET_KEY=$fernet
API_SECRET_KEY=$(random_hex 16)
JWT_SECRET=$(random_hex 32)
EOF
        )
    fi
    if [[ ! -s "$PASSWORDS" ]]; then
        (umask 077 && printf '{"admin": "%s"}\n' "$(random_hex 12)" >"$PASSWORDS")
    fi
}

write_config() {
    local sql_conn="$1"
    # shellcheck disable=SC1090
    source "$SECRETS"
    (
        umask 077
        cat >"$AIRFLOW_HOME/airflow.cfg" <<EOF
# Written by scripts/airflow.sh start (rewritten at every start: override with AIRFLOW__SECTION__KEY variables).
[core]
dags_folder = $DAGS_FOLDER
plugins_folder = $PLUGINS_FOLDER
executor = LocalExecutor
parallelism = $PARALLELISM
load_examples = False
dags_are_paused_at_creation = False
default_timezone = utc
fernet_key = $FERNET_KEY
auth_manager = airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager
simple_auth_manager_users = admin:admin
simple_auth_manager_all_admins = False
simple_auth_manager_passwords_file = $PASSWORDS
execution_api_server_url = $BASE_URL/execution/

[database]
sql_alchemy_conn = $sql_conn

[api]
host = $HOST
port = $PORT
base_url = $BASE_URL
secret_key = $API_SECRET_KEY
workers = 1

[api_auth]
jwt_secret = $JWT_SECRET

[logging]
base_log_folder = $AIRFLOW_HOME/logs

[scheduler]
# No health-check server (it would listen on 0.0.0.0:8974).
enable_health_check = False
# Recovery within ~30 s of a crash (issue 20; docs/operations.md, "Recovery and timeouts"). Too short and a GC
# pause or a busy machine kills a healthy task (or its scheduler's): each timeout leaves 4 heartbeats of 5 s.
# A task whose supervisor stopped heartbeating (dead, frozen, cut off) is failed and retried after 20 s (default 300).
task_instance_heartbeat_timeout = 20
# How often the scheduler looks for those tasks (default 10): at most 5 s more; one small query each time.
task_instance_heartbeat_timeout_detection_interval = 5
# A scheduler silent for 20 s is dead (default 30): its successor resets its tasks (they died with its executor).
scheduler_health_check_threshold = 20
# How often a (restarted) scheduler looks for a dead scheduler's tasks (default 300: the issue's 315 s stall).
orphaned_tasks_check_interval = 10
# Latency (issue 18): the scheduler sleeps this long after a loop that found nothing to do (default 1). Each step of
# a txid (a triggered run, then each finished task) waits for the next loop, so the default cost a 1-tweet txid
# ~2.4 s of its ~4 s; at 0.25 it waits ~0.6 s (P2 of bench/throughput.py: 3.99 s -> 2.00 s median of 10). An idle
# scheduler then uses ~4% of a core instead of ~1%; a busy one never sleeps, so throughput does not pay for it.
scheduler_idle_sleep_time = 0.25

[workers]
# Airflow's defaults, kept, and why they agree with the above: the supervisor heartbeats every 5 s; one heartbeat
# (like each API call of a task) is retried 5 times over ~31 s, so a task outlives an API server restart; after
# 3 failed heartbeats (~100 s cut off) it kills its task, whose retry started long before (fenced by its attempt).
min_heartbeat_interval = 5
max_failed_heartbeats = 3
execution_api_retries = 5
execution_api_timeout = 5

[triggerer]
# A triggerer silent for 20 s is dead (default 30): a restarted one takes over its triggers (the deferred commit
# waits) only then. It heartbeats every 5 s (job_heartbeat_sec), so 4 heartbeats; too short and a busy triggerer's
# triggers move to another one and back (each fires at most once; a commit that resumes looks again).
triggerer_health_check_threshold = 20

[dag_processor]
# List the DAG folder every 3 s (a new file shows up within a few seconds) and re-parse a file at most every
# 30 s (a change shows up within ~30 s; every 10 s cost 5-10% of a core on 2 cores, bench/throughput.py).
refresh_interval = 3
bundle_refresh_check_interval = 1
min_file_process_interval = 30
parsing_processes = 2
print_stats_interval = 300
EOF
    )
    # Airflow's local settings for txdag (config/airflow_local_settings.py; rewritten at every start): the scheduler
    # imports the Spark Connect client before it forks the LocalExecutor's workers, so no task process imports it.
    mkdir -p "$AIRFLOW_HOME/config"
    cp "$ROOT/config/airflow_local_settings.py" "$AIRFLOW_HOME/config/airflow_local_settings.py"
}

# credential NAME (scripts/lib/common.sh): one value of .run/credentials.env. The components get only the
# connections' own user and password.

# Creates (or resets) Redis user $1 with password $2, limited to the keys of the topologies in the DAGs folder
# (`txdag acl redis`; their sources read-write, as the demo seeds them with it), as the Redis admin user.
create_redis_user() {
    grep -q -l 'TransactionalTopology(' "$DAGS_FOLDER"/*.py 2>/dev/null || return 0
    TXDAG_ACL_PASSWORD="$2" TXDAG_REDIS_ADMIN_USER="$(credential TXDAG_REDIS_ADMIN_USER)" \
        TXDAG_REDIS_ADMIN_PASSWORD="$(credential TXDAG_REDIS_ADMIN_PASSWORD)" "$VENV/bin/python" -m txdag.cli.main acl \
        redis --dags "$DAGS_FOLDER" --user "$1" --password-env TXDAG_ACL_PASSWORD --source-write \
        --apply "redis://$REDIS_HOST:$3/0" >/dev/null ||
        die "could not create Redis user $1 on $REDIS_HOST:$3 (above: why; is Redis up? bash scripts/services.sh start)"
    say "Redis user $1: only the keys of the topologies in $DAGS_FOLDER (txdag acl redis --apply)"
}

# Sets the defaults of the components' environment and records it. The default connections log in as the
# restricted Redis user and with the ZooKeeper digest of .run/credentials.env.
component_environment() {
    local redis_port="${TXDAG_REDIS_PORT:-6391}" zk_port="${TXDAG_ZK_PORT:-2191}" user password
    if [[ -z "${AIRFLOW_CONN_REDIS_DEFAULT:-}" ]]; then
        user="$(credential TXDAG_REDIS_USER)" password="$(credential TXDAG_REDIS_PASSWORD)"
        create_redis_user "$user" "$password" "$redis_port"
        AIRFLOW_CONN_REDIS_DEFAULT="$(printf '{"conn_type": "redis", "host": "%s", "port": %s, "login": "%s",
            "password": "%s", "extra": {"db": %s}}' "$REDIS_HOST" "$redis_port" "$user" "$password" \
            "${TXDAG_AIRFLOW_REDIS_DB:-0}")"
    fi
    if [[ -z "${AIRFLOW_CONN_ZOOKEEPER_DEFAULT:-}" ]]; then
        AIRFLOW_CONN_ZOOKEEPER_DEFAULT="$(printf '{"conn_type": "zookeeper", "host": "%s", "port": %s, "login": "%s",
            "password": "%s"}' "$ZK_HOST" "$zk_port" "$(credential TXDAG_ZK_USER)" "$(credential TXDAG_ZK_PASSWORD)")"
    fi
    if [[ -z "${AIRFLOW_CONN_SPARK_DEFAULT:-}" ]]; then
        # shellcheck disable=SC2089,SC2090  # JSON, meant literally
        AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[*]"}'
    fi
    if [[ -z "${AIRFLOW_CONN_KAFKA_DEFAULT:-}" ]]; then  # KafkaSource's default: scripts/services.sh's broker
        AIRFLOW_CONN_KAFKA_DEFAULT="$(printf '{"conn_type": "kafka", "extra": {"bootstrap.servers": "%s:%s"}}' \
            "127.0.0.1" "${TXDAG_KAFKA_PORT:-9391}")"
    fi
    if [[ -z "${AIRFLOW_CONN_SPARK_CONNECT_DEFAULT:-}" ]]; then  # warm mode: scripts/spark-connect.sh's server
        AIRFLOW_CONN_SPARK_CONNECT_DEFAULT="$(printf '{"conn_type": "spark_connect", "host": "%s", "port": %s}' \
            "$SPARK_CONNECT_HOST" "${TXDAG_SPARK_CONNECT_PORT:-15092}")"
    fi
    : "${SPARK_LOCAL_IP:=$HOST}"
    # shellcheck disable=SC2090
    export AIRFLOW_CONN_REDIS_DEFAULT AIRFLOW_CONN_ZOOKEEPER_DEFAULT AIRFLOW_CONN_SPARK_DEFAULT SPARK_LOCAL_IP
    export AIRFLOW_CONN_SPARK_CONNECT_DEFAULT AIRFLOW_CONN_KAFKA_DEFAULT
    export PATH="$VENV/bin:$PATH"
    local name value
    {
        printf '# The environment scripts/airflow.sh gave the Airflow components (AIRFLOW_*, TXDAG_*, SPARK_*).\n'
        while IFS= read -r name; do
            value="${!name}"
            printf "export %s='%s'\n" "$name" "${value//\'/\'\\\'\'}"
        done < <(compgen -e | grep -E '^(AIRFLOW_|AIRFLOW__|TXDAG_|SPARK_|PYSPARK_)' |
            grep -v -x -e TXDAG_AIRFLOW_FRESH_DB | sort)
        # shellcheck disable=SC2016  # $PATH is for the reader's shell
        printf 'export PATH=%q:"$PATH"\n' "$VENV/bin"
    } >"$ENV_RECORD"
    chmod 600 "$ENV_RECORD"
}

# --- components ---------------------------------------------------------------------------------------------

component_command() {
    case "$1" in
    api-server) printf '%s\n' api-server --host "$HOST" --port "$PORT" ;;
    dag-processor) printf '%s\n' dag-processor ;;
    scheduler) printf '%s\n' scheduler --skip-serve-logs ;;
    triggerer) printf '%s\n' triggerer --skip-serve-logs ;;
    esac
}

start_component() {
    local name="$1" file i
    local -a args
    file="$(pid_file "$name")"
    rm -f "$file"
    mapfile -t args < <(component_command "$name")
    # In its own session (setsid), so that 'stop' can signal its process group and find its descendants. The
    # session leader writes its own pid (setsid forks when it is started as a process group leader, so $! may
    # not be it) and then becomes airflow.
    # shellcheck disable=SC2016  # $$, $0 and $@ are expanded by the inner bash
    setsid bash -c 'printf "%s\n" "$$" >"$0.new" && exec "$@"' "$file" "$VENV/bin/airflow" "${args[@]}" \
        >"$(log_file "$name")" 2>&1 </dev/null &
    for ((i = 0; i < 100; i++)); do
        [[ -s "$file.new" ]] && break
        sleep 0.05
    done
    [[ -s "$file.new" ]] || die "$name did not start; log: $(log_file "$name")"
    pid_identity "$(tr -dc '0-9' <"$file.new")" >"$file" || die "$name exited at once; log: $(log_file "$name")"
    rm -f "$file.new"
}

# SIGTERM to every component's process group, wait up to 30 s for their sessions to empty (after 10 s, SIGTERM
# to each process still in them), then SIGKILL what is left.
stop_all() {
    local name pid i
    local -a pids=() groups=()
    for name in "${COMPONENTS[@]}"; do
        if pid="$(component_pid "$name")"; then
            groups+=("$pid")
        fi
    done
    ((${#groups[@]})) || return 1
    for pid in "${groups[@]}"; do
        kill -TERM -- "-$pid" 2>/dev/null || true
    done
    for ((i = 0; i < 120; i++)); do
        mapfile -t pids < <(session_pids "${groups[@]}")
        ((${#pids[@]})) || break
        if ((i == 40)); then
            kill -TERM "${pids[@]}" 2>/dev/null || true
        fi
        sleep 0.25
    done
    if ((${#pids[@]})); then
        say "still running after 30 s, sending SIGKILL: ${pids[*]}"
        kill -KILL "${pids[@]}" 2>/dev/null || true
        sleep 0.5
    fi
    for name in "${COMPONENTS[@]}"; do
        rm -f "$(pid_file "$name")"
    done
    return 0
}

start_all() {
    local name pid sql_conn t0 t1 i failed="" lines
    local -a running=()
    mkdir -p "$AIRFLOW_HOME"
    for name in "${COMPONENTS[@]}"; do
        if pid="$(component_pid "$name")"; then
            running+=("$name")
        fi
    done
    if ((${#running[@]} == ${#COMPONENTS[@]})); then
        say "already running for AIRFLOW_HOME=$AIRFLOW_HOME (${COMPONENTS[*]})"
        wait_healthy
        print_login
        return 0
    fi
    if ((${#running[@]})); then
        say "only ${running[*]} running: stopping them to start all four afresh"
        stop_all || true
    fi
    if port_open "$PORT"; then
        die "port $PORT is already taken (another Airflow?); stop it or set TXDAG_AIRFLOW_PORT"
    fi
    [[ -x "$VENV/bin/airflow" ]] || die "$VENV/bin/airflow not found; run: bash scripts/setup.sh"
    [[ -d "$DAGS_FOLDER" ]] || say "warning: the DAG folder $DAGS_FOLDER does not exist (yet)"

    bash "$ROOT/scripts/postgres.sh" start
    if [[ "${TXDAG_AIRFLOW_FRESH_DB:-}" == 1 ]]; then
        say "recreating database $DB"
        bash "$ROOT/scripts/postgres.sh" fresh-db "$DB" "$DB_ROLE"
    else
        bash "$ROOT/scripts/postgres.sh" ensure-db "$DB" "$DB_ROLE"
    fi
    sql_conn="$(bash "$ROOT/scripts/postgres.sh" url "$DB" "$DB_ROLE")"

    ensure_secrets
    write_config "$sql_conn"
    component_environment

    t0=$SECONDS
    say "airflow db migrate (log: $AIRFLOW_HOME/db-migrate.log)"
    if ! "$VENV/bin/airflow" db migrate >"$AIRFLOW_HOME/db-migrate.log" 2>&1; then
        tail -n 30 "$AIRFLOW_HOME/db-migrate.log" >&2
        die "airflow db migrate failed; log: $AIRFLOW_HOME/db-migrate.log"
    fi
    t1=$SECONDS
    say "database $DB migrated in $((t1 - t0)) s"

    for name in "${COMPONENTS[@]}"; do
        start_component "$name"
    done
    say "started ${COMPONENTS[*]} (logs: $AIRFLOW_HOME/<component>.log)"
    wait_healthy
    say "healthy $((SECONDS - t1)) s after starting the components"
    print_login
}

wait_healthy() {
    local i name failed lines=""
    for ((i = 0; i < WAIT_SECONDS * 2; i++)); do
        all_healthy && return 0
        failed=""
        for name in "${COMPONENTS[@]}"; do
            component_pid "$name" >/dev/null || failed="$name"
        done
        if [[ -n "$failed" ]]; then
            tail -n 40 "$(log_file "$failed")" >&2 || true
            stop_all || true
            die "$failed exited while starting; log: $(log_file "$failed")"
        fi
        sleep 0.5
    done
    lines="$(health_lines || true)"
    say "health after ${WAIT_SECONDS}s: ${lines:-API not answering}" >&2
    stop_all || true
    die "Airflow did not become healthy within ${WAIT_SECONDS}s (stopped it); logs: $AIRFLOW_HOME/*.log"
}

print_login() {
    local password
    password="$(admin_password)"
    say "UI and REST API: $BASE_URL  (user admin, password $password)"
}

admin_password() {
    "$VENV/bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["admin"])' "$PASSWORDS" 2>/dev/null ||
        die "no admin password yet: $PASSWORDS is missing (run: bash scripts/airflow.sh start)"
}

status() {
    local name pid rc=0 lines
    for name in "${COMPONENTS[@]}"; do
        if pid="$(component_pid "$name")"; then
            say "$(printf '%-13s' "$name") running (pid $pid, log $(log_file "$name"))"
        else
            say "$(printf '%-13s' "$name") not running (from AIRFLOW_HOME=$AIRFLOW_HOME)"
            rc=1
        fi
    done
    if lines="$(health_lines)" && [[ -n "$lines" ]]; then
        say "API $BASE_URL answers; health: $(tr '\n' ' ' <<<"$lines")"
        all_healthy || rc=1
    else
        say "API $BASE_URL does not answer"
        rc=1
    fi
    return "$rc"
}

usage() {
    sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

case "${1:-}" in
start) start_all ;;
stop)
    if stop_all; then
        say "stopped ${COMPONENTS[*]} (AIRFLOW_HOME=$AIRFLOW_HOME)"
    else
        say "nothing of AIRFLOW_HOME=$AIRFLOW_HOME was running"
    fi
    ;;
status) status ;;
crash | restart)
    name="${2:-}"
    [[ " ${COMPONENTS[*]} " == *" $name "* && -n "$name" ]] || die "$1 needs a component: ${COMPONENTS[*]}"
    if [[ "$1" == crash ]]; then
        pid="$(component_pid "$name")" || die "$name is not running"
        mapfile -t pids < <(session_pids "$pid")
        kill -KILL "${pids[@]}" 2>/dev/null || true
        rm -f "$(pid_file "$name")"
        say "killed $name (SIGKILL to ${#pids[@]} process(es) of session $pid)"
    else
        ! component_pid "$name" >/dev/null || die "$name is running already"
        component_environment
        start_component "$name"
        say "restarted $name (pid $(component_pid "$name"), log $(log_file "$name"))"
    fi
    ;;
env)
    printf 'export AIRFLOW_HOME=%q\n' "$AIRFLOW_HOME"
    if [[ -f "$ENV_RECORD" ]]; then
        grep -v -e '^#' -e '^export AIRFLOW_HOME=' "$ENV_RECORD"
    else
        # shellcheck disable=SC2016  # $PATH is for the reader's shell
        printf 'export PATH=%q:"$PATH"\n' "$VENV/bin"
    fi
    ;;
login)
    password="$(admin_password)"
    printf 'url      %s\nuser     admin\npassword %s\n' "$BASE_URL" "$password"
    ;;
*) usage ;;
esac

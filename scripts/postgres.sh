#!/usr/bin/env bash
# A PostgreSQL 15 server for txdag (Airflow's metadata database), on loopback only, on a port away from 5432.
#
#   bash scripts/postgres.sh start                 initialise (first time) and start, or reuse what answers
#   bash scripts/postgres.sh stop                  stop the server of this checkout's data directory (only that)
#   bash scripts/postgres.sh status                one line; exit 0 only when the server answers
#   bash scripts/postgres.sh ensure-db DB [ROLE]   create role ROLE (default: DB) and database DB owned by it,
#                                                  when missing (idempotent); prints nothing else
#   bash scripts/postgres.sh fresh-db DB [ROLE]    the same, but drops database DB first (a clean database)
#   bash scripts/postgres.sh drop-db DB            drop database DB (force: its connections are closed)
#   bash scripts/postgres.sh url DB [ROLE]         print the SQLAlchemy URL (postgresql+psycopg2://...)
#   bash scripts/postgres.sh psql [ARGS...]        psql as the superuser (database postgres unless -d)
#
# Environment: TXDAG_PG_PORT (default 5491), TXDAG_PG_BIN (default /usr/lib/postgresql/15/bin), TXDAG_PG_HOST (the
# loopback address it listens on and is reached at, default 127.0.0.1; refused outside 127.0.0.0/8; given to the
# server at each start, so it wins over the cluster's postgresql.conf).
# State lives in .run/pg-<port>/ at the repository root: data/ (the cluster), postgres.log, and the generated
# passwords (superuser.password, role-<ROLE>.password; mode 0600), readable back with 'url'. The superuser is "postgres"; only TCP on
# that address is served (no Unix socket), with scram-sha-256 password authentication.
# PostgreSQL refuses to run as root: as root, initdb and pg_ctl run as the "postgres" user (runuser) and
# data/ belongs to it; if that user cannot reach .run/ (a checkout under a private home directory), the data
# directory goes to /var/lib/postgresql/txdag/<checkout-hash>-<port> instead, its log beside it (the path is
# recorded in .run/pg-<port>/datadir). When not root, everything runs as the current user.
# If something else already answers as PostgreSQL on the port it is reused; the commands that log in then need
# its superuser password in PGPASSWORD (and TXDAG_PG_SUPERUSER if the superuser is not "postgres").
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then # the comment above, before anything runs or is created
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
    exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_PORT="${TXDAG_PG_PORT:-5491}"
PG_BIN="${TXDAG_PG_BIN:-/usr/lib/postgresql/15/bin}"
PG_DIR="$ROOT/.run/pg-$PG_PORT"
PG_LOG="$PG_DIR/postgres.log"
SUPERUSER="${TXDAG_PG_SUPERUSER:-postgres}"
WAIT_SECONDS=60

SAY_FD=2 # say writes to stderr: the stdout of url and ensure-db is their answer
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$ROOT/scripts/lib/common.sh"
HOST="$(loopback_host TXDAG_PG_HOST)"

if ! [[ "$PG_PORT" =~ ^[0-9]+$ ]] || ((PG_PORT < 1 || PG_PORT > 65535)); then
    die "not a port number: '$PG_PORT'"
fi

# The user the server runs as: "postgres" when we are root (PostgreSQL refuses root), else ourselves.
if [[ $(id -u) -eq 0 ]]; then
    RUN_AS=postgres
else
    RUN_AS="$(id -un)"
fi

# Runs a command as $RUN_AS.
as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u "$RUN_AS" -- "$@"
    else
        "$@"
    fi
}

need_binaries() {
    [[ -x "$PG_BIN/pg_ctl" && -x "$PG_BIN/initdb" && -x "$PG_BIN/psql" ]] ||
        die "PostgreSQL binaries not found in $PG_BIN; run: bash scripts/setup.sh"
    if [[ $(id -u) -eq 0 ]] && ! id -u "$RUN_AS" >/dev/null 2>&1; then
        die "running as root, but there is no '$RUN_AS' user to run PostgreSQL as (Debian's postgresql-common creates it)"
    fi
}

# Prints the data directory: the recorded one, else .run/pg-<port>/data when the server's user can reach it,
# else a directory under /var/lib/postgresql.
data_dir() {
    local dir
    if [[ -f "$PG_DIR/datadir" ]]; then
        cat "$PG_DIR/datadir"
        return 0
    fi
    mkdir -p "$PG_DIR"
    if as_owner test -x "$PG_DIR" 2>/dev/null; then
        dir="$PG_DIR/data"
    else
        dir="/var/lib/postgresql/txdag/$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)-$PG_PORT"
        say "user $RUN_AS cannot reach $PG_DIR: keeping the data directory in $dir"
    fi
    printf '%s\n' "$dir" >"$PG_DIR/datadir"
    printf '%s\n' "$dir"
}

# The server's log: .run/pg-<port>/postgres.log, or beside a data directory outside .run/ (the server's user
# must be able to write it).
pg_log_file() {
    if [[ "$1" == "$PG_DIR/data" ]]; then
        printf '%s\n' "$PG_LOG"
    else
        printf '%s.log\n' "$1"
    fi
}


# --- probes -------------------------------------------------------------------------------------------------


# The server on the port accepts connections (no login needed for this check).
pg_up() { timeout 5 "$PG_BIN/pg_isready" -q -h "$HOST" -p "$PG_PORT" -t 3 >/dev/null 2>&1; }

# Prints the postmaster pid of this checkout's data directory when it is alive.
pg_pid() {
    local dir pid
    dir="$(cat "$PG_DIR/datadir" 2>/dev/null)" || return 1
    [[ -f "$dir/postmaster.pid" ]] || return 1
    pid="$(head -n 1 "$dir/postmaster.pid" | tr -dc '0-9')"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "postgres" || return 1
    printf '%s\n' "$pid"
}

# --- server -------------------------------------------------------------------------------------------------

init_cluster() {
    local dir="$1" pwfile
    say "initialising a cluster in $dir (superuser $SUPERUSER)"
    mkdir -p "$dir"
    chmod 700 "$dir"
    if [[ ! -f "$PG_DIR/superuser.password" ]]; then
        (umask 077 && random_password 18 >"$PG_DIR/superuser.password")
    fi
    pwfile="$(mktemp -t txdag-pgpw.XXXXXX)"
    cp "$PG_DIR/superuser.password" "$pwfile"
    if [[ $(id -u) -eq 0 ]]; then
        chown "$RUN_AS:" "$dir" "$pwfile"
    fi
    if ! as_owner "$PG_BIN/initdb" -D "$dir" -U "$SUPERUSER" --pwfile="$pwfile" -A scram-sha-256 -E UTF8 \
        --no-locale --no-instructions >"$PG_DIR/initdb.log" 2>&1; then
        rm -f "$pwfile"
        tail -n 20 "$PG_DIR/initdb.log" >&2
        die "initdb failed; log: $PG_DIR/initdb.log"
    fi
    rm -f "$pwfile"
    # Loopback TCP only, no Unix socket (its path would depend on the checkout's path, and /var/run/postgresql
    # may be missing). synchronous_commit=off: a crash loses the last transactions, never consistency.
    as_owner tee -a "$dir/postgresql.conf" >/dev/null <<EOF

# Written by scripts/postgres.sh
listen_addresses = '$HOST'
port = $PG_PORT
unix_socket_directories = ''
max_connections = 200
synchronous_commit = off
log_min_messages = warning
log_min_error_statement = error
EOF
}

# initdb's pg_hba.conf lets in 127.0.0.1 (and ::1) only: another loopback $HOST gets a line of its own (once).
allow_host() {
    local line="host all all $HOST/32 scram-sha-256"
    [[ "$HOST" != 127.0.0.1 ]] || return 0
    as_owner grep -q -x -F "$line" "$1/pg_hba.conf" || printf '%s\n' "$line" | as_owner tee -a "$1/pg_hba.conf" >/dev/null
}

start_pg() {
    local dir pid log
    if pg_up; then
        if pid="$(pg_pid)"; then
            say "PostgreSQL $HOST:$PG_PORT already running (pid $pid)"
        else
            say "PostgreSQL $HOST:$PG_PORT already answering: reusing it"
        fi
        return 0
    fi
    need_binaries
    dir="$(data_dir)"
    if ! pid="$(pg_pid)"; then
        if port_open "$PG_PORT"; then
            die "port $PG_PORT answers, but not as PostgreSQL; free it or set TXDAG_PG_PORT"
        fi
        [[ -f "$dir/PG_VERSION" ]] || init_cluster "$dir"
        allow_host "$dir"
        log="$(pg_log_file "$dir")"
        touch "$log"
        if [[ $(id -u) -eq 0 ]]; then
            chown "$RUN_AS:" "$log"
        fi
        # pg_ctl start daemonises the server (its own session); -w waits until it accepts connections.
        if ! as_owner "$PG_BIN/pg_ctl" -D "$dir" -l "$log" -w -t "$WAIT_SECONDS" \
            -o "-c listen_addresses=$HOST" start >/dev/null 2>&1; then
            tail -n 20 "$log" >&2 || true
            die "PostgreSQL did not start on $HOST:$PG_PORT; log: $log"
        fi
    fi
    local i
    for ((i = 0; i < WAIT_SECONDS * 4; i++)); do
        pg_up && break
        sleep 0.25
    done
    log="$(pg_log_file "$dir")"
    pg_up || die "PostgreSQL did not answer on $HOST:$PG_PORT within ${WAIT_SECONDS}s; log: $log"
    say "PostgreSQL $HOST:$PG_PORT started (pid $(pg_pid || echo '?'), data $dir, log $log)"
}

stop_pg() {
    local pid dir
    if pid="$(pg_pid)"; then
        dir="$(cat "$PG_DIR/datadir")"
        # fast: roll back open transactions and disconnect clients (Airflow's components would otherwise keep a
        # 'smart' shutdown waiting).
        as_owner "$PG_BIN/pg_ctl" -D "$dir" -m fast -w -t 60 stop >/dev/null 2>&1 ||
            { say "pg_ctl stop failed: sending SIGQUIT to $pid"; kill -QUIT "$pid" 2>/dev/null || true; }
        say "PostgreSQL $HOST:$PG_PORT stopped (pid $pid)"
    elif pg_up; then
        say "PostgreSQL $HOST:$PG_PORT left running: not started from this checkout"
    else
        say "PostgreSQL $HOST:$PG_PORT not running"
    fi
}

status_pg() {
    local pid
    if pg_up; then
        if pid="$(pg_pid)"; then
            say "PostgreSQL $HOST:$PG_PORT up (started here, pid $pid)"
        else
            say "PostgreSQL $HOST:$PG_PORT up (not started from this checkout)"
        fi
    else
        say "PostgreSQL $HOST:$PG_PORT down"
        return 1
    fi
}

# --- databases ----------------------------------------------------------------------------------------------

superuser_password() {
    if [[ -n "${PGPASSWORD:-}" ]]; then
        printf '%s' "$PGPASSWORD"
    elif [[ -f "$PG_DIR/superuser.password" ]]; then
        cat "$PG_DIR/superuser.password"
    else
        die "no superuser password: $PG_DIR/superuser.password is missing (server not initialised here?); set PGPASSWORD"
    fi
}

# psql as the superuser, stopping on the first error.
su_psql() {
    PGPASSWORD="$(superuser_password)" PGCONNECT_TIMEOUT=10 PGOPTIONS="-c client_min_messages=warning" \
        "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$HOST" -p "$PG_PORT" -U "$SUPERUSER" "$@"
}

check_name() {
    [[ "$1" =~ ^[a-z_][a-z0-9_]{0,62}$ ]] || die "not a plain lower-case identifier: '$1'"
}

# Prints the password of role $1, generating it on first use.
role_password() {
    local file="$PG_DIR/role-$1.password"
    mkdir -p "$PG_DIR"
    if [[ ! -s "$file" ]]; then
        (umask 077 && random_password 18 >"$file")
    fi
    cat "$file"
}

ensure_db() {
    local db="$1" role="${2:-$1}" fresh="${3:-}" password
    check_name "$db"
    check_name "$role"
    pg_up || die "PostgreSQL does not answer on $HOST:$PG_PORT; run: bash scripts/postgres.sh start"
    password="$(role_password "$role")"
    # The role is (re)given the password of its file, so a lost or regenerated file still works.
    su_psql -d postgres -v db="$db" -v role="$role" -v password="$password" -v fresh="${fresh:-0}" >/dev/null <<'SQL'
SELECT format('CREATE ROLE %I LOGIN', :'role') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role')
\gexec
SELECT format('ALTER ROLE %I LOGIN PASSWORD %L', :'role', :'password')
\gexec
SELECT format('DROP DATABASE IF EXISTS %I WITH (FORCE)', :'db') WHERE :'fresh' = '1'
\gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role')
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db')
\gexec
SQL
}

drop_db() {
    check_name "$1"
    su_psql -d postgres -v db="$1" >/dev/null <<'SQL'
SELECT format('DROP DATABASE IF EXISTS %I WITH (FORCE)', :'db')
\gexec
SQL
}

url() {
    local db="$1" role="${2:-$1}"
    check_name "$db"
    check_name "$role"
    printf 'postgresql+psycopg2://%s:%s@%s:%s/%s\n' "$role" "$(role_password "$role")" "$HOST" "$PG_PORT" "$db"
}

usage() {
    sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

case "${1:-}" in
start) start_pg ;;
stop) stop_pg ;;
status) status_pg ;;
ensure-db)
    [[ $# -ge 2 && $# -le 3 ]] || usage
    ensure_db "$2" "${3:-$2}"
    ;;
fresh-db)
    [[ $# -ge 2 && $# -le 3 ]] || usage
    ensure_db "$2" "${3:-$2}" 1
    ;;
drop-db)
    [[ $# -eq 2 ]] || usage
    drop_db "$2"
    ;;
url)
    [[ $# -ge 2 && $# -le 3 ]] || usage
    url "$2" "${3:-$2}"
    ;;
psql)
    shift
    if [[ " $* " == *" -d "* || " $* " == *" --dbname"* ]]; then
        su_psql "$@"
    else
        su_psql -d postgres "$@"
    fi
    ;;
*) usage ;;
esac

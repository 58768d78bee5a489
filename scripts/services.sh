#!/usr/bin/env bash
# Redis and ZooKeeper for txdag, on loopback only, on ports that stay clear of the defaults.
#
#   bash scripts/services.sh start [redis|zk]   start (or reuse what already answers on the port)
#   bash scripts/services.sh stop [redis|zk]    stop what this script started (never anything else)
#   bash scripts/services.sh status             one line per service; exit 0 only when both answer
#   bash scripts/services.sh restart-redis      stop the Redis on the port (SHUTDOWN SAVE) and start it
#                                               again here; its data is kept
#   bash scripts/services.sh env                print the export lines for the two addresses
#
# Environment: TXDAG_REDIS_PORT (default 6391), TXDAG_ZK_PORT (default 2191).
# State (config, data, logs, pid files) lives in .run/redis-<port>/ and .run/zk-<port>/ at the repository root.
# Access control: Redis runs with an ACL file (.run/redis-<port>/users.acl): the default user is off, the admin
# user of .run/credentials.env (scripts/credentials.sh) may do everything; topologies' users are added with
# `txdag acl redis` (scripts/airflow.sh does it for the DAGs folder). ZooKeeper needs no server set-up: txdag's
# clients put digest ACLs on the znodes they create.
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then # the comment above, before anything runs or is created
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
    exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HOST=127.0.0.1
REDIS_PORT="${TXDAG_REDIS_PORT:-6391}"
ZK_PORT="${TXDAG_ZK_PORT:-2191}"
REDIS_DIR="$ROOT/.run/redis-$REDIS_PORT"
REDIS_PID="$REDIS_DIR/redis.pid"
ZK_DIR="$ROOT/.run/zk-$ZK_PORT"
ZK_PID="$ZK_DIR/zookeeper.pid"
ZK_SERVER=/usr/share/zookeeper/bin/zkServer.sh
ZK_WAIT_SECONDS=30
REDIS_WAIT_SECONDS=10
# shellcheck source=/dev/null  # generated: TXDAG_REDIS_ADMIN_USER/PASSWORD, TXDAG_REDIS_USER/PASSWORD, TXDAG_ZK_*
source "$(bash "$ROOT/scripts/credentials.sh")"

say() { printf 'services: %s\n' "$*"; }
die() {
    printf 'services: error: %s\n' "$*" >&2
    exit 1
}

for port in "$REDIS_PORT" "$ZK_PORT"; do
    if ! [[ "$port" =~ ^[0-9]+$ ]] || ((port < 1 || port > 65535)); then
        die "not a port number: '$port'"
    fi
done
[[ "$REDIS_PORT" != "$ZK_PORT" ]] || die "TXDAG_REDIS_PORT and TXDAG_ZK_PORT are both $REDIS_PORT"

# --- probes -------------------------------------------------------------------------------------------------

# Something accepts TCP connections on 127.0.0.1:$1.
port_open() {
    # shellcheck disable=SC2016  # $0 and $1 are expanded by the inner bash
    timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$HOST" "$1" 2>/dev/null
}

# redis-cli as the admin user; the password goes through the environment, not the command line. A server without
# that user (started before access control) answers as its default user: redis-cli only warns on stderr.
rcli() {
    REDISCLI_AUTH="$TXDAG_REDIS_ADMIN_PASSWORD" timeout "${RCLI_TIMEOUT:-3}" \
        redis-cli --user "$TXDAG_REDIS_ADMIN_USER" -h "$HOST" -p "$REDIS_PORT" "$@"
}

# A Redis answers on the port: PONG, or a refusal of our credentials.
redis_up() {
    local reply
    reply="$(rcli ping 2>/dev/null)" || return 1
    [[ "$reply" == PONG || "$reply" == NOAUTH* || "$reply" == WRONGPASS* ]]
}

# That Redis knows our admin user: it runs with txdag's access control.
redis_acl_on() { [[ "$(rcli acl whoami 2>/dev/null)" == "$TXDAG_REDIS_ADMIN_USER" ]]; }

# The ACL file: the default user off, the admin user of .run/credentials.env, and the other users the file held
# (restart-redis saves the users added since the start into it with ACL SAVE).
write_acl_file() {
    local hash file="$REDIS_DIR/users.acl"
    hash="$(printf '%s' "$TXDAG_REDIS_ADMIN_PASSWORD" | sha256sum | cut -d' ' -f1)"
    (
        umask 077
        {
            printf 'user default off resetkeys -@all\nuser %s on #%s ~* &* +@all\n' "$TXDAG_REDIS_ADMIN_USER" "$hash"
            [[ -f "$file" ]] && grep -v -e '^user default ' -e "^user $TXDAG_REDIS_ADMIN_USER " "$file"
        } >"$file.new" || true
        mv -f "$file.new" "$file"
    )
}

# ZooKeeper's four-letter word 'ruok' answers 'imok' when the server is serving.
zk_up() {
    local reply
    # shellcheck disable=SC2016  # $0 and $1 are expanded by the inner bash
    reply="$(timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" && printf ruok >&3 && cat <&3' "$HOST" "$ZK_PORT" \
        2>/dev/null)" || true
    [[ "$reply" == imok ]]
}

# Prints the pid in pid file $1 when that process is alive and its command line contains $2.
live_pid() {
    local pid
    [[ -f "$1" ]] || return 1
    pid="$(tr -dc '0-9' <"$1")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2" || return 1
    printf '%s\n' "$pid"
}

redis_pid() { live_pid "$REDIS_PID" redis-server; }
zk_pid() { live_pid "$ZK_PID" "$ZK_DIR/zoo.cfg"; }

# Waits for $1 (a probe function) for up to $2 seconds, while process $3 lives.
wait_for() {
    local probe="$1" seconds="$2" pid="${3:-}" i
    for ((i = 0; i < seconds * 4; i++)); do
        "$probe" && return 0
        if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
            return 1
        fi
        sleep 0.25
    done
    "$probe"
}

# Sends SIGTERM to $1 and waits for it to exit (SIGKILL after 15 s).
terminate() {
    local pid="$1" i
    kill "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 60; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.25
    done
    say "pid $pid did not exit on SIGTERM: sending SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
}

wait_port_closed() {
    local port="$1" i
    for ((i = 0; i < 60; i++)); do
        port_open "$port" || return 0
        sleep 0.25
    done
    return 1
}

# --- Redis --------------------------------------------------------------------------------------------------

start_redis() {
    local pid
    if redis_up; then
        if ! redis_acl_on; then
            die "the Redis on $HOST:$REDIS_PORT does not accept user $TXDAG_REDIS_ADMIN_USER of" \
                ".run/credentials.env (started before access control, or the credentials changed): restart it" \
                "with 'bash scripts/services.sh restart-redis', or set TXDAG_REDIS_PORT"
        fi
        if pid="$(redis_pid)"; then
            say "Redis     $HOST:$REDIS_PORT already running (pid $pid)"
        else
            say "Redis     $HOST:$REDIS_PORT already answering PING: reusing it"
        fi
        return 0
    fi
    if port_open "$REDIS_PORT"; then
        die "port $REDIS_PORT answers, but not as a Redis that answers PING; free it or set TXDAG_REDIS_PORT"
    fi
    command -v redis-server >/dev/null 2>&1 || die "redis-server not found; run: bash scripts/setup.sh"
    command -v redis-cli >/dev/null 2>&1 || die "redis-cli not found; run: bash scripts/setup.sh"
    mkdir -p "$REDIS_DIR"
    rm -f "$REDIS_PID"
    write_acl_file
    redis-server --port "$REDIS_PORT" --bind "$HOST" --daemonize yes --dir "$REDIS_DIR" \
        --aclfile "$REDIS_DIR/users.acl" \
        --pidfile "$REDIS_PID" --logfile "$REDIS_DIR/redis.log" --save '' --appendonly no >/dev/null ||
        die "redis-server did not start; see $REDIS_DIR/redis.log"
    if ! wait_for redis_up "$REDIS_WAIT_SECONDS"; then
        tail -n 20 "$REDIS_DIR/redis.log" >&2 || true
        die "Redis did not answer PING on $HOST:$REDIS_PORT within ${REDIS_WAIT_SECONDS}s; log: $REDIS_DIR/redis.log"
    fi
    # A dump written by restart-redis has been loaded by now: drop it, so that a later cold start is empty.
    rm -f "$REDIS_DIR/dump.rdb"
    say "Redis     $HOST:$REDIS_PORT started (pid $(redis_pid || echo '?'), log $REDIS_DIR/redis.log)"
}

stop_redis() {
    local pid
    if pid="$(redis_pid)"; then
        terminate "$pid"
        rm -f "$REDIS_PID"
        say "Redis     $HOST:$REDIS_PORT stopped (pid $pid)"
    elif redis_up; then
        say "Redis     $HOST:$REDIS_PORT left running: not started by this script"
    else
        rm -f "$REDIS_PID"
        say "Redis     $HOST:$REDIS_PORT not running"
    fi
}

# Restarts the Redis on the port, keeping its data: SHUTDOWN SAVE writes a dump, which the new server loads.
restart_redis() {
    local pid dir file i
    if redis_up; then
        pid="$(redis_pid || true)"
        dir="$(rcli --raw config get dir 2>/dev/null | sed -n 2p)"
        file="$(rcli --raw config get dbfilename 2>/dev/null | sed -n 2p)"
        rcli acl save >/dev/null 2>&1 || true # keep the users added since the start (none without an ACL file)
        say "Redis     $HOST:$REDIS_PORT shutting down (SHUTDOWN SAVE)"
        RCLI_TIMEOUT=30 rcli shutdown save >/dev/null 2>&1 || true
        wait_port_closed "$REDIS_PORT" || die "Redis on $HOST:$REDIS_PORT did not shut down"
        if [[ -n "$pid" ]]; then
            for ((i = 0; i < 40; i++)); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.25
            done
        fi
        rm -f "$REDIS_PID"
        mkdir -p "$REDIS_DIR"
        if [[ -n "$dir" && -n "$file" && -f "$dir/$file" && "$dir/$file" -ef "$REDIS_DIR/dump.rdb" ]]; then
            :
        elif [[ -n "$dir" && -n "$file" && -f "$dir/$file" ]]; then
            cp -f "$dir/$file" "$REDIS_DIR/dump.rdb"
        fi
    else
        say "Redis     $HOST:$REDIS_PORT not running: starting it"
    fi
    start_redis
}

# --- ZooKeeper ----------------------------------------------------------------------------------------------

write_zk_config() {
    mkdir -p "$ZK_DIR/data"
    cat >"$ZK_DIR/zoo.cfg" <<EOF
# Written by scripts/services.sh: a standalone ZooKeeper for txdag, loopback only.
tickTime=2000
dataDir=$ZK_DIR/data
clientPort=$ZK_PORT
clientPortAddress=$HOST
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr,envi
maxSessionTimeout=60000
EOF
}

start_zk() {
    local pid
    if zk_up; then
        if pid="$(zk_pid)"; then
            say "ZooKeeper $HOST:$ZK_PORT already running (pid $pid)"
        else
            say "ZooKeeper $HOST:$ZK_PORT already answering ruok: reusing it"
        fi
        return 0
    fi
    if pid="$(zk_pid)"; then
        # Started by us a moment ago and still coming up.
        say "ZooKeeper $HOST:$ZK_PORT starting (pid $pid): waiting"
    else
        if port_open "$ZK_PORT"; then
            die "port $ZK_PORT answers, but not as a ZooKeeper that answers ruok; free it or set TXDAG_ZK_PORT"
        fi
        [[ -x "$ZK_SERVER" ]] || die "$ZK_SERVER not found; run: bash scripts/setup.sh"
        command -v java >/dev/null 2>&1 || die "java not found on PATH; ZooKeeper needs it"
        write_zk_config
        # start-foreground in its own session rather than 'start': Debian's zkEnv.sh overrides ZOO_LOG_DIR, so
        # 'start' would write its output under /var/log/zookeeper; this way the log stays in $ZK_DIR.
        # JMXDISABLE: otherwise the JVM opens a JMX port on all interfaces.
        JMXDISABLE=true ZOO_LOG_DIR="$ZK_DIR" SERVER_JVMFLAGS="${TXDAG_ZK_JVMFLAGS:--Xmx512m}" \
            setsid "$ZK_SERVER" start-foreground "$ZK_DIR/zoo.cfg" >"$ZK_DIR/zookeeper.log" 2>&1 </dev/null &
        pid=$!
        printf '%s\n' "$pid" >"$ZK_PID"
    fi
    if ! wait_for zk_up "$ZK_WAIT_SECONDS" "$pid"; then
        tail -n 30 "$ZK_DIR/zookeeper.log" >&2 || true
        rm -f "$ZK_PID"
        if ! kill -0 "$pid" 2>/dev/null; then
            die "ZooKeeper exited while starting on $HOST:$ZK_PORT; log: $ZK_DIR/zookeeper.log"
        fi
        terminate "$pid"
        die "ZooKeeper did not answer ruok on $HOST:$ZK_PORT within ${ZK_WAIT_SECONDS}s (stopped it);" \
            "log: $ZK_DIR/zookeeper.log"
    fi
    say "ZooKeeper $HOST:$ZK_PORT started (pid $pid, log $ZK_DIR/zookeeper.log)"
}

stop_zk() {
    local pid
    if pid="$(zk_pid)"; then
        terminate "$pid"
        rm -f "$ZK_PID"
        say "ZooKeeper $HOST:$ZK_PORT stopped (pid $pid)"
    elif zk_up; then
        say "ZooKeeper $HOST:$ZK_PORT left running: not started by this script"
    else
        rm -f "$ZK_PID"
        say "ZooKeeper $HOST:$ZK_PORT not running"
    fi
}

# --- status -------------------------------------------------------------------------------------------------

status() {
    local rc=0 pid
    if redis_up; then
        if pid="$(redis_pid)"; then
            say "Redis     $HOST:$REDIS_PORT up (started here, pid $pid)"
        else
            say "Redis     $HOST:$REDIS_PORT up (not started by this script)"
        fi
    else
        say "Redis     $HOST:$REDIS_PORT down"
        rc=1
    fi
    if zk_up; then
        if pid="$(zk_pid)"; then
            say "ZooKeeper $HOST:$ZK_PORT up (started here, pid $pid)"
        else
            say "ZooKeeper $HOST:$ZK_PORT up (not started by this script)"
        fi
    else
        say "ZooKeeper $HOST:$ZK_PORT down"
        rc=1
    fi
    return "$rc"
}

usage() {
    sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

which="${2:-all}"
case "$which" in
all | redis | zk) ;;
*) usage ;;
esac

case "${1:-}" in
start)
    [[ "$which" == zk ]] || start_redis
    [[ "$which" == redis ]] || start_zk
    ;;
stop)
    [[ "$which" == zk ]] || stop_redis
    [[ "$which" == redis ]] || stop_zk
    ;;
status) status ;;
restart-redis) restart_redis ;;
env)
    # The passwords stay in .run/credentials.env: these lines name its variables, not their values.
    printf 'source %q\n' "$ROOT/.run/credentials.env"
    # shellcheck disable=SC2016  # expanded where the lines are eval'ed
    printf 'export TXDAG_REDIS_URL="redis://${TXDAG_REDIS_ADMIN_USER}:${TXDAG_REDIS_ADMIN_PASSWORD}@%s:%s/0"\n' \
        "$HOST" "$REDIS_PORT"
    printf 'export TXDAG_ZK_HOSTS=%s:%s\n' "$HOST" "$ZK_PORT"
    ;;
*) usage ;;
esac

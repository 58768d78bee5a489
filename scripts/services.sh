#!/usr/bin/env bash
# Redis, ZooKeeper and Kafka for txdag, on loopback only, on ports that stay clear of the defaults (Kafka through
# scripts/kafka.sh, which says more about it).
#
#   bash scripts/services.sh start [redis|zk|kafka]   start (or reuse what already answers on the port)
#   bash scripts/services.sh stop [redis|zk|kafka]    stop what this script started (never anything else); the data
#                                                     stays
#   bash scripts/services.sh status                   one line per service; exit 0 only when all three answer
#   bash scripts/services.sh restart-redis            stop the Redis on the port and start it again here; its data
#                                                     and users are kept
#   bash scripts/services.sh wipe [redis|zk|kafka]    delete the data of the stopped services (all Redis keys, all
#                                                     znodes, all topics); Redis's users (users.acl) are kept
#   bash scripts/services.sh env                      print the export lines for the three addresses
#
# Environment: TXDAG_REDIS_PORT (default 6391), TXDAG_ZK_PORT (default 2191), and scripts/kafka.sh's
# TXDAG_KAFKA_PORT (default 9391), TXDAG_KAFKA_CONTROLLER_PORT and TXDAG_KAFKA_SASL_PORT. TXDAG_REDIS_HOST and
# TXDAG_ZK_HOST (default 127.0.0.1; refused outside 127.0.0.0/8) are the loopback addresses Redis and ZooKeeper bind
# to and are probed on (bench/jepsen.py gives each its own, in a network namespace of its own).
# State lives in .run/redis-<port>/, .run/zk-<port>/ and .run/kafka-<port>/ at the repository root: config, logs
# and pid files, and the data in their data/ folders, which a stop and a start (or a crash) keep; only `wipe`
# deletes them.
# Durability: Redis appends every write to its append-only file (.run/redis-<port>/data/appendonlydir/) and fsyncs
# it before it answers (appendfsync always); ZooKeeper fsyncs its transaction log before it answers (forceSync);
# Kafka fsyncs a partition's log before it acknowledges a write.
# Access control: Redis runs with an ACL file (.run/redis-<port>/users.acl): the default user is off, the admin
# user of .run/credentials.env (scripts/credentials.sh) may do everything; topologies' users are added with
# `txdag acl redis` (scripts/airflow.sh does it for the DAGs folder). Each start writes the default and admin users
# afresh (a new password in .run/credentials.env takes effect) and keeps every other user of the file; stop and
# restart-redis save the users of the running server into it first (ACL SAVE). ZooKeeper needs no server set-up:
# txdag's clients put digest ACLs on the znodes they create.
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then # the comment above, before anything runs or is created
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
    exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REDIS_PORT="${TXDAG_REDIS_PORT:-6391}"
ZK_PORT="${TXDAG_ZK_PORT:-2191}"
REDIS_DIR="$ROOT/.run/redis-$REDIS_PORT"
REDIS_DATA="$REDIS_DIR/data" # redis-server's --dir: the append-only file (appendonlydir/), a dump while migrating
REDIS_PID="$REDIS_DIR/redis.pid"
ZK_DIR="$ROOT/.run/zk-$ZK_PORT"
ZK_PID="$ZK_DIR/zookeeper.pid"
ZK_WAIT_SECONDS=30
REDIS_WAIT_SECONDS=10
# shellcheck source=/dev/null  # generated: TXDAG_REDIS_ADMIN_USER/PASSWORD, TXDAG_REDIS_USER/PASSWORD, TXDAG_ZK_*
source "$(bash "$ROOT/scripts/credentials.sh")"

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$ROOT/scripts/lib/common.sh"
REDIS_HOST="$(loopback_host TXDAG_REDIS_HOST)"
ZK_HOST="$(loopback_host TXDAG_ZK_HOST)"
REDIS=("$REDIS_HOST" "$REDIS_PORT") # the address rcli and redis_up take first

for port in "$REDIS_PORT" "$ZK_PORT"; do
    check_port "$port"
done
[[ "$REDIS_PORT" != "$ZK_PORT" ]] || die "TXDAG_REDIS_PORT and TXDAG_ZK_PORT are both $REDIS_PORT"

# --- probes -------------------------------------------------------------------------------------------------

# That Redis knows our admin user: it runs with txdag's access control.
redis_acl_on() { [[ "$(rcli "${REDIS[@]}" acl whoami 2>/dev/null)" == "$TXDAG_REDIS_ADMIN_USER" ]]; }

# ZooKeeper's four-letter word 'ruok' answers 'imok' when the server is serving.
zk_up() { [[ "$(zk_word "$ZK_HOST" "$ZK_PORT" ruok)" == imok ]]; }

# --- Redis --------------------------------------------------------------------------------------------------

# The value of a setting of the Redis on the port (CONFIG GET), or nothing.
redis_config() { rcli "${REDIS[@]}" --raw config get "$1" 2>/dev/null | sed -n 2p; }

# An append-only file in the data folder: Redis 7's appendonlydir/ (its manifest), or Redis 6's appendonly.aof.
aof_exists() { [[ -f "$REDIS_DATA/appendonlydir/appendonly.aof.manifest" || -f "$REDIS_DATA/appendonly.aof" ]]; }

# The append-only file is on and no rewrite is running or due: what the server holds is in the file.
aof_settled() {
    local info
    info="$(rcli "${REDIS[@]}" info persistence 2>/dev/null | tr -d '\r')" || return 1
    grep -qx 'aof_enabled:1' <<<"$info" && grep -qx 'aof_rewrite_in_progress:0' <<<"$info" &&
        grep -qx 'aof_rewrite_scheduled:0' <<<"$info" && grep -qx 'aof_last_bgrewrite_status:ok' <<<"$info" &&
        aof_exists
}

start_redis() {
    local pid aof=yes
    if redis_up "${REDIS[@]}"; then
        if ! redis_acl_on; then
            die "the Redis on $REDIS_HOST:$REDIS_PORT does not accept user $TXDAG_REDIS_ADMIN_USER of" \
                ".run/credentials.env (started before access control, or the credentials changed): restart it" \
                "with 'bash scripts/services.sh restart-redis', or set TXDAG_REDIS_PORT"
        fi
        if pid="$(redis_pid "$REDIS_DIR")"; then
            say "Redis     $REDIS_HOST:$REDIS_PORT already running (pid $pid)"
        else
            say "Redis     $REDIS_HOST:$REDIS_PORT already answering PING: reusing it"
        fi
        warn_if_no_aof
        return 0
    fi
    if port_open "$REDIS_PORT" "$REDIS_HOST"; then
        die "port $REDIS_PORT answers, but not as a Redis that answers PING; free it or set TXDAG_REDIS_PORT"
    fi
    command -v redis-server >/dev/null 2>&1 || die "redis-server not found; run: bash scripts/setup.sh"
    command -v redis-cli >/dev/null 2>&1 || die "redis-cli not found; run: bash scripts/setup.sh"
    mkdir -p "$REDIS_DATA"
    rm -f "$REDIS_PID"
    # A dump and no append-only file: the data of a Redis that ran without one (restart-redis or stop of a Redis
    # started elsewhere or by an older services.sh). Started with appendonly yes, Redis would ignore the dump and
    # come up empty; so it loads the dump first, and the append-only file is switched on below.
    if [[ -f "$REDIS_DATA/dump.rdb" ]] && ! aof_exists; then
        aof=no
    fi
    # The durability of write_redis_config (scripts/lib/common.sh): appendfsync always, no RDB snapshots.
    write_redis_config "$REDIS_DIR" "$REDIS_HOST" "$REDIS_PORT" "$aof"
    redis-server "$REDIS_DIR/redis.conf" >/dev/null || die "redis-server did not start; see $REDIS_DIR/redis.log"
    if ! wait_for "redis_up ${REDIS[*]}" "$REDIS_WAIT_SECONDS"; then
        tail -n 20 "$REDIS_DIR/redis.log" >&2 || true
        die "Redis did not answer PING on $REDIS_HOST:$REDIS_PORT within ${REDIS_WAIT_SECONDS}s; log: $REDIS_DIR/redis.log"
    fi
    if [[ "$aof" == no ]]; then
        # The dump is loaded: CONFIG SET appendonly yes writes the append-only file from memory (a rewrite), and
        # once that is done the dump is no longer needed; the next start loads the append-only file.
        [[ "$(rcli "${REDIS[@]}" config set appendonly yes 2>&1)" == OK ]] ||
            die "Redis on $REDIS_HOST:$REDIS_PORT refused CONFIG SET appendonly yes; log: $REDIS_DIR/redis.log"
        wait_for aof_settled 120 ||
            die "Redis on $REDIS_HOST:$REDIS_PORT did not write its append-only file within 120 s (the dump" \
                "$REDIS_DATA/dump.rdb is kept); log: $REDIS_DIR/redis.log"
        rm -f "$REDIS_DATA/dump.rdb"
        say "Redis     $REDIS_HOST:$REDIS_PORT loaded $REDIS_DATA/dump.rdb and wrote its append-only file from it"
    fi
    say "Redis     $REDIS_HOST:$REDIS_PORT started (pid $(redis_pid "$REDIS_DIR" || echo '?'), data $REDIS_DATA, log $REDIS_DIR/redis.log)"
}

# A Redis of this script that runs without its append-only file (started by an older services.sh) is named, with
# how to switch it on; stop and restart-redis keep its data anyway (SHUTDOWN SAVE).
warn_if_no_aof() {
    if redis_pid "$REDIS_DIR" >/dev/null && [[ "$(redis_config appendonly)" == no ]]; then
        say "Redis     $REDIS_HOST:$REDIS_PORT runs without its append-only file (started by an older services.sh): a" \
            "crash would lose its data; 'bash scripts/services.sh restart-redis' keeps the data and switches it on"
    fi
}

# Shuts the Redis on the port down so that the next start here has all its data and users: ACL SAVE, then
# SHUTDOWN. The append-only file of a Redis of ours holds the data already; any other Redis (one started
# elsewhere, or without an append-only file) writes a dump (SHUTDOWN SAVE), which goes to $REDIS_DATA, where
# the next start loads it. Returns 1 when the admin user could not shut it down.
shutdown_redis() {
    local pid dir file aof stale i
    pid="$(redis_pid "$REDIS_DIR" || true)"
    dir="$(redis_config dir)"
    file="$(redis_config dbfilename)"
    aof="$(redis_config appendonly)"
    if [[ -n "$(redis_config aclfile)" ]] && [[ "$(rcli "${REDIS[@]}" acl save 2>&1)" != OK ]]; then
        say "Redis     $REDIS_HOST:$REDIS_PORT: ACL SAVE failed: users added since the start without it are lost"
    fi
    if [[ "$aof" == yes && -n "$dir" && "$dir" -ef "$REDIS_DATA" ]]; then
        say "Redis     $REDIS_HOST:$REDIS_PORT shutting down (SHUTDOWN; the data is in $REDIS_DATA)"
        RCLI_TIMEOUT=30 rcli "${REDIS[@]}" shutdown >/dev/null 2>&1 || true
        aof=ours
    else
        say "Redis     $REDIS_HOST:$REDIS_PORT shutting down (SHUTDOWN SAVE)"
        RCLI_TIMEOUT=30 rcli "${REDIS[@]}" shutdown save >/dev/null 2>&1 || true
    fi
    wait_port_closed "$REDIS_PORT" "$REDIS_HOST" || return 1
    if [[ -n "$pid" ]]; then
        for ((i = 0; i < 40; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.25
        done
    fi
    rm -f "$REDIS_PID"
    [[ "$aof" != ours ]] || return 0
    mkdir -p "$REDIS_DATA"
    [[ -n "$dir" && -n "$file" && -f "$dir/$file" ]] || return 0
    # The dump is newer than an append-only file left in $REDIS_DATA (Redis would load that one): set it aside.
    if aof_exists; then
        stale="$REDIS_DATA/aof-replaced-$(date -u +%Y%m%dT%H%M%SZ)"
        mkdir -p "$stale"
        mv -f "$REDIS_DATA"/appendonlydir "$REDIS_DATA"/appendonly.aof "$stale"/ 2>/dev/null || true
        say "Redis     $REDIS_HOST:$REDIS_PORT: the dump is newer than the append-only file in $REDIS_DATA: that" \
            "file moved to $stale"
    fi
    if [[ "$dir/$file" -ef "$REDIS_DATA/dump.rdb" ]]; then
        :
    elif [[ "$dir" -ef "$REDIS_DIR" ]]; then # an older services.sh's Redis: its dump in .run/redis-<port>/
        mv -f "$dir/$file" "$REDIS_DATA/dump.rdb"
    else
        cp -f "$dir/$file" "$REDIS_DATA/dump.rdb"
    fi
}

stop_redis() {
    local pid
    if pid="$(redis_pid "$REDIS_DIR")"; then
        if ! redis_up "${REDIS[@]}" || ! redis_acl_on || ! shutdown_redis; then
            # Not answering as ours: SIGTERM, on which Redis still writes its append-only file out.
            terminate "$pid"
            rm -f "$REDIS_PID"
        fi
        say "Redis     $REDIS_HOST:$REDIS_PORT stopped (pid $pid)"
    elif redis_up "${REDIS[@]}"; then
        say "Redis     $REDIS_HOST:$REDIS_PORT left running: not started by this script"
    else
        rm -f "$REDIS_PID"
        say "Redis     $REDIS_HOST:$REDIS_PORT not running"
    fi
}

# Restarts the Redis on the port here, keeping its data and users (shutdown_redis), whoever started it.
restart_redis() {
    if redis_up "${REDIS[@]}"; then
        shutdown_redis || die "Redis on $REDIS_HOST:$REDIS_PORT did not shut down"
    else
        say "Redis     $REDIS_HOST:$REDIS_PORT not running: starting it"
    fi
    start_redis
}

# wipe refuses while the Redis of this port runs (ours, or any Redis whose data folder is ours).
redis_stopped_for_wipe() {
    local pid
    if pid="$(redis_pid "$REDIS_DIR")"; then
        die "Redis on $REDIS_HOST:$REDIS_PORT is running (pid $pid): stop it first (bash scripts/services.sh stop), nothing" \
            "was deleted"
    fi
    if redis_up "${REDIS[@]}" && [[ "$(redis_config dir)" -ef "$REDIS_DATA" ]]; then
        die "a Redis on $REDIS_HOST:$REDIS_PORT runs on $REDIS_DATA: stop it first, nothing was deleted"
    fi
}

# Deletes the data of the Redis of this port (its data/ folder). The ACL file stays: its users are configuration.
wipe_redis() {
    rm -rf "$REDIS_DATA"
    say "Redis     $REDIS_HOST:$REDIS_PORT data deleted ($REDIS_DATA); its users ($REDIS_DIR/users.acl) are kept"
}

# --- ZooKeeper ----------------------------------------------------------------------------------------------

start_zk() {
    local pid
    if zk_up; then
        if pid="$(zk_pid "$ZK_DIR")"; then
            say "ZooKeeper $ZK_HOST:$ZK_PORT already running (pid $pid)"
        else
            say "ZooKeeper $ZK_HOST:$ZK_PORT already answering ruok: reusing it"
        fi
        return 0
    fi
    if pid="$(zk_pid "$ZK_DIR")"; then
        # Started by us a moment ago and still coming up.
        say "ZooKeeper $ZK_HOST:$ZK_PORT starting (pid $pid): waiting"
    else
        if port_open "$ZK_PORT" "$ZK_HOST"; then
            die "port $ZK_PORT answers, but not as a ZooKeeper that answers ruok; free it or set TXDAG_ZK_PORT"
        fi
        [[ -x "$ZK_SERVER" ]] || die "$ZK_SERVER not found; run: bash scripts/setup.sh"
        command -v java >/dev/null 2>&1 || die "java not found on PATH; ZooKeeper needs it"
        write_zk_config "$ZK_DIR" "$ZK_HOST" "$ZK_PORT"
        launch_zk "$ZK_DIR" 512m
        pid=$!
    fi
    if ! wait_for zk_up "$ZK_WAIT_SECONDS" "$pid"; then
        tail -n 30 "$ZK_DIR/zookeeper.log" >&2 || true
        rm -f "$ZK_PID"
        if ! kill -0 "$pid" 2>/dev/null; then
            die "ZooKeeper exited while starting on $ZK_HOST:$ZK_PORT; log: $ZK_DIR/zookeeper.log"
        fi
        terminate "$pid"
        die "ZooKeeper did not answer ruok on $ZK_HOST:$ZK_PORT within ${ZK_WAIT_SECONDS}s (stopped it);" \
            "log: $ZK_DIR/zookeeper.log"
    fi
    say "ZooKeeper $ZK_HOST:$ZK_PORT started (pid $pid, log $ZK_DIR/zookeeper.log)"
}

stop_zk() {
    local pid
    if pid="$(zk_pid "$ZK_DIR")"; then
        terminate "$pid"
        rm -f "$ZK_PID"
        say "ZooKeeper $ZK_HOST:$ZK_PORT stopped (pid $pid)"
    elif zk_up; then
        say "ZooKeeper $ZK_HOST:$ZK_PORT left running: not started by this script"
    else
        rm -f "$ZK_PID"
        say "ZooKeeper $ZK_HOST:$ZK_PORT not running"
    fi
}

zk_stopped_for_wipe() {
    local pid
    if pid="$(zk_pid "$ZK_DIR")"; then
        die "ZooKeeper on $ZK_HOST:$ZK_PORT is running (pid $pid): stop it first (bash scripts/services.sh stop)," \
            "nothing was deleted"
    fi
}

# Deletes ZooKeeper's data (its data/ folder: every znode).
wipe_zk() {
    rm -rf "$ZK_DIR/data"
    say "ZooKeeper $ZK_HOST:$ZK_PORT data deleted ($ZK_DIR/data)"
}

# --- status -------------------------------------------------------------------------------------------------

status() {
    local rc=0 pid
    if redis_up "${REDIS[@]}"; then
        if pid="$(redis_pid "$REDIS_DIR")"; then
            say "Redis     $REDIS_HOST:$REDIS_PORT up (started here, pid $pid)"
            warn_if_no_aof
        else
            say "Redis     $REDIS_HOST:$REDIS_PORT up (not started by this script)"
        fi
    else
        say "Redis     $REDIS_HOST:$REDIS_PORT down"
        rc=1
    fi
    if zk_up; then
        if pid="$(zk_pid "$ZK_DIR")"; then
            say "ZooKeeper $ZK_HOST:$ZK_PORT up (started here, pid $pid)"
        else
            say "ZooKeeper $ZK_HOST:$ZK_PORT up (not started by this script)"
        fi
    else
        say "ZooKeeper $ZK_HOST:$ZK_PORT down"
        rc=1
    fi
    return "$rc"
}

usage() {
    sed -n '2,/^# Environment/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

which="${2:-all}"
case "$which" in
all | redis | zk | kafka) ;;
*) usage ;;
esac
wants() { [[ "$which" == all || "$which" == "$1" ]]; } # the command is for service $1
kafka_sh() { bash "$ROOT/scripts/kafka.sh" "$@"; }

case "${1:-}" in
start)
    ! wants redis || start_redis
    ! wants zk || start_zk
    ! wants kafka || kafka_sh start
    ;;
stop)
    ! wants redis || stop_redis
    ! wants zk || stop_zk
    ! wants kafka || kafka_sh stop
    ;;
status)
    rc=0
    status || rc=1
    kafka_sh status || rc=1
    exit "$rc"
    ;;
restart-redis) restart_redis ;;
wipe)
    # all checked before anything is deleted: never half a wipe
    ! wants redis || redis_stopped_for_wipe
    ! wants zk || zk_stopped_for_wipe
    ! wants kafka || kafka_sh wipe --check
    ! wants redis || wipe_redis
    ! wants zk || wipe_zk
    ! wants kafka || kafka_sh wipe
    if [[ "$which" != all ]]; then
        say "only $which wiped: the topologies' state in Redis, their txids in ZooKeeper and their sources no" \
            "longer match; wipe all three (no argument) to start them afresh"
    fi
    ;;
env)
    # The passwords stay in .run/credentials.env: these lines name its variables, not their values.
    printf 'source %q\n' "$ROOT/.run/credentials.env"
    # shellcheck disable=SC2016  # expanded where the lines are eval'ed
    printf 'export TXDAG_REDIS_URL="redis://${TXDAG_REDIS_ADMIN_USER}:${TXDAG_REDIS_ADMIN_PASSWORD}@%s:%s/0"\n' \
        "$REDIS_HOST" "$REDIS_PORT"
    printf 'export TXDAG_ZK_HOSTS=%s:%s\n' "$ZK_HOST" "$ZK_PORT"
    kafka_sh env
    ;;
*) usage ;;
esac

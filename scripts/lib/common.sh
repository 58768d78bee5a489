# The helpers scripts/*.sh share, each defined here once (tests/unit/test_scripts.py fails on a function defined
# twice across scripts/). Sourced after the script sets ROOT (the repository root); it only defines functions.
# Messages start with the name of the script that runs (services, cluster, ...): `say` writes to stdout, or to
# the file descriptor in SAY_FD (postgres.sh: 2, as its stdout carries what its commands print).
# shellcheck shell=bash

ZK_SERVER=/usr/share/zookeeper/bin/zkServer.sh

say() { printf '%s: %s\n' "$(basename "${BASH_SOURCE[-1]}" .sh)" "$*" >&"${SAY_FD:-1}"; }
die() {
    printf '%s: error: %s\n' "$(basename "${BASH_SOURCE[-1]}" .sh)" "$*" >&2
    exit 1
}

# A password of $1 random bytes (default 24), in hex.
random_password() { head -c "${1:-24}" /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# credential NAME: one value of .run/credentials.env (scripts/credentials.sh creates it), read in a subshell: the
# credentials are not exported to what the caller starts.
credential() {
    # shellcheck source=/dev/null
    (source "$(bash "$ROOT/scripts/credentials.sh")" && printf '%s' "${!1}")
}

# loopback_host NAME: the address in environment variable NAME (default 127.0.0.1) that a server binds to or a
# client connects to. txdag's servers listen on loopback only, so anything outside 127.0.0.0/8 is refused with a
# message that names the variable. (bench/jepsen gives each server an address of its own, 127.81.0.x, in a network
# namespace of its own.)
loopback_host() {
    local value="${!1:-127.0.0.1}" ok=1 part
    if [[ "$value" =~ ^127\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]]; then
        for part in "${BASH_REMATCH[@]:1}"; do
            ((10#$part <= 255)) || ok=0
        done
    else
        ok=0
    fi
    ((ok)) || die "$1=$value is not an IPv4 address in 127.0.0.0/8: txdag's servers listen on loopback only" \
        "(unset it for 127.0.0.1)"
    printf '%s\n' "$value"
}

# --- processes and ports --------------------------------------------------------------------------------------

# Dies unless $1 is a port number.
check_port() {
    if ! [[ "$1" =~ ^[0-9]+$ ]] || (($1 < 1 || $1 > 65535)); then
        die "not a port number: '$1'"
    fi
}

# Something accepts TCP connections on port $1 of address $2 (default: the caller's $HOST).
port_open() {
    # shellcheck disable=SC2016  # $0 and $1 are expanded by the inner bash
    timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "${2:-$HOST}" "$1" 2>/dev/null
}

# Waits up to 15 s for port $1 (of address $2, default $HOST) to stop accepting connections.
wait_port_closed() {
    local port="$1" i
    for ((i = 0; i < 60; i++)); do
        port_open "$port" "${2:-}" || return 0
        sleep 0.25
    done
    return 1
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

# Waits up to $2 seconds for the command line $1 (a probe function, or a line such as "! port_open 7301", run by
# eval) to succeed; gives up early when process $3 (if given) exits.
wait_for() {
    local probe="$1" seconds="$2" pid="${3:-}" i
    for ((i = 0; i < seconds * 4; i++)); do
        eval "$probe" && return 0
        if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
            return 1
        fi
        sleep 0.25
    done
    eval "$probe"
}

# Sends SIGTERM to process $1 and waits for it to exit (SIGKILL after 15 s). With $2 = group, the signals go to
# its process group: a node started in a session of its own (setsid) goes with what it started (a Spark worker's
# executors, a Celery worker's tasks); a process that leads no group gets them alone.
terminate() {
    local pid="$1" target="$1" i
    [[ "${2:-}" != group ]] || target="-$1"
    kill -TERM -- "$target" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 60; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.25
    done
    say "pid $pid did not exit on SIGTERM: sending SIGKILL"
    kill -KILL -- "$target" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
}

# --- Redis (a server's folder: redis.conf, users.acl, redis.pid, redis.log, data/) ---------------------------

# redis-cli to $1:$2 as the admin user of .run/credentials.env; the password goes through the environment, not the
# command line. A server without that user (started before access control) answers as its default user: redis-cli
# only warns on stderr. RCLI_TIMEOUT: seconds (default 3).
rcli() {
    local host="$1" port="$2"
    shift 2
    REDISCLI_AUTH="$TXDAG_REDIS_ADMIN_PASSWORD" timeout "${RCLI_TIMEOUT:-3}" \
        redis-cli --user "$TXDAG_REDIS_ADMIN_USER" -h "$host" -p "$port" "$@"
}

# A Redis answers on $1:$2: PONG, or a refusal of our credentials.
redis_up() {
    local reply
    reply="$(rcli "$1" "$2" ping 2>/dev/null)" || return 1
    [[ "$reply" == PONG || "$reply" == NOAUTH* || "$reply" == WRONGPASS* ]]
}

# The pid of the Redis of folder $1, when it runs.
redis_pid() { live_pid "$1/redis.pid" redis-server; }

# The ACL file of folder $1: the default user off, the admin user of .run/credentials.env (both written afresh, so
# that new credentials take effect), and every other user the file held, unchanged: the ones `txdag acl redis
# --apply` saved (ACL SAVE), and those a stop saved. The file is replaced only once it has been read whole.
# The default user is off (no one can log in as it) but may run everything: Redis 7.0 replays its append-only file
# as the default user and checks each MULTI/EXEC (and each Lua script's writes, stored as one) against its rules
# again, so with -@all every commit would be dropped, silently, at the next start (redis/redis#14541).
write_acl_file() {
    local hash kept="" file="$1/users.acl"
    hash="$(printf '%s' "$TXDAG_REDIS_ADMIN_PASSWORD" | sha256sum | cut -d' ' -f1)"
    if [[ -f "$file" ]]; then
        # grep exits 1 when it selects nothing (only the two users above), 2 when it cannot read the file
        kept="$(grep -v -e '^user default ' -e "^user $TXDAG_REDIS_ADMIN_USER " "$file")" || (($? == 1)) ||
            die "could not read $file (its users would be lost): check its permissions"
    fi
    (
        umask 077
        {
            printf 'user default off resetkeys ~* &* +@all\nuser %s on #%s ~* &* +@all\n' "$TXDAG_REDIS_ADMIN_USER" "$hash"
            [[ -z "$kept" ]] || printf '%s\n' "$kept"
        } >"$file.new" && mv -f "$file.new" "$file"
    ) || die "could not write $file"
}

# The config of the Redis of folder $1 on $2:$3 (mode 600: a replica's masterauth is a secret), with its ACL file
# (write_acl_file), appendonly $4 (yes; no only to load a dump first), and the lines $5... (cluster mode).
# Durability, the exactly-once promise: a commit that Redis acknowledged is in the append-only file *and on disk*
# before txdag records it in ZooKeeper, so no crash (of Redis, of the machine, of the power) can leave ZooKeeper
# ahead of Redis. appendfsync always pays for that with one fsync per round of writes Redis answers together: a
# commit is one script call per chunk of 5,000 keys, so one fsync per chunk (measured: no difference within the
# noise for the in-process demo; ~1.5 ms per write sent one at a time, unpipelined). everysec would lose up to
# about a second of acknowledged commits when the machine (not only Redis) goes down, and txdag would find
# ZooKeeper ahead of Redis. No RDB snapshots (save ""): the append-only file is the copy on disk.
write_redis_config() {
    local dir="$1" host="$2" port="$3" aof="$4"
    shift 4
    mkdir -p "$dir/data"
    write_acl_file "$dir"
    (
        umask 077
        cat >"$dir/redis.conf" <<EOF
port $port
bind $host
daemonize yes
dir $dir/data
pidfile $dir/redis.pid
logfile $dir/redis.log
aclfile $dir/users.acl
save ""
appendonly $aof
appendfsync always
EOF
        (($# == 0)) || printf '%s\n' "$@" >>"$dir/redis.conf"
    ) || die "could not write $dir/redis.conf"
}

# --- ZooKeeper (a server's folder: zoo.cfg, zookeeper.pid, zookeeper.log, data/) ------------------------------

# The pid of the ZooKeeper of folder $1, when it runs.
zk_pid() { live_pid "$1/zookeeper.pid" "$1/zoo.cfg"; }

# The answer of the ZooKeeper on $1:$2 to the four-letter word $3 ('ruok' -> 'imok'; 'srvr' -> ... 'Mode: ...').
zk_word() {
    # shellcheck disable=SC2016  # $0, $1 and $2 are expanded by the inner bash
    timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" && printf "$2" >&3 && cat <&3' "$1" "$2" "$3" 2>/dev/null || true
}

# The config of the ZooKeeper of folder $1 on $2:$3, written afresh at each start; its data folder is never emptied
# but by a wipe. ZooKeeper fsyncs its transaction log before it answers a write (forceSync, on by default);
# autopurge keeps the 3 newest snapshots and the logs after them, checked every hour, so that the folder does not
# grow for ever. A member of an ensemble gets its id $4 and the ensemble's lines $5... (server.N=host:quorum:election).
write_zk_config() {
    local dir="$1" host="$2" port="$3" myid="${4:-}"
    shift $(($# < 4 ? $# : 4))
    mkdir -p "$dir/data"
    [[ -z "$myid" ]] || printf '%s\n' "$myid" >"$dir/data/myid"
    {
        cat <<EOF
# Written by scripts/$(basename "${BASH_SOURCE[-1]}"): a ZooKeeper for txdag, loopback only.
tickTime=2000
dataDir=$dir/data
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
clientPort=$port
clientPortAddress=$host
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr,envi
maxSessionTimeout=60000
EOF
        [[ -z "$myid" ]] || printf 'initLimit=10\nsyncLimit=5\n'
        (($# == 0)) || printf '%s\n' "$@"
    } >"$dir/zoo.cfg"
}

# Starts the ZooKeeper of folder $1 (its zoo.cfg written) in a session of its own, with a heap of $2 (or the JVM
# flags of TXDAG_ZK_JVMFLAGS); its pid in zookeeper.pid and in $!. start-foreground rather than 'start': Debian's
# zkEnv.sh overrides ZOO_LOG_DIR, so 'start' would write its output under /var/log/zookeeper; this way the log
# stays in the folder. JMXDISABLE: otherwise the JVM opens a JMX port on all interfaces.
launch_zk() {
    local dir="$1" heap="$2"
    JMXDISABLE=true ZOO_LOG_DIR="$dir" SERVER_JVMFLAGS="${TXDAG_ZK_JVMFLAGS:--Xmx$heap}" \
        setsid "$ZK_SERVER" start-foreground "$dir/zoo.cfg" >"$dir/zookeeper.log" 2>&1 </dev/null &
    printf '%s\n' "$!" >"$dir/zookeeper.pid"
}

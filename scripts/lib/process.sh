# Process and port helpers of the scripts that run txdag's servers (scripts/services.sh, scripts/kafka.sh), sourced
# by them. The caller defines say (a line of progress) and die (an
# error, then exit 1).
# shellcheck shell=bash

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

# Prints the pid in pid file $1 when that process is alive and its command line contains $2.
live_pid() {
    local pid
    [[ -f "$1" ]] || return 1
    pid="$(tr -dc '0-9' <"$1")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2" || return 1
    printf '%s\n' "$pid"
}

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

# Waits up to 15 s for port $1 (of address $2, default $HOST) to stop accepting connections.
wait_port_closed() {
    local port="$1" i
    for ((i = 0; i < 60; i++)); do
        port_open "$port" "${2:-}" || return 0
        sleep 0.25
    done
    return 1
}

# loopback_host NAME: the address in environment variable NAME (default 127.0.0.1) that a server binds to or a
# client connects to. txdag's servers listen on loopback only, so anything outside 127.0.0.0/8 is refused with a
# message that names the variable. Sourced by scripts/services.sh, postgres.sh, airflow.sh and spark-connect.sh;
# the caller defines die. (bench/jepsen gives each server an address of its own, 127.81.0.x, in a network
# namespace of its own.)
# shellcheck shell=bash

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

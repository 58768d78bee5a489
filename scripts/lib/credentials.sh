# One value of .run/credentials.env (scripts/credentials.sh creates it), read in a subshell: the credentials are
# not exported to what the caller starts. Sourced by scripts/airflow.sh and scripts/kafka.sh; the caller sets ROOT.
# shellcheck shell=bash

credential() {
    # shellcheck source=/dev/null
    (source "$(bash "$ROOT/scripts/credentials.sh")" && printf '%s' "${!1}")
}

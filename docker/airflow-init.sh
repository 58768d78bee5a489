#!/usr/bin/env bash
# One-shot set-up of Airflow in docker-compose.yaml (service airflow-init, before every other Airflow component):
#   1. the metadata database (`airflow db migrate`; with the FAB auth manager, its user and role tables too);
#   2. the login of the UI and of the REST API (`txdag pools sync`, the transactions page): a FAB user with the
#      Admin role, $TXDAG_AIRFLOW_USER (default admin) with the password $TXDAG_AIRFLOW_PASSWORD (compose sets it
#      from AIRFLOW_ADMIN_PASSWORD); created once, its password set again at each run so that .env stays the truth;
#   3. when run as root (compose runs it so): the logs volume given to AIRFLOW_UID.
# Exits non-zero, naming the step, when one fails.
set -euo pipefail

LOGIN="${TXDAG_AIRFLOW_USER:-admin}"
say() { printf 'airflow-init: %s\n' "$*"; }
die() {
    printf 'airflow-init: error: %s\n' "$*" >&2
    exit 1
}

[[ -n "${TXDAG_AIRFLOW_PASSWORD:-}" ]] || die "TXDAG_AIRFLOW_PASSWORD is not set (AIRFLOW_ADMIN_PASSWORD in .env)"

airflow db migrate || die "step 1/3 failed: airflow db migrate"
say "step 1/3: database migrated"

out="$(airflow users create --username "$LOGIN" --password "$TXDAG_AIRFLOW_PASSWORD" --role Admin \
    --firstname Airflow --lastname Admin --email "${TXDAG_AIRFLOW_EMAIL:-$LOGIN@example.org}" 2>&1)" || {
    printf '%s\n' "$out" >&2
    die "step 2/3 failed: airflow users create $LOGIN (is the FAB auth manager configured?)"
}
if grep -q 'already exists' <<<"$out"; then
    airflow users reset-password --username "$LOGIN" --password "$TXDAG_AIRFLOW_PASSWORD" >/dev/null ||
        die "step 2/3 failed: airflow users reset-password $LOGIN"
    say "step 2/3: login $LOGIN (role Admin) exists; its password set from TXDAG_AIRFLOW_PASSWORD"
else
    say "step 2/3: login $LOGIN created (role Admin)"
fi

if [[ "$(id -u)" == 0 ]]; then
    chown -R "${AIRFLOW_UID:-50000}:0" "${AIRFLOW_HOME:-/opt/airflow}/logs" || die "step 3/3 failed: chown logs"
    say "step 3/3: ${AIRFLOW_HOME:-/opt/airflow}/logs owned by uid ${AIRFLOW_UID:-50000}"
fi
say "done"

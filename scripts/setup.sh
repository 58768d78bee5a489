#!/usr/bin/env bash
# Installs what txdag needs on a Debian 12 machine, and nothing it already has:
#   - Debian packages: redis-server, redis-tools, zookeeper, postgresql-15, postgresql-client-15,
#     openjdk-17-jre-headless and maven (Kafka's broker and its jars), and chromium with chromium-driver for the UI
#     test in headless Chromium (tests/e2e/test_ui_page.py) (apt-get update only when one is missing; services the
#     packages would start at install time are kept from starting: the servers run from scripts/services.sh and
#     scripts/postgres.sh, on loopback and ports of their own)
#   - .venv at the repository root (Python 3.11) with txdag installed editable, with its airflow, dev and bench
#     extras (bench: matplotlib for bench/throughput.py's chart, py-spy for its --profile), at the exact versions
#     of constraints/constraints-3.11.txt (pyproject.toml has ranges; the constraints file is the tested set)
#   - the jars of Kafka's broker and of Spark's Kafka source, through Maven, into .run/jars/ (bash scripts/kafka.sh
#     fetch: the versions of scripts/kafka/*.pom.xml)
# Safe to run again: a rerun with nothing to do takes about a second (it reinstalls when pyproject.toml or the
# constraints file changed, and fetches the jars again when a pom changed).
#
#   bash scripts/setup.sh      (scripts/demo.sh and scripts/test.sh run it first)
#
# Environment:
#   TXDAG_PYTHON   the Python 3.11 interpreter to build .venv with (default: python3.11 on PATH, pyenv's, Debian's)
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then # the comment above, before anything runs or is created
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
    exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.txdag-installed"
CONSTRAINTS="$ROOT/constraints/constraints-3.11.txt"
APT_PACKAGES=(redis-server redis-tools zookeeper postgresql-15 postgresql-client-15 openjdk-17-jre-headless maven
    chromium chromium-driver)

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$ROOT/scripts/lib/common.sh"

# Run a command as root: directly when we are root, else through sudo.
as_root() {
    if [[ $(id -u) -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root to run '$*' (not root, and sudo is not installed)"
    fi
}

is_installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

apt_install() {
    local log policy=/usr/sbin/policy-rc.d added_policy=""
    log="$(mktemp -t txdag-apt.XXXXXX)"
    say "installing Debian packages: $* (log: $log)"
    # Without a policy-rc.d, installing postgresql-15 (or redis-server) starts a server on its default port
    # (PostgreSQL on localhost:5432, IPv6 included). A temporary policy that denies service starts prevents that.
    if [[ ! -e "$policy" ]]; then
        as_root sh -c "printf '#!/bin/sh\\n# temporary, from txdag scripts/setup.sh\\nexit 101\\n' >$policy && chmod 755 $policy"
        added_policy=1
    fi
    local rc=0
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update >"$log" 2>&1 &&
        as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y \
            --no-install-recommends "$@" >>"$log" 2>&1 || rc=$?
    if [[ -n "$added_policy" ]]; then
        as_root rm -f "$policy"
    fi
    if ((rc != 0)); then
        tail -n 30 "$log" >&2
        die "apt-get could not install: $*"
    fi
    rm -f "$log"
}

# Prints the path of a Python 3.11 that has venv, or fails.
find_python() {
    local candidate
    local -a candidates=()
    if [[ -n "${TXDAG_PYTHON:-}" ]]; then
        candidates=("$TXDAG_PYTHON")
    else
        candidates=(python3.11 "${PYENV_ROOT:-${HOME:-/root}/.pyenv}/shims/python3.11")
        shopt -s nullglob
        candidates+=("${PYENV_ROOT:-${HOME:-/root}/.pyenv}"/versions/3.11*/bin/python3.11)
        shopt -u nullglob
        candidates+=(/usr/bin/python3.11)
    fi
    for candidate in "${candidates[@]}"; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info[:2] != (3, 11))' >/dev/null 2>&1; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

# 1. Debian packages
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    is_installed "$pkg" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    apt_install "${missing[@]}"
else
    say "Debian packages present: ${APT_PACKAGES[*]}"
fi
command -v java >/dev/null 2>&1 || die "java not found on PATH (ZooKeeper needs it; the zookeeper package pulls default-jre)"
[[ -x /usr/lib/postgresql/15/bin/pg_ctl ]] || die "/usr/lib/postgresql/15/bin/pg_ctl not found (package postgresql-15)"

# 2. Python 3.11 and .venv
if [[ -x "$VENV/bin/python" ]] &&
    ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' >/dev/null 2>&1; then
    say "$VENV is not a working Python 3.11 venv: recreating it"
    rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
    if ! python="$(find_python)"; then
        if [[ -n "${TXDAG_PYTHON:-}" ]]; then
            die "TXDAG_PYTHON=$TXDAG_PYTHON is not a Python 3.11 with venv"
        fi
        say "no Python 3.11 with venv found: installing Debian's"
        apt_install python3.11 python3.11-venv
        python="$(find_python)" || die "no usable Python 3.11 even after installing python3.11-venv"
    fi
    say "creating $VENV with $python"
    "$python" -m venv "$VENV"
fi

# 3. Python packages (skipped while the stamp is newer than pyproject.toml and the constraints file)
[[ -f "$CONSTRAINTS" ]] || die "$CONSTRAINTS not found (the exact versions to install)"
if [[ -f "$STAMP" && "$STAMP" -nt "$ROOT/pyproject.toml" && "$STAMP" -nt "$CONSTRAINTS" ]]; then
    say "Python packages up to date in .venv (delete $STAMP to force a reinstall)"
else
    say "upgrading pip in .venv"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    say "installing txdag (editable) with its airflow, dev and bench extras into .venv (-c ${CONSTRAINTS#"$ROOT/"})"
    (cd "$ROOT" && "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c "$CONSTRAINTS" \
        -e '.[airflow,dev,bench]')
    # The editable build leaves include/txdag.egg-info behind, and include/ is on sys.path (the editable .pth):
    # importlib.metadata would then see txdag twice, and Airflow would load the plugin of its airflow.plugins entry
    # point twice (the second one reported as a plugin import error). The installed dist-info is the one to keep.
    rm -rf "$ROOT/include/txdag.egg-info"
    touch "$STAMP"
fi

# 4. Kafka's jars and Spark's Kafka source's (Maven; nothing to do when .run/jars/ has those of the poms)
bash "$ROOT/scripts/kafka.sh" fetch
say "ready ($("$VENV/bin/python" -V 2>&1) in .venv)"

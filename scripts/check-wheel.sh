#!/usr/bin/env bash
# Proves that the wheel deploys: builds txdag's wheel from a clean copy of the sources, then for each Python given
# creates a fresh venv outside the checkout, installs apache-airflow==$AIRFLOW_VERSION and the wheel (not editable,
# with its airflow extra) from /tmp, and checks, with an AIRFLOW_HOME of its own (SQLite):
#   txdag --version; the plugin loaded from its entry point with no plugin import error; the provider and its
#   zookeeper connection type; the pool listener registered; `airflow api-server` on 127.0.0.1:$PORT serving the
#   Transactions page at /txdag/ (a redirect to the login without a token, the page with one); the CLI's hints
#   naming no dev script.
# Usage: bash scripts/check-wheel.sh [python ...]   (default: pyenv's 3.11, 3.12 and 3.13)
# Environment: TXDAG_CHECK_PORT (8786), TXDAG_CHECK_DIR (a new /tmp/txdag-check.XXXX), AIRFLOW_VERSION (3.3.2),
#   TXDAG_CHECK_CONSTRAINTS=1 to install with constraints/constraints-3.11.txt (Python 3.11 only).
# Needs network access to PyPI. Takes about 2-4 minutes per Python on 2 cores.
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then # the comment above, before anything runs or is created
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
    exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PORT="${TXDAG_CHECK_PORT:-8786}"
AIRFLOW_VERSION="${AIRFLOW_VERSION:-3.3.2}"
WORK="${TXDAG_CHECK_DIR:-$(mktemp -d /tmp/txdag-check.XXXX)}"
BUILDER="${TXDAG_CHECK_BUILDER:-$ROOT/.venv/bin/python}"  # a Python with pip, setuptools>=68 and wheel

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$ROOT/scripts/lib/common.sh"

pythons=("$@")
if ((${#pythons[@]} == 0)); then
    shopt -s nullglob
    for minor in 11 12 13; do
        found=("${PYENV_ROOT:-$HOME/.pyenv}"/versions/3."$minor".*/bin/python3."$minor")
        ((${#found[@]})) && pythons+=("${found[-1]}")
    done
    shopt -u nullglob
fi
((${#pythons[@]})) || die "no Python given and none found under ~/.pyenv/versions"

# 1. The wheel, from a copy (an in-tree build would leave include/txdag.egg-info in the checkout)
mkdir -p "$WORK/src" "$WORK/dist"
cp "$ROOT/pyproject.toml" "$ROOT/README.md" "$WORK/src/"
cp -r "$ROOT/include" "$WORK/src/"
rm -rf "$WORK/src/include/txdag.egg-info"
find "$WORK/src" -name __pycache__ -prune -exec rm -rf {} +
(cd "$WORK" && "$BUILDER" -m pip wheel --quiet --no-deps --no-build-isolation --disable-pip-version-check \
    -w "$WORK/dist" "$WORK/src")
WHEEL="$(ls "$WORK/dist"/txdag-*.whl)"
say "built $WHEEL"

check_one() {
    local python="$1" version venv home started seconds server_pid=""
    version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    venv="$WORK/venv-$version"
    home="$WORK/airflow-home-$version"
    say "== Python $version ($python): venv $venv"
    rm -rf "$venv" "$home"
    "$python" -m venv "$venv"
    local -a constraints=()
    if [[ "${TXDAG_CHECK_CONSTRAINTS:-}" == 1 && "$version" == 3.11 ]]; then
        constraints=(-c "$ROOT/constraints/constraints-3.11.txt")
    fi
    started=$SECONDS
    (cd /tmp && "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${constraints[@]}" \
        "apache-airflow==$AIRFLOW_VERSION" "${WHEEL}[airflow]")
    seconds=$((SECONDS - started))
    say "installed apache-airflow==$AIRFLOW_VERSION and $(basename "$WHEEL")[airflow] in ${seconds}s"

    export AIRFLOW_HOME="$home" AIRFLOW__CORE__LOAD_EXAMPLES=False AIRFLOW__CORE__DAGS_FOLDER="$home/dags"
    export AIRFLOW__API__HOST=127.0.0.1 AIRFLOW__API__PORT="$PORT" AIRFLOW__API__BASE_URL="http://127.0.0.1:$PORT"
    export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://127.0.0.1:$PORT/execution/" AIRFLOW__API__WORKERS=1
    mkdir -p "$home/dags"
    cd /tmp
    say "txdag --version: $("$venv/bin/txdag" --version)"
    "$venv/bin/python" - <<'EOF'
import importlib.metadata as md
import txdag

assert "site-packages" in txdag.__file__, txdag.__file__  # the wheel, not a checkout
assert [d.metadata["Name"] for d in md.distributions()].count("txdag") == 1
from airflow import plugins_manager
plugins, errors = plugins_manager._get_plugins()
names = {p.name: str(p.source) for p in plugins}
assert "txdag" in names and "airflow.plugins" in names["txdag"], names
assert errors == {}, errors
print("plugin:", names["txdag"], "| plugin import errors:", errors)
from airflow.providers_manager import ProvidersManager
pm = ProvidersManager()
assert "txdag" in pm.providers, sorted(pm.providers)
hook = pm.hooks["zookeeper"]
assert hook is not None and hook.hook_class_name == "txdag.airflow.hooks.ZooKeeperHook", hook
print("provider txdag", pm.providers["txdag"].version, "| connection type zookeeper ->", hook.hook_class_name)
from airflow.listeners.listener import get_listener_manager
from txdag.airflow import pools
listeners = get_listener_manager().pm.get_plugins()
assert pools in listeners, listeners
print("listener registered:", pools.__name__)
from txdag import hints
assert hints.deployment() == "installed", hints.deployment()
print("deployment:", hints.deployment())
EOF
    "$venv/bin/airflow" plugins -o plain | grep -w txdag
    "$venv/bin/airflow" providers list -o plain | grep -w txdag
    "$venv/bin/airflow" db migrate >"$home/db-migrate.log" 2>&1 || { tail -20 "$home/db-migrate.log"; die "db migrate"; }
    # shellcheck disable=SC2016  # $0 is the port, expanded by the inner bash
    if timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0"' "$PORT" 2>/dev/null; then
        die "port $PORT is taken: set TXDAG_CHECK_PORT"
    fi
    "$venv/bin/airflow" api-server --host 127.0.0.1 --port "$PORT" >"$home/api-server.log" 2>&1 &
    server_pid=$!
    started=$SECONDS
    until curl -fsS "http://127.0.0.1:$PORT/api/v2/version" >/dev/null 2>&1; do
        if ! kill -0 "$server_pid" 2>/dev/null || ((SECONDS - started > 180)); then
            tail -30 "$home/api-server.log"
            kill "$server_pid" 2>/dev/null || true
            die "api-server did not answer on 127.0.0.1:$PORT"
        fi
        sleep 1
    done
    say "api-server answers on 127.0.0.1:$PORT after $((SECONDS - started))s"
    local status password token
    status="$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "http://127.0.0.1:$PORT/txdag/")"
    say "GET /txdag/ without a token: $status"
    [[ "$status" == 302\ * ]] || { kill "$server_pid"; die "expected a redirect to the login"; }
    password="$("$venv/bin/python" -c 'import json, os, sys; print(json.load(open(os.path.join(os.environ["AIRFLOW_HOME"], "simple_auth_manager_passwords.json.generated")))["admin"])')"
    token="$(curl -fsS -X POST "http://127.0.0.1:$PORT/auth/token" -H 'Content-Type: application/json' \
        -d "{\"username\": \"admin\", \"password\": \"$password\"}" |
        "$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["access_token"])')"
    curl -fsS -H "Authorization: Bearer $token" "http://127.0.0.1:$PORT/txdag/" >"$home/page.html"
    grep -q "Transactions" "$home/page.html" || { kill "$server_pid"; die "the page does not say Transactions"; }
    say "GET /txdag/ with a token: 200, $(wc -c <"$home/page.html") bytes, title: $(grep -o '<title>[^<]*' "$home/page.html" | head -1 | cut -c8-)"
    curl -fsS -H "Authorization: Bearer $token" "http://127.0.0.1:$PORT/api/v2/plugins" |
        "$venv/bin/python" -c 'import json, sys; d = json.load(sys.stdin); p = [x for x in d["plugins"] if x["name"] == "txdag"]; assert p, d; print("check-wheel: /api/v2/plugins lists txdag: fastapi_apps", [a["url_prefix"] for a in p[0]["fastapi_apps"]], "external_views", [v["name"] for v in p[0]["external_views"]], "listeners", p[0]["listeners"])'
    curl -fsS -H "Authorization: Bearer $token" "http://127.0.0.1:$PORT/api/v2/plugins/importErrors" |
        "$venv/bin/python" -c 'import json, sys; d = json.load(sys.stdin); assert d["total_entries"] == 0, d; print("check-wheel: /api/v2/plugins/importErrors: none")'
    # the CLI against that api-server: its password found under Airflow's default file name, no checkout needed
    TXDAG_AIRFLOW_PORT="$PORT" "$venv/bin/txdag" doctor --check airflow || say "(doctor exit $?: no scheduler runs here)"
    # a hint where no Redis answers: it names no dev script
    local out
    out="$(AIRFLOW_CONN_REDIS_DEFAULT='redis://127.0.0.1:1/0' "$venv/bin/txdag" doctor --check redis --timeout 1 2>&1 || true)"
    printf '%s\n' "$out" | grep -i redis
    if grep -q "scripts/" <<<"$out"; then kill "$server_pid"; die "a hint names a dev script"; fi
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    say "Python $version: OK"
}

for python in "${pythons[@]}"; do
    check_one "$python"
done
say "all OK (work files in $WORK)"

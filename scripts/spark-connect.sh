#!/usr/bin/env bash
# A Spark Connect server on loopback: the warm Spark of topologies with spark_mode="connect" (one JVM for every
# txid, instead of a spark-submit application per txid). It is the pip-installed PySpark's own server class, with
# Spark's Kafka source (KafkaSource's read) when the set-up fetched its jars into .run/jars/spark-kafka/.
#
#   bash scripts/spark-connect.sh start     start it (or reuse the one answering on the port); waits until it listens
#   bash scripts/spark-connect.sh stop      stop the one this script started, and wait
#   bash scripts/spark-connect.sh status    exit 0 when it listens
#   bash scripts/spark-connect.sh url       the sc:// URL (an Airflow spark_connect connection's host and port)
#
# Environment: TXDAG_SPARK_CONNECT_PORT (default 15092, clear of Spark's 15002), TXDAG_SPARK_CONNECT_MASTER
# (default local[2]; spark://host:port for a standalone cluster), TXDAG_SPARK_CONNECT_MEMORY (driver memory, default
# 1g), TXDAG_SPARK_CONNECT_PYTHON (the Python the executors run, default the project's .venv; on a cluster whose
# workers' Python has no txdag, theirs: each topology ships txdag to its session, see `txdag pyfiles`); on a
# cluster also TXDAG_SPARK_CONNECT_CORES (spark.cores.max, default 2: what the server leaves to spark-submit
# applications) and TXDAG_SPARK_CONNECT_EXECUTOR_MEMORY (default 512m); TXDAG_SPARK_CONNECT_HOST (the loopback
# address it binds to, its driver's too, default 127.0.0.1; refused outside 127.0.0.0/8);
# TXDAG_SPARK_CONNECT_JAVA_OPTIONS (the driver JVM's options, default -XX:TieredStopAtLevel=1: the C1 compiler only,
# see docs/performance.md; set it empty for the JVM's defaults; options the JVM refuses stop the start). A server
# already listening on the port is reused as it is, with the options it was started with.
# State (log, pid file) lives in .run/spark-connect-<port>/ at the repository root.
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then # the comment above, before anything runs or is created
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
    exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PORT="${TXDAG_SPARK_CONNECT_PORT:-15092}"
MASTER="${TXDAG_SPARK_CONNECT_MASTER:-local[2]}"
MEMORY="${TXDAG_SPARK_CONNECT_MEMORY:-1g}"
EXECUTOR_PYTHON="${TXDAG_SPARK_CONNECT_PYTHON:-$ROOT/.venv/bin/python}"
# C1 only: a young server's JIT compiles Spark's code paths for fewer core-seconds than C2 (docs/performance.md)
JAVA_OPTIONS="${TXDAG_SPARK_CONNECT_JAVA_OPTIONS--XX:TieredStopAtLevel=1}"
JAVA_ARGS=()
[[ -z "$JAVA_OPTIONS" ]] || JAVA_ARGS=(--driver-java-options "$JAVA_OPTIONS")
CLUSTER_ARGS=()
if [[ "$MASTER" != local* ]]; then
    CLUSTER_ARGS=(--conf "spark.cores.max=${TXDAG_SPARK_CONNECT_CORES:-2}"
        --executor-memory "${TXDAG_SPARK_CONNECT_EXECUTOR_MEMORY:-512m}")
fi
DIR="$ROOT/.run/spark-connect-$PORT"
PID_FILE="$DIR/server.pid"
LOG="$DIR/server.log"
WAIT_SECONDS=90
SERVER_CLASS=org.apache.spark.sql.connect.service.SparkConnectServer

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$ROOT/scripts/lib/common.sh"
HOST="$(loopback_host TXDAG_SPARK_CONNECT_HOST)"

[[ "$PORT" =~ ^[0-9]+$ ]] && ((PORT >= 1 && PORT <= 65535)) || die "not a port number: '$PORT'"

listening() {
    # shellcheck disable=SC2016  # $0 and $1 are expanded by the inner bash
    timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$HOST" "$PORT" 2>/dev/null
}

server_pid() {
    local pid
    [[ -f "$PID_FILE" ]] || return 1
    pid="$(tr -dc '0-9' <"$PID_FILE")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
    printf '%s\n' "$pid"
}

check_driver_options() {
    # Spark's launcher adds -XX:+IgnoreUnrecognizedVMOptions, so a misspelled option would be dropped in silence:
    # the JVM spark-submit runs (JAVA_HOME's, else the one on PATH) is asked first, without that flag, with the
    # options split as Spark splits them (quotes, backslashes, any whitespace) and the heap spark-submit gives it
    local java=java split refused status=0 options=()
    if [[ -n "${JAVA_HOME:-}" ]]; then
        java="$JAVA_HOME/bin/java"
        [[ -x "$java" ]] || die "JAVA_HOME=$JAVA_HOME holds no bin/java: point it at a JDK 17, or unset it"
    fi
    [[ "$JAVA_OPTIONS" != *Xmx* ]] || die "TXDAG_SPARK_CONNECT_JAVA_OPTIONS='$JAVA_OPTIONS': the driver's heap is" \
        "TXDAG_SPARK_CONNECT_MEMORY's (spark-submit refuses -Xmx among the driver's Java options)"
    split="$("$ROOT/.venv/bin/python" -c 'import shlex, sys; print("\n".join(shlex.split(sys.argv[1])))' \
        "$JAVA_OPTIONS" 2>&1)" || die "TXDAG_SPARK_CONNECT_JAVA_OPTIONS='$JAVA_OPTIONS': ${split##*$'\n'}"
    [[ -z "$split" ]] || mapfile -t options <<<"$split"
    refused="$(timeout 30 "$java" "-Xmx$MEMORY" "${options[@]}" -version 2>&1)" || status=$?
    ((status != 0)) || return 0
    refused="$(printf '%s\n' "$refused" | sed 's/ *Error: \(Could not create\|A fatal exception\).*//' |
        paste -sd ' ' | sed 's/^ *//; s/ *$//')"
    ((status != 124)) || refused="no answer from java -version within 30 s"
    die "the JVM refuses the Connect server's options (TXDAG_SPARK_CONNECT_JAVA_OPTIONS='$JAVA_OPTIONS'," \
        "-Xmx$MEMORY of TXDAG_SPARK_CONNECT_MEMORY): $refused; correct them (empty" \
        "TXDAG_SPARK_CONNECT_JAVA_OPTIONS: the JVM's defaults)"
}

start() {
    if listening; then
        say "a server already listens on $HOST:$PORT; reusing it (with the options it was started with)"
        return 0
    fi
    local submit="$ROOT/.venv/bin/spark-submit"
    [[ -x "$submit" ]] || submit="$(command -v spark-submit)" ||
        die "spark-submit not found: run 'bash scripts/setup.sh' (it installs PySpark into .venv)"
    command -v java >/dev/null || die "java not found: install a JDK 17 (Debian: apt-get install openjdk-17-jre-headless)"
    check_driver_options
    mkdir -p "$DIR"
    # Spark's Kafka source (KafkaSource's read), from the set-up's jars when it fetched them (scripts/kafka.sh fetch)
    local jars KAFKA_ARGS=()
    jars="$(bash "$ROOT/scripts/kafka.sh" spark-jars)"
    [[ -z "$jars" ]] || KAFKA_ARGS=(--jars "$jars")
    # Its own session (setsid), so that 'stop' ends the JVM and nothing else; loopback only.
    # A topology's txids share a session a day (txdag.spark.connect): kept for 25 h of idleness, it outlives its day.
    # spark-submit finds PySpark's jars through the `python` first on PATH: the project's; its Python workers run
    # the project's Python too (they import txdag: staging is written from the executors), unless told otherwise.
    PATH="$ROOT/.venv/bin:$PATH" PYSPARK_PYTHON="$EXECUTOR_PYTHON" PYSPARK_DRIVER_PYTHON="$ROOT/.venv/bin/python" \
        SPARK_LOCAL_IP=$HOST setsid "$submit" --class "$SERVER_CLASS" --master "$MASTER" --name txdag-spark-connect \
        --driver-memory "$MEMORY" "${JAVA_ARGS[@]}" "${CLUSTER_ARGS[@]}" \
        --conf spark.connect.grpc.binding.address=$HOST --conf spark.connect.grpc.binding.port="$PORT" \
        --conf spark.ui.enabled=false --conf spark.driver.bindAddress=$HOST --conf spark.driver.host=$HOST \
        --conf spark.sql.shuffle.partitions=4 --conf spark.connect.session.manager.defaultSessionTimeout=25h \
        "${KAFKA_ARGS[@]}" spark-internal >"$LOG" 2>&1 </dev/null &
    echo $! >"$PID_FILE"
    local i
    for ((i = 0; i < WAIT_SECONDS * 4; i++)); do
        listening && {
            say "listening on $HOST:$PORT (pid $(cat "$PID_FILE"), log $LOG)"
            return 0
        }
        server_pid >/dev/null || die "the server exited while starting; see $LOG"
        sleep 0.25
    done
    die "no answer on $HOST:$PORT after ${WAIT_SECONDS}s; see $LOG"
}

stop() {
    local pid i
    if ! pid="$(server_pid)"; then
        say "not running (nothing this script started on port $PORT)"
        rm -f "$PID_FILE"
        return 0
    fi
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 120; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$PID_FILE"
    say "stopped (pid $pid)"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status)
    if listening; then
        say "listening on $HOST:$PORT"
    else
        say "nothing listens on $HOST:$PORT (start it: bash scripts/spark-connect.sh start)"
        exit 1
    fi
    ;;
url) printf 'sc://%s:%s\n' "$HOST" "$PORT" ;;
*) die "usage: bash scripts/spark-connect.sh start|stop|status|url" ;;
esac

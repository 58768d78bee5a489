#!/usr/bin/env bash
# Apache Kafka for txdag: one KRaft node (broker and controller in one process), on loopback only, on ports that
# stay clear of the defaults. scripts/services.sh runs it with Redis and ZooKeeper (start, stop, status, wipe, env).
#
#   bash scripts/kafka.sh fetch          the broker's jars and Spark's Kafka source's jars, through Maven, at the
#                                        versions of scripts/kafka/*.pom.xml (scripts/setup.sh runs it; a rerun
#                                        that has them does nothing)
#   bash scripts/kafka.sh start          start the broker (or reuse the one that already answers on the port); the
#                                        data folder is formatted once, before the first start
#   bash scripts/kafka.sh stop           stop the broker this script started (never another one); the data stays
#   bash scripts/kafka.sh status         one line; exit 0 only when the broker answers
#   bash scripts/kafka.sh wipe [--check] delete the stopped broker's data (every topic and record); --check deletes
#                                        nothing, and exits 1 when a wipe would be refused
#   bash scripts/kafka.sh env            print the export lines for its addresses (TXDAG_KAFKA_BOOTSTRAP, and
#                                        TXDAG_KAFKA_SASL_BOOTSTRAP for the SASL listener)
#   bash scripts/kafka.sh spark-jars     print Spark's Kafka source's jars, comma-separated (spark.jars, --jars);
#                                        nothing when the set-up has not fetched them
#
# Environment: TXDAG_KAFKA_PORT (default 9391), TXDAG_KAFKA_CONTROLLER_PORT (KRaft's controller listener, default
# the port + 1), TXDAG_KAFKA_SASL_PORT (a second client listener, SASL_PLAINTEXT with the PLAIN mechanism and the
# user TXDAG_KAFKA_USER/PASSWORD of .run/credentials.env, for connections that log in; default the port + 2),
# TXDAG_KAFKA_JVMFLAGS (default -Xmx512m).
# Jars: .run/jars/kafka/ (Apache Kafka 4.4.0's server, scripts/kafka/broker.pom.xml) and .run/jars/spark-kafka/
# (spark-sql-kafka-0-10 at PySpark's version and what it needs beyond PySpark's own jars, for Spark's spark.jars;
# scripts/kafka/spark-kafka.pom.xml). Each folder holds a copy of the pom it was fetched with; a changed pom is
# fetched again. Maven's own settings apply (its local repository, ~/.m2/repository by default).
# State lives in .run/kafka-<port>/ at the repository root: server.properties (written at each start), cluster.id,
# kafka.log, kafka.pid, and the data in data/ (the topics' logs and KRaft's metadata log), which a stop and a start
# (or a crash) keep; only `wipe` deletes it. Durability: the broker fsyncs a partition's log before it acknowledges
# a write (log.flush.interval.messages=1), as Redis and ZooKeeper do here. Topics are created explicitly (no
# auto-creation: a misspelt topic is an error, not a new empty topic). Loopback only; the first listener takes no
# authentication, the SASL one takes the user of .run/credentials.env (server.properties holds its password: mode
# 600). No authorizer: a user who logs in may do everything.
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then # the comment above, before anything runs or is created
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
    exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SPARK_JARS="$ROOT/.run/jars/spark-kafka"
if [[ "${1:-}" == spark-jars ]]; then # no broker, no port: what spark-connect.sh and cluster.sh hand Spark
    shopt -s nullglob
    jars=("$SPARK_JARS"/*.jar)
    ((${#jars[@]} == 0)) || (IFS=,; printf '%s\n' "${jars[*]}")
    exit 0
fi
HOST=127.0.0.1
PORT="${TXDAG_KAFKA_PORT:-9391}"
DIR="$ROOT/.run/kafka-$PORT"
PID_FILE="$DIR/kafka.pid"
LOG="$DIR/kafka.log"
JARS="$ROOT/.run/jars/kafka"
POMS="$ROOT/scripts/kafka"
WAIT_SECONDS=120 # a busy 2-core machine: the first start, format included, took 71 s at a load of 16
MAIN_CLASS=kafka.Kafka

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$ROOT/scripts/lib/common.sh"

check_port "$PORT"
CONTROLLER_PORT="${TXDAG_KAFKA_CONTROLLER_PORT:-$((PORT + 1))}"
check_port "$CONTROLLER_PORT"
SASL_PORT="${TXDAG_KAFKA_SASL_PORT:-$((PORT + 2))}"
check_port "$SASL_PORT"
[[ "$(printf '%s\n' "$PORT" "$CONTROLLER_PORT" "$SASL_PORT" | sort -u | wc -l)" == 3 ]] ||
    die "TXDAG_KAFKA_PORT, TXDAG_KAFKA_CONTROLLER_PORT and TXDAG_KAFKA_SASL_PORT must differ" \
        "($PORT, $CONTROLLER_PORT, $SASL_PORT)"

# --- jars ---------------------------------------------------------------------------------------------------

# Copies the jars of pom $1 and of its dependencies into $2 through Maven, unless $2 has them already (its copy of
# the pom is the same). A failed fetch leaves $2 as it was.
fetch_jars() {
    local pom="$1" dest="$2" log="$2.fetch.log"
    if [[ -f "$dest/pom.xml" ]] && cmp -s "$pom" "$dest/pom.xml"; then
        say "jars of ${pom#"$ROOT/"} present in ${dest#"$ROOT/"}"
        return 0
    fi
    command -v mvn >/dev/null 2>&1 || die "mvn not found: install maven (bash scripts/setup.sh does)"
    say "fetching the jars of ${pom#"$ROOT/"} into ${dest#"$ROOT/"} (Maven; log: ${log#"$ROOT/"})"
    rm -rf "$dest.new"
    mkdir -p "$dest.new"
    if ! mvn -B -q -f "$pom" dependency:copy-dependencies -DoutputDirectory="$dest.new" >"$log" 2>&1; then
        tail -n 30 "$log" >&2 || true
        rm -rf "$dest.new"
        die "Maven could not fetch the jars of $pom (above: why); log: $log"
    fi
    cp "$pom" "$dest.new/pom.xml"
    rm -rf "$dest"
    mv "$dest.new" "$dest"
    say "$(find "$dest" -name '*.jar' | wc -l) jars in ${dest#"$ROOT/"}"
}

fetch() {
    fetch_jars "$POMS/broker.pom.xml" "$JARS"
    fetch_jars "$POMS/spark-kafka.pom.xml" "$SPARK_JARS"
}

# Kafka 4 runs on Java 17 or newer.
check_java() {
    local version
    command -v java >/dev/null 2>&1 ||
        die "java not found on PATH: Kafka needs Java 17 or newer (install openjdk-17-jre-headless)"
    version="$(java -version 2>&1 | sed -n '1s/.*version "\([0-9]*\).*/\1/p')"
    if ! [[ "$version" =~ ^[0-9]+$ ]] || ((version < 17)); then
        die "Kafka needs Java 17 or newer; java on PATH is version '${version:-?}': install openjdk-17-jre-headless"
    fi
}

# --- probes -------------------------------------------------------------------------------------------------

# The broker answers an ApiVersions request (v0, correlation id 2001) on the port with no error: it accepts
# requests (it does once it has caught up with its metadata log). The reply's first 10 bytes: its size, the
# correlation id, the error code.
kafka_up() {
    local reply
    # shellcheck disable=SC2016  # $0 and $1 are expanded by the inner bash
    reply="$(timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" &&
        printf "\000\000\000\016\000\022\000\000\000\000\007\321\000\004txdg" >&3 && head -c 10 <&3 | od -An -tx1' \
        "$HOST" "$PORT" 2>/dev/null)" || true
    [[ "$(tr -d ' \n' <<<"$reply")" =~ ^[0-9a-f]{8}000007d10000$ ]]
}

kafka_pid() { live_pid "$PID_FILE" "$MAIN_CLASS $DIR/server.properties"; }

# --- start, stop --------------------------------------------------------------------------------------------

# The config is written afresh at each start; the data folder is never emptied but by 'wipe'.
write_kafka_config() {
    local user password
    user="$(credential TXDAG_KAFKA_USER)"
    password="$(credential TXDAG_KAFKA_PASSWORD)"
    [[ "$user" =~ ^[A-Za-z0-9_.-]+$ && "$password" =~ ^[A-Za-z0-9_.-]+$ ]] ||
        die "TXDAG_KAFKA_USER/PASSWORD of .run/credentials.env must be letters, digits, '.', '_' or '-'"
    mkdir -p "$DIR/data"
    : >"$DIR/server.properties"
    chmod 600 "$DIR/server.properties" # it holds the SASL user's password
    cat >"$DIR/server.properties" <<EOF
# Written by scripts/kafka.sh: a single KRaft node for txdag (broker and controller), loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CONTROLLER_PORT,SASL_PLAINTEXT://$HOST:$SASL_PORT
advertised.listeners=PLAINTEXT://$HOST:$PORT,SASL_PLAINTEXT://$HOST:$SASL_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$user="$password";
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$DIR/data
log.flush.interval.messages=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
}

# A KRaft node's log directory is formatted once, with the cluster's id, before its first start (kafka-storage
# format). The id is kept in cluster.id: a random UUID in Kafka's form (base64url, 16 bytes), not starting with '-'.
format_once() {
    local id
    [[ ! -f "$DIR/data/meta.properties" ]] || return 0
    if [[ ! -s "$DIR/cluster.id" ]]; then
        while id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')" && [[ "$id" == -* ]]; do :; done
        printf '%s\n' "$id" >"$DIR/cluster.id"
    fi
    id="$(tr -d ' \n' <"$DIR/cluster.id")"
    java -Xmx256m -cp "$JARS/*" -Dlog4j2.configurationFile="$POMS/log4j2.properties" kafka.tools.StorageTool \
        format -t "$id" -c "$DIR/server.properties" >>"$LOG" 2>&1 ||
        die "could not format $DIR/data for cluster $id; log: $LOG"
    say "formatted $DIR/data (cluster id $id)"
}

start() {
    local pid port
    if kafka_up; then
        if pid="$(kafka_pid)"; then
            say "Kafka     $HOST:$PORT already running (pid $pid)"
        else
            say "Kafka     $HOST:$PORT already answering: reusing it"
        fi
        return 0
    fi
    if pid="$(kafka_pid)"; then
        # Started by us a moment ago and still coming up.
        say "Kafka     $HOST:$PORT starting (pid $pid): waiting"
    else
        for port in "$PORT" "$CONTROLLER_PORT" "$SASL_PORT"; do
            ! port_open "$port" ||
                die "port $port answers, but not as a Kafka broker; free it or set TXDAG_KAFKA_PORT," \
                    "TXDAG_KAFKA_CONTROLLER_PORT and TXDAG_KAFKA_SASL_PORT"
        done
        check_java
        compgen -G "$JARS/kafka_2.13-*.jar" >/dev/null ||
            die "Kafka's jars are not in $JARS: run bash scripts/kafka.sh fetch (bash scripts/setup.sh runs it)"
        mkdir -p "$DIR"
        : >"$LOG"
        write_kafka_config
        format_once
        # In its own session, so that a signal to the caller's process group does not reach it. No JMX port
        # (com.sun.management.jmxremote is not set).
        # shellcheck disable=SC2086  # TXDAG_KAFKA_JVMFLAGS is a list of flags
        setsid java ${TXDAG_KAFKA_JVMFLAGS:--Xmx512m} -Djava.awt.headless=true -XX:+ExitOnOutOfMemoryError \
            -Dlog4j2.configurationFile="$POMS/log4j2.properties" -cp "$JARS/*" \
            "$MAIN_CLASS" "$DIR/server.properties" >>"$LOG" 2>&1 </dev/null &
        pid=$!
        printf '%s\n' "$pid" >"$PID_FILE"
    fi
    if ! wait_for kafka_up "$WAIT_SECONDS" "$pid"; then
        tail -n 30 "$LOG" >&2 || true
        rm -f "$PID_FILE"
        if ! kill -0 "$pid" 2>/dev/null; then
            die "Kafka exited while starting on $HOST:$PORT; log: $LOG"
        fi
        terminate "$pid"
        die "Kafka did not answer on $HOST:$PORT within ${WAIT_SECONDS}s (stopped it); log: $LOG"
    fi
    say "Kafka     $HOST:$PORT started (pid $pid, data $DIR/data, log $LOG)"
}

stop() {
    local pid
    if pid="$(kafka_pid)"; then
        terminate "$pid"
        rm -f "$PID_FILE"
        say "Kafka     $HOST:$PORT stopped (pid $pid)"
    elif kafka_up; then
        say "Kafka     $HOST:$PORT left running: not started by this script"
    else
        rm -f "$PID_FILE"
        say "Kafka     $HOST:$PORT not running"
    fi
}

status() {
    local pid
    if kafka_up; then
        if pid="$(kafka_pid)"; then
            say "Kafka     $HOST:$PORT up (started here, pid $pid)"
        else
            say "Kafka     $HOST:$PORT up (not started by this script)"
        fi
    else
        say "Kafka     $HOST:$PORT down"
        return 1
    fi
}

# Deletes the broker's data (data/: every topic, record and group offset) and its cluster id: the next start
# formats a new cluster. Refused while the broker of this script runs.
wipe() {
    local pid
    if pid="$(kafka_pid)"; then
        die "Kafka on $HOST:$PORT is running (pid $pid): stop it first (bash scripts/services.sh stop), nothing" \
            "was deleted"
    fi
    [[ "${1:-}" != --check ]] || return 0
    rm -rf "$DIR/data" "$DIR/cluster.id"
    say "Kafka     $HOST:$PORT data deleted ($DIR/data)"
}

usage() {
    sed -n '2,/^# Environment/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

case "${1:-}" in
fetch) fetch ;;
start) start ;;
stop) stop ;;
status) status ;;
wipe)
    [[ -z "${2:-}" || "${2:-}" == --check ]] || usage
    wipe "${2:-}"
    ;;
env) printf 'export TXDAG_KAFKA_BOOTSTRAP=%s:%s\nexport TXDAG_KAFKA_SASL_BOOTSTRAP=%s:%s\n' "$HOST" "$PORT" "$HOST" \
    "$SASL_PORT" ;;
*) usage ;;
esac

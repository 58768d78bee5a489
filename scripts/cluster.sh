#!/usr/bin/env bash
# The distributed deployment on one machine, loopback only (issue 17): a three-node ZooKeeper ensemble, a Redis
# Cluster of three masters with a replica each, a Spark standalone master with two one-core workers, a Kafka broker,
# and Airflow with the CeleryExecutor and two Celery workers. Beside the single-node set-up (scripts/services.sh,
# scripts/spark-connect.sh, scripts/airflow.sh), on ports of its own.
#
#   bash scripts/cluster.sh start [zk|redis|spark|kafka|airflow]...
#                                       start them (default: all); a node that is down is started again, one that
#                                       answers is kept; waits until each serves
#   bash scripts/cluster.sh stop [zk|redis|spark|kafka|airflow]...
#                                       stop what this script started (never anything else); data stays
#   bash scripts/cluster.sh status      one line per node (role and resident memory where it has them); exit 0 only
#                                       when every node answers
#   bash scripts/cluster.sh env         the export lines of the addresses (hosts strings, master URL, the single
#                                       Redis, the Kafka bootstrap, Airflow's URL and home)
#   bash scripts/cluster.sh wipe        delete the stopped cluster's data (znodes, keys, Spark's work, Kafka's topics,
#                                       Airflow's database and logs)
#
# Environment: TXDAG_CLUSTER_ZK_PORT (first of 3 client ports, default 2291; quorum 2891+, election 3891+),
# TXDAG_CLUSTER_REDIS_PORT (first of 6, default 7301; cluster bus = port + 10000; the single Redis of the sources
# and the Celery broker = port + 90), TXDAG_CLUSTER_SPARK_PORT (the master, default 7377; workers 7378+, web UIs
# 8377+), TXDAG_CLUSTER_WORKER_MEMORY (default 1g), TXDAG_CLUSTER_KAFKA_PORT (the broker, default 9491; its
# controller +1, its SASL listener +2), TXDAG_CLUSTER_AIRFLOW_PORT (API server and UI, default 8891),
# TXDAG_CLUSTER_PG_PORT (PostgreSQL: Airflow's metadata and Celery's results, default 5591),
# TXDAG_CLUSTER_DAGS_FOLDER (default dags_cluster/: the demo's topologies on the cluster's connections).
# Airflow (scripts/airflow.sh with AIRFLOW_HOME .run/cluster/airflow-<port>): the CeleryExecutor, its broker the
# single Redis (keys and channels under "celery:", an ACL user "celery" limited to them), its results in their own
# PostgreSQL database; two workers (`airflow celery worker`, 2 task slots each, no log server), each in its own
# session. The connections: redis_default (the single Redis: the sources), redis_cluster (the Redis Cluster: the
# states), zookeeper_default (the ensemble), spark_cluster (spark-submit to the standalone master); both Redis as
# the topologies' user, limited to their keys (`txdag acl redis`); kafka_default (the broker). The Spark executors
# run a Python without txdag (.run/cluster/executor-python): the job ships it (`txdag pyfiles`,
# TXDAG_CLUSTER_SPARK_CONF), with Spark's Kafka source in spark.jars (as scripts/spark-connect.sh's server has it).
# Kafka: scripts/kafka.sh on this cluster's ports (data in .run/kafka-<port>/, as the single Redis's is in
# .run/redis-<port>/).
# State lives in .run/cluster/ at the repository root: one folder per node, named by its port (config, log, pid
# file, data).
# Redis: the same durability and access control as scripts/services.sh (append-only file fsynced before a reply,
# default user off, the admin user of .run/credentials.env); replicas log in to their master as that user.
# A master that dies is replaced by its replica after cluster-node-timeout (2 s); started again, it comes back as
# a replica. ZooKeeper: a quorum of 2 of 3 serves; a leader that dies is replaced by an election.
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then # the comment above, before anything runs or is created
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
    exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HOST=127.0.0.1
ZK_BASE="${TXDAG_CLUSTER_ZK_PORT:-2291}"
REDIS_BASE="${TXDAG_CLUSTER_REDIS_PORT:-7301}"
SPARK_PORT="${TXDAG_CLUSTER_SPARK_PORT:-7377}"
KAFKA_PORT="${TXDAG_CLUSTER_KAFKA_PORT:-9491}"
WORKER_MEMORY="${TXDAG_CLUSTER_WORKER_MEMORY:-1g}"
AIRFLOW_PORT="${TXDAG_CLUSTER_AIRFLOW_PORT:-8891}"
PG_PORT="${TXDAG_CLUSTER_PG_PORT:-5591}"
SINGLE_REDIS_PORT=$((REDIS_BASE + 90))
DAGS_FOLDER="${TXDAG_CLUSTER_DAGS_FOLDER:-$ROOT/dags_cluster}"
DIR="$ROOT/.run/cluster"
ZK_NODES=(1 2 3)
REDIS_PORTS=("$REDIS_BASE" $((REDIS_BASE + 1)) $((REDIS_BASE + 2)) $((REDIS_BASE + 3)) $((REDIS_BASE + 4)) $((REDIS_BASE + 5)))
SPARK_WORKERS=(1 2)
CELERY_WORKERS=(1 2)
WAIT_SECONDS=60
# shellcheck source=/dev/null  # generated: TXDAG_REDIS_ADMIN_USER/PASSWORD, ...
source "$(bash "$ROOT/scripts/credentials.sh")"

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$ROOT/scripts/lib/common.sh"
RCLI_TIMEOUT="${RCLI_TIMEOUT:-5}" # rcli's: six nodes and the rest on one machine answer slower than one Redis

for port in "$ZK_BASE" "$REDIS_BASE" "$SPARK_PORT" "$KAFKA_PORT" "$AIRFLOW_PORT" "$PG_PORT"; do
    if ! [[ "$port" =~ ^[0-9]+$ ]] || ((port < 1 || port + 1000 > 65535)); then
        die "not a usable port number: '$port'"
    fi
done
((REDIS_BASE + 10005 <= 65535)) || die "TXDAG_CLUSTER_REDIS_PORT $REDIS_BASE: its cluster bus ports (+10000) pass 65535"

# --- common -------------------------------------------------------------------------------------------------

# Each node runs in a session of its own: terminate "$pid" group stops it with what it started.

# Refuses to start node $2 on port $1 when something else answers there (after 10 s: a node that was just killed
# may hold its port a moment longer).
port_free_or_die() {
    wait_for "! port_open $1" 10 || die "port $1 ($2) answers, but not as this cluster's node: free it or set the" \
        "TXDAG_CLUSTER_*_PORT variables (bash scripts/cluster.sh --help)"
}

# --- ZooKeeper ensemble -------------------------------------------------------------------------------------

zk_port() { echo $((ZK_BASE + $1 - 1)); }
zk_dir() { echo "$DIR/zk-$(zk_port "$1")"; }
zk_hosts() {
    local n hosts=()
    for n in "${ZK_NODES[@]}"; do hosts+=("$HOST:$(zk_port "$n")"); done
    (IFS=,; echo "${hosts[*]}")
}

# Node $1 serves: it is in a quorum (a node without one answers 'imok' to ruok but refuses srvr's Mode).
zk_serving() { zk_word "$HOST" "$(zk_port "$1")" srvr | grep -qE '^Mode: (leader|follower)'; }
zk_mode() { zk_word "$HOST" "$(zk_port "$1")" srvr | sed -n 's/^Mode: //p'; }

# The ensemble's lines of a node's zoo.cfg: server.N=host:quorum port:election port.
zk_servers() {
    local m
    for m in "${ZK_NODES[@]}"; do
        printf 'server.%s=%s:%s:%s\n' "$m" "$HOST" $((ZK_BASE + 600 + m - 1)) $((ZK_BASE + 1600 + m - 1))
    done
}

start_zk() {
    local n d pid servers started=()
    mapfile -t servers < <(zk_servers)
    [[ -x "$ZK_SERVER" ]] || die "$ZK_SERVER not found; run: bash scripts/setup.sh"
    for n in "${ZK_NODES[@]}"; do
        d="$(zk_dir "$n")"
        if pid="$(zk_pid "$d")"; then
            continue
        fi
        port_free_or_die "$(zk_port "$n")" "ZooKeeper node $n"
        write_zk_config "$d" "$HOST" "$(zk_port "$n")" "$n" "${servers[@]}"
        launch_zk "$d" 256m # three nodes on the machine: half the heap of services.sh's one
        started+=("$n")
    done
    for n in "${ZK_NODES[@]}"; do
        wait_for "zk_serving $n" "$WAIT_SECONDS" || {
            tail -n 20 "$(zk_dir "$n")/zookeeper.log" >&2 || true
            die "ZooKeeper node $n ($HOST:$(zk_port "$n")) is not in a quorum after ${WAIT_SECONDS}s; log:" \
                "$(zk_dir "$n")/zookeeper.log"
        }
    done
    say "ZooKeeper ensemble $(zk_hosts) serving (started nodes: ${started[*]:-none}; leader: node $(zk_leader))"
}

zk_leader() {
    local n
    for n in "${ZK_NODES[@]}"; do
        [[ "$(zk_mode "$n")" == leader ]] && { echo "$n"; return 0; }
    done
    echo "?"
}

stop_zk() {
    local n pid
    for n in "${ZK_NODES[@]}"; do
        if pid="$(zk_pid "$(zk_dir "$n")")"; then
            terminate "$pid" group
            say "ZooKeeper node $n stopped (pid $pid)"
        fi
        rm -f "$(zk_dir "$n")/zookeeper.pid"
    done
}

# --- Redis Cluster ------------------------------------------------------------------------------------------

redis_dir() { echo "$DIR/redis-$1"; }
cluster_state() { rcli "$HOST" "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_state://p'; }
cluster_known() { rcli "$HOST" "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_known_nodes://p'; }
redis_nodes() {
    local p nodes=()
    for p in "${REDIS_PORTS[@]}"; do nodes+=("$HOST:$p"); done
    (IFS=,; echo "${nodes[*]}")
}

start_redis() {
    local p d started=()
    command -v redis-server >/dev/null 2>&1 || die "redis-server not found; run: bash scripts/setup.sh"
    for p in "${REDIS_PORTS[@]}"; do
        if redis_pid "$(redis_dir "$p")" >/dev/null; then
            continue
        fi
        port_free_or_die "$p" "Redis Cluster node"
        port_free_or_die $((p + 10000)) "Redis Cluster bus of $p"
        # The durability and ACL of scripts/services.sh, cluster mode, and the credentials a replica uses to log
        # in to its master (in the config, mode 600: no secret on a command line).
        d="$(redis_dir "$p")"
        write_redis_config "$d" "$HOST" "$p" yes "cluster-enabled yes" "cluster-config-file $d/data/nodes.conf" \
            "cluster-node-timeout 2000" "repl-diskless-sync-delay 0" "masteruser $TXDAG_REDIS_ADMIN_USER" \
            "masterauth $TXDAG_REDIS_ADMIN_PASSWORD"
        redis-server "$d/redis.conf" >/dev/null ||
            die "redis-server did not start on $p; see $(redis_dir "$p")/redis.log"
        started+=("$p")
    done
    for p in "${REDIS_PORTS[@]}"; do
        wait_for "redis_up $HOST $p" "$WAIT_SECONDS" || die "Redis node $HOST:$p did not answer PING; log:" \
            "$(redis_dir "$p")/redis.log"
    done
    # A first start: the nodes know only themselves; create the cluster (three masters, a replica each).
    if [[ "$(cluster_known "${REDIS_PORTS[0]}")" == 1 ]]; then
        local args=()
        for p in "${REDIS_PORTS[@]}"; do args+=("$HOST:$p"); done
        REDISCLI_AUTH="$TXDAG_REDIS_ADMIN_PASSWORD" redis-cli --user "$TXDAG_REDIS_ADMIN_USER" --cluster create \
            "${args[@]}" --cluster-replicas 1 --cluster-yes >"$DIR/redis-$REDIS_BASE-create.log" 2>&1 ||
            die "redis-cli --cluster create failed; see $DIR/redis-$REDIS_BASE-create.log"
    fi
    for p in "${REDIS_PORTS[@]}"; do
        wait_for "[[ \"\$(cluster_state $p)\" == ok ]]" "$WAIT_SECONDS" ||
            die "Redis node $HOST:$p: cluster_state is not ok after ${WAIT_SECONDS}s; log: $(redis_dir "$p")/redis.log"
    done
    # A replica that has not finished its first sync cannot take over: done only once every replica is in sync.
    for p in "${REDIS_PORTS[@]}"; do
        wait_for "replica_synced $p" "$WAIT_SECONDS" ||
            die "Redis node $HOST:$p: a replica not in sync with its master after ${WAIT_SECONDS}s; log:" \
                "$(redis_dir "$p")/redis.log"
    done
    say "Redis Cluster $(redis_nodes) ok (started nodes: ${started[*]:-none}; masters: $(redis_masters))"
}

replica_synced() { # a master, or a replica whose link to its master is up
    local info
    info="$(rcli "$HOST" "$1" info replication 2>/dev/null | tr -d '\r')"
    grep -qx 'role:master' <<<"$info" || grep -qx 'master_link_status:up' <<<"$info"
}

redis_masters() { # the masters that hold slots (a node just added is a master without any until it replicates)
    rcli "$HOST" "${REDIS_PORTS[0]}" cluster nodes 2>/dev/null |
        awk '$3 ~ /master/ && $3 !~ /fail/ && NF >= 9 {split($2, a, "@"); print a[1]}' |
        sort | tr '\n' ' ' | sed 's/ $//'
}

stop_redis() {
    local p pid
    for p in "${REDIS_PORTS[@]}"; do
        if pid="$(redis_pid "$(redis_dir "$p")")"; then
            # SHUTDOWN: the append-only file is written out; the node's cluster config stays in nodes.conf.
            RCLI_TIMEOUT=30 rcli "$HOST" "$p" shutdown >/dev/null 2>&1 || terminate "$pid" group
            wait_for "! kill -0 $pid 2>/dev/null" 15 || terminate "$pid" group
            say "Redis node $HOST:$p stopped (pid $pid)"
        fi
        rm -f "$(redis_dir "$p")/redis.pid"
    done
}

# --- Spark standalone ---------------------------------------------------------------------------------------

spark_home() {
    local py="$ROOT/.venv/bin/python"
    [[ -x "$py" ]] || die "$py not found: run 'bash scripts/setup.sh' (it installs PySpark into .venv)"
    "$py" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))'
}
spark_dir() { echo "$DIR/spark-$SPARK_PORT-$1"; }
master_url() { echo "spark://$HOST:$SPARK_PORT"; }
spark_pid() { live_pid "$(spark_dir "$1")/spark.pid" "org.apache.spark.deploy"; }

# The workers the master counts as ALIVE (its web UI's JSON).
alive_workers() {
    curl -s --max-time 3 "http://$HOST:$((SPARK_PORT + 1000))/json/" 2>/dev/null |
        python3 -c 'import json, sys; print(sum(w["state"] == "ALIVE" for w in json.load(sys.stdin)["workers"]))' \
            2>/dev/null || echo 0
}

# Starts node $1 (master, worker-1, ...) with class $2 and arguments $3...; each in its own session.
start_spark_node() {
    local name="$1" class="$2" d home
    shift 2
    d="$(spark_dir "$name")"
    if spark_pid "$name" >/dev/null; then
        return 1
    fi
    mkdir -p "$d"
    home="$(spark_home)"
    SPARK_HOME="$home" SPARK_LOCAL_IP=$HOST SPARK_NO_DAEMONIZE=1 SPARK_LOG_DIR="$d" SPARK_WORKER_DIR="$d/work" \
        setsid "$home/bin/spark-class" "$class" "$@" >"$d/spark.log" 2>&1 </dev/null &
    printf '%s\n' "$!" >"$d/spark.pid"
}

start_spark() {
    local w started=()
    command -v java >/dev/null || die "java not found: install a JDK 17 (Debian: apt-get install openjdk-17-jre-headless)"
    if ! spark_pid master >/dev/null; then
        port_free_or_die "$SPARK_PORT" "Spark master"
        start_spark_node master org.apache.spark.deploy.master.Master --host "$HOST" --port "$SPARK_PORT" \
            --webui-port $((SPARK_PORT + 1000)) && started+=(master)
        wait_for "port_open $SPARK_PORT" "$WAIT_SECONDS" || die "the Spark master did not listen on" \
            "$HOST:$SPARK_PORT; log: $(spark_dir master)/spark.log"
    fi
    for w in "${SPARK_WORKERS[@]}"; do
        if ! spark_pid "worker-$w" >/dev/null; then
            port_free_or_die $((SPARK_PORT + w)) "Spark worker $w"
            start_spark_node "worker-$w" org.apache.spark.deploy.worker.Worker --host "$HOST" \
                --port $((SPARK_PORT + w)) --webui-port $((SPARK_PORT + 1000 + w)) --cores 1 \
                --memory "$WORKER_MEMORY" --work-dir "$(spark_dir "worker-$w")/work" "$(master_url)" &&
                started+=("worker-$w")
        fi
    done
    wait_for "(( \$(alive_workers) >= ${#SPARK_WORKERS[@]} ))" "$WAIT_SECONDS" ||
        die "the Spark master counts $(alive_workers) live workers of ${#SPARK_WORKERS[@]} after ${WAIT_SECONDS}s;" \
            "logs: $(spark_dir worker-1)/spark.log, $(spark_dir master)/spark.log"
    say "Spark standalone $(master_url) with $(alive_workers) workers of 1 core (started: ${started[*]:-none};" \
        "UI http://$HOST:$((SPARK_PORT + 1000)))"
}

stop_spark() {
    local name pid
    for name in "${SPARK_WORKERS[@]/#/worker-}" master; do
        if pid="$(spark_pid "$name")"; then
            terminate "$pid" group
            say "Spark $name stopped (pid $pid)"
        fi
        rm -f "$(spark_dir "$name")/spark.pid"
    done
}

# --- Kafka ----------------------------------------------------------------------------------------------------

# scripts/kafka.sh on this cluster's ports (the SASL listener too: TXDAG_KAFKA_* of the caller would move them).
kafka() {
    TXDAG_KAFKA_PORT="$KAFKA_PORT" TXDAG_KAFKA_CONTROLLER_PORT=$((KAFKA_PORT + 1)) \
        TXDAG_KAFKA_SASL_PORT=$((KAFKA_PORT + 2)) bash "$ROOT/scripts/kafka.sh" "$@" | sed 's/^kafka: /cluster: /'
}
start_kafka() {
    local p
    if ! kafka status >/dev/null; then # else kafka.sh would name its own variables, which this script sets
        for p in "$KAFKA_PORT" $((KAFKA_PORT + 1)) $((KAFKA_PORT + 2)); do port_free_or_die "$p" "Kafka"; done
    fi
    kafka start
}
stop_kafka() { kafka stop; }

# --- Airflow with the CeleryExecutor ------------------------------------------------------------------------

AIRFLOW_HOME_DIR="$DIR/airflow-$AIRFLOW_PORT"
CELERY_DIR="$AIRFLOW_HOME_DIR/celery"
EXECUTOR_PYTHON="$DIR/executor-python/bin/python"
PYFILES_ZIP="$DIR/txdag-pyfiles.zip"
CELERY_PREFIX="celery:"
# The broker user: kombu's keys and channels, all under CELERY_PREFIX (global_keyprefix), and the commands kombu's
# Redis transport and Celery's tasks, remote control and events send. PSUBSCRIBE needs its two patterns literally.
CELERY_ACL="resetkeys resetchannels ~${CELERY_PREFIX}* &${CELERY_PREFIX}* &${CELERY_PREFIX}/0.celery.pidbox
&${CELERY_PREFIX}/0.celeryev/worker.* -@all +hello +ping +time +select +multi +exec +discard +watch +unwatch +lpush
+rpush +brpop +rpop +llen +del +exists +pexpire +sadd +srem +smembers +hset +hget +hdel +zadd +zrem +zrange
+zrangebyscore +set +get +evalsha +script|load +script|exists +publish +subscribe +psubscribe +unsubscribe
+punsubscribe"

# scripts/services.sh, scripts/postgres.sh and scripts/airflow.sh on this cluster's ports, without the admin
# credentials this script sourced (airflow.sh would record them for every component).
single_redis() { TXDAG_REDIS_PORT="$SINGLE_REDIS_PORT" bash "$ROOT/scripts/services.sh" "$@"; }
postgres() { TXDAG_PG_PORT="$PG_PORT" bash "$ROOT/scripts/postgres.sh" "$@"; }
airflow_sh() {
    env -u TXDAG_REDIS_ADMIN_USER -u TXDAG_REDIS_ADMIN_PASSWORD -u TXDAG_REDIS_USER -u TXDAG_REDIS_PASSWORD \
        -u TXDAG_ZK_USER -u TXDAG_ZK_PASSWORD AIRFLOW_HOME="$AIRFLOW_HOME_DIR" TXDAG_AIRFLOW_PORT="$AIRFLOW_PORT" \
        TXDAG_PG_PORT="$PG_PORT" TXDAG_REDIS_PORT="$SINGLE_REDIS_PORT" TXDAG_DAGS_FOLDER="$DAGS_FOLDER" \
        bash "$ROOT/scripts/airflow.sh" "$@"
}
secret() {
    mkdir -p "$CELERY_DIR"
    [[ -s "$CELERY_DIR/$1" ]] || (umask 077 && head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$CELERY_DIR/$1")
    cat "$CELERY_DIR/$1"
}

# The broker's own user, set afresh at every start and saved in the single Redis's users.acl.
broker_user() {
    local -a rules
    read -r -a rules <<<"$(tr '\n' ' ' <<<"$CELERY_ACL")"
    [[ "$(rcli "$HOST" "$SINGLE_REDIS_PORT" acl setuser celery reset on ">$(secret broker.password)" "${rules[@]}")" == OK ]] ||
        die "ACL SETUSER celery on $HOST:$SINGLE_REDIS_PORT failed"
    rcli "$HOST" "$SINGLE_REDIS_PORT" acl save >/dev/null
}

# The topologies' user on every node of the Redis Cluster (a node's users are its own; a replica that takes over
# must know it too), limited to their keys as on the single Redis (scripts/airflow.sh does that one).
cluster_redis_user() {
    local p
    for p in "${REDIS_PORTS[@]}"; do
        TXDAG_ACL_PASSWORD="$TXDAG_REDIS_PASSWORD" "$ROOT/.venv/bin/txdag" acl redis --dags "$DAGS_FOLDER" \
            --user "$TXDAG_REDIS_USER" --password-env TXDAG_ACL_PASSWORD --apply "redis://$HOST:$p/0" >/dev/null ||
            die "could not create Redis user $TXDAG_REDIS_USER on the cluster node $HOST:$p (above: why)"
    done
}

# A Python for the Spark executors with pyarrow and nothing else of .venv (no txdag, no redis-py): a venv whose
# .pth adds a folder holding a link to .venv's pyarrow. Then the zip of txdag and redis-py the job ships to them.
executor_python() {
    local site arrow
    [[ -x "$EXECUTOR_PYTHON" ]] || "$ROOT/.venv/bin/python" -m venv --without-pip "$DIR/executor-python"
    site="$("$EXECUTOR_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    arrow="$("$ROOT/.venv/bin/python" -c 'import os, pyarrow; print(os.path.dirname(pyarrow.__file__))')"
    mkdir -p "$DIR/executor-python/arrow-only"
    ln -sfn "$arrow" "$DIR/executor-python/arrow-only/pyarrow"
    printf '%s\n' "$DIR/executor-python/arrow-only" >"$site/arrow-only.pth"
}

# What the cluster's topologies add to spark-submit: the zip, the executors' Python, Spark's Kafka source (the
# set-up's jars, when it fetched them), and a share of the cluster small enough that two txids are processed at
# once (one core and 512 MiB of a worker each).
spark_conf() {
    local jars
    jars="$(bash "$ROOT/scripts/kafka.sh" spark-jars)"
    [[ -n "$jars" ]] || say "no Spark Kafka source jars in .run/jars/spark-kafka: topologies over Kafka cannot read" \
        "(bash scripts/kafka.sh fetch, then bash scripts/cluster.sh stop airflow; bash scripts/cluster.sh start)" >&2
    "$ROOT/.venv/bin/txdag" pyfiles "$PYFILES_ZIP" --python "$EXECUTOR_PYTHON" --json |
        "$ROOT/.venv/bin/python" -c 'import json, sys
conf = json.load(sys.stdin)["spark_conf"]
jars = {"spark.jars": sys.argv[1]} if sys.argv[1] else {}
print(json.dumps({**conf, **jars, "spark.cores.max": "1", "spark.executor.memory": "512m"}))' "$jars"
}

worker_pid() { live_pid "$CELERY_DIR/worker$1.pid" 'celery worker'; }

start_celery_worker() {
    local n="$1" i
    ! worker_pid "$n" >/dev/null || return 1
    rm -f "$CELERY_DIR/worker$n.pid"
    # Its own session (a crash test kills the session: the worker, its pool, their task processes); the recorded
    # environment of the components; no log server (it would bind 0.0.0.0:8793): the logs are on this disk.
    # shellcheck disable=SC2016  # $$, $0 and $@ are expanded by the inner bash
    (eval "$(airflow_sh env)" && exec setsid bash -c 'printf "%s\n" "$$" >"$0" && exec "$@"' "$CELERY_DIR/worker$n.pid" \
        airflow celery worker --celery-hostname "w$n@%h" --queues default --concurrency 2 --skip-serve-logs) \
        >"$CELERY_DIR/worker$n.log" 2>&1 </dev/null &
    for ((i = 0; i < WAIT_SECONDS * 4; i++)); do
        grep -q ' ready\.' "$CELERY_DIR/worker$n.log" 2>/dev/null && return 0
        if ((i > 8)) && ! worker_pid "$n" >/dev/null; then
            tail -n 20 "$CELERY_DIR/worker$n.log" >&2
            die "Celery worker $n exited while starting; log: $CELERY_DIR/worker$n.log"
        fi
        sleep 0.25
    done
    die "Celery worker $n not ready after ${WAIT_SECONDS}s; log: $CELERY_DIR/worker$n.log"
}

start_airflow() {
    local n conf started=()
    if ! { redis_up "$HOST" "${REDIS_PORTS[0]}" && zk_serving 1 && spark_pid master >/dev/null; }; then
        die "Airflow on the cluster needs its ZooKeeper, Redis Cluster and Spark: bash scripts/cluster.sh start"
    fi
    single_redis start redis
    postgres start
    postgres ensure-db celery_results celery
    broker_user
    cluster_redis_user
    executor_python
    conf="$(spark_conf)" || die "txdag pyfiles failed (above: why)"
    local broker results spark zk cluster_conn kafka_conn
    broker="redis://celery:$(secret broker.password)@$HOST:$SINGLE_REDIS_PORT/0"
    results="db+$(postgres url celery_results celery)"
    spark="{\"conn_type\": \"spark\", \"host\": \"spark://$HOST\", \"port\": $SPARK_PORT, \"extra\": {\"deploy-mode\": \"client\"}}"
    zk="{\"conn_type\": \"zookeeper\", \"host\": \"$(zk_hosts)\", \"login\": \"$TXDAG_ZK_USER\", \"password\": \"$TXDAG_ZK_PASSWORD\"}"
    cluster_conn="{\"conn_type\": \"redis\", \"host\": \"$(redis_nodes)\", \"login\": \"$TXDAG_REDIS_USER\",
        \"password\": \"$TXDAG_REDIS_PASSWORD\", \"extra\": {\"cluster\": true}}"
    kafka_conn="{\"conn_type\": \"kafka\", \"extra\": {\"bootstrap.servers\": \"$HOST:$KAFKA_PORT\"}}"
    AIRFLOW__CORE__EXECUTOR=CeleryExecutor AIRFLOW__CELERY__BROKER_URL="$broker" \
        AIRFLOW__CELERY__RESULT_BACKEND="$results" AIRFLOW__CELERY__WORKER_CONCURRENCY=2 \
        AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__GLOBAL_KEYPREFIX="$CELERY_PREFIX" \
        AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT=86400 \
        AIRFLOW__CELERY__EXTRA_CELERY_CONFIG='{"result_extended": true}' \
        AIRFLOW_CONN_ZOOKEEPER_DEFAULT="$zk" AIRFLOW_CONN_REDIS_CLUSTER="$cluster_conn" \
        AIRFLOW_CONN_KAFKA_DEFAULT="$kafka_conn" AIRFLOW_CONN_SPARK_CLUSTER="$spark" \
        TXDAG_CLUSTER_SPARK_CONF="$conf" airflow_sh start >&2 ||
        die "Airflow did not start (above: why)"
    for n in "${CELERY_WORKERS[@]}"; do
        start_celery_worker "$n" && started+=("worker-$n")
    done
    say "Airflow http://$HOST:$AIRFLOW_PORT with the CeleryExecutor and ${#CELERY_WORKERS[@]} workers (started:" \
        "${started[*]:-none}; DAGs $DAGS_FOLDER)"
}

stop_airflow() {
    local n pid
    for n in "${CELERY_WORKERS[@]}"; do
        if pid="$(worker_pid "$n")"; then
            terminate "$pid" group # a warm shutdown waits for the running tasks; SIGKILL after 15 s
            say "Celery worker $n stopped (pid $pid)"
        fi
        rm -f "$CELERY_DIR/worker$n.pid"
    done
    [[ ! -d "$AIRFLOW_HOME_DIR" ]] || airflow_sh stop
    single_redis stop redis
    postgres stop
}

# --- commands -----------------------------------------------------------------------------------------------

# Resident memory of process $1 and all its descendants (a Spark worker's executors and their Python workers), MiB.
tree_mib() {
    ps -eo pid=,ppid=,rss= | awk -v root="$1" '{ parent[$1] = $2; rss[$1] = $3 }
        END { for (p in parent) { q = p; while (q != root && q in parent && q > 1) q = parent[q]
                                  if (q == root) sum += rss[p] }
              printf "%d MiB", sum / 1024 }'
}

status() {
    local rc=0 n p name pid
    for n in "${ZK_NODES[@]}"; do
        if zk_serving "$n"; then
            say "ZooKeeper node $n  $HOST:$(zk_port "$n")  $(zk_mode "$n"), $(tree_mib "$(zk_pid "$(zk_dir "$n")")")"
        else
            say "ZooKeeper node $n  $HOST:$(zk_port "$n")  down"
            rc=1
        fi
    done
    for p in "${REDIS_PORTS[@]}"; do
        if redis_up "$HOST" "$p"; then
            say "Redis node        $HOST:$p  $(rcli "$HOST" "$p" role 2>/dev/null | head -n 1), cluster $(cluster_state "$p")," \
                "$(tree_mib "$(redis_pid "$(redis_dir "$p")")")"
        else
            say "Redis node        $HOST:$p  down"
            rc=1
        fi
    done
    for name in master "${SPARK_WORKERS[@]/#/worker-}"; do
        if pid="$(spark_pid "$name")"; then
            say "Spark $name  pid $pid, $(tree_mib "$pid") (with its executors)"
        else
            say "Spark $name  down"
            rc=1
        fi
    done
    say "Spark master counts $(alive_workers) live worker(s)"
    kafka status || rc=1
    if [[ -d "$AIRFLOW_HOME_DIR" ]]; then
        for n in "${CELERY_WORKERS[@]}"; do
            if pid="$(worker_pid "$n")"; then
                say "Celery worker $n  pid $pid, $(tree_mib "$pid") (with its tasks)"
            else
                say "Celery worker $n  down"
                rc=1
            fi
        done
        airflow_sh status | sed 's/^/cluster: /' || rc=1
    fi
    return "$rc"
}

print_env() {
    printf 'export TXDAG_CLUSTER_ZK_HOSTS=%s\n' "$(zk_hosts)"
    printf 'export TXDAG_CLUSTER_REDIS_NODES=%s\n' "$(redis_nodes)"
    printf 'export TXDAG_CLUSTER_SPARK_MASTER=%s\n' "$(master_url)"
    printf 'export TXDAG_CLUSTER_SINGLE_REDIS=%s\n' "$HOST:$SINGLE_REDIS_PORT"
    printf 'export TXDAG_CLUSTER_KAFKA_BOOTSTRAP=%s\n' "$HOST:$KAFKA_PORT"
    printf 'export TXDAG_CLUSTER_AIRFLOW_URL=%s\n' "http://$HOST:$AIRFLOW_PORT"
    printf 'export TXDAG_CLUSTER_AIRFLOW_HOME=%s\n' "$AIRFLOW_HOME_DIR"
}

wipe() {
    local n p name
    for n in "${ZK_NODES[@]}"; do ! zk_pid "$(zk_dir "$n")" >/dev/null || die "ZooKeeper node $n runs: stop the cluster first"; done
    for p in "${REDIS_PORTS[@]}"; do ! redis_pid "$(redis_dir "$p")" >/dev/null || die "Redis node $p runs: stop the cluster first"; done
    for name in master "${SPARK_WORKERS[@]/#/worker-}"; do
        ! spark_pid "$name" >/dev/null || die "Spark $name runs: stop the cluster first"
    done
    for n in "${CELERY_WORKERS[@]}"; do ! worker_pid "$n" >/dev/null || die "Celery worker $n runs: stop the cluster first"; done
    kafka wipe --check >/dev/null 2>&1 || die "Kafka on $HOST:$KAFKA_PORT runs: stop the cluster first"
    ! port_open "$AIRFLOW_PORT" || die "Airflow answers on $HOST:$AIRFLOW_PORT: stop the cluster first"
    ! port_open "$PG_PORT" || die "PostgreSQL answers on $HOST:$PG_PORT: stop the cluster first"
    single_redis wipe redis >/dev/null
    kafka wipe >/dev/null
    rm -rf "$AIRFLOW_HOME_DIR" "$ROOT/.run/pg-$PG_PORT" "$PYFILES_ZIP"
    for n in "${ZK_NODES[@]}"; do rm -rf "$(zk_dir "$n")"; done
    for p in "${REDIS_PORTS[@]}"; do rm -rf "$(redis_dir "$p")"; done
    for name in master "${SPARK_WORKERS[@]/#/worker-}"; do rm -rf "$(spark_dir "$name")"; done
    rm -f "$DIR/redis-$REDIS_BASE-create.log"
    say "deleted the data of the nodes on these ports under $DIR"
}

# The components named on the command line (all of them when none), checked here: a mistake stops before anything.
COMPONENTS=()
set_components() {
    local c
    (($# > 0)) || set -- zk redis spark kafka airflow
    for c in "$@"; do
        [[ "$c" =~ ^(zk|redis|spark|kafka|airflow)$ ]] || die "unknown component '$c' (zk, redis, spark, kafka or airflow)"
    done
    COMPONENTS=("$@")
}

cmd="${1:-}"
shift || true
case "$cmd" in
start)
    set_components "$@"
    mkdir -p "$DIR"
    for c in "${COMPONENTS[@]}"; do "start_$c"; done
    ;;
stop)
    set_components "$@"
    for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do "stop_${COMPONENTS[i]}"; done # Airflow before what it uses
    say "stopped what this script had started of: ${COMPONENTS[*]} (a node it did not start is never stopped)"
    ;;
status) status ;;
env) print_env ;;
wipe) wipe ;;
*) die "usage: bash scripts/cluster.sh start|stop [zk|redis|spark|kafka|airflow]... | status | env | wipe (--help for more)" ;;
esac

#!/usr/bin/env bash
# Sundial's local clusters: a three-node Apache Kafka (KRaft, every node a
# controller and a broker; replication factor 3, min.insync.replicas 2), a
# Redis Cluster of three masters with a replica each and a three-node
# Cassandra (small heaps; keyspaces of replication factor 3), as plain
# processes on 127.0.0.1. The failure tests (make test-cluster) kill their
# nodes.
#
#   cluster.sh up [kafka|redis|cassandra|sentinel]  start what is not running, wait until it serves
#   cluster.sh down [kafka|redis|cassandra|sentinel]  stop; no process is left behind
#   cluster.sh status                every node: state, pid, address, role
#   cluster.sh env                   export lines: source <(deploy/local/cluster.sh env)
#   cluster.sh kill NODE             SIGKILL one node (kafka-1..3, redis-1..6, cassandra-1..3, sredis-1..2, sentinel-1..3)
#   cluster.sh start NODE            start one stopped node and wait until it serves
#   cluster.sh logs [-n N] NODE...   the end of the nodes' logs
#   cluster.sh reset                 down, then delete data and logs
#
# `up sentinel` (never started by default) runs a Redis master (sredis-1),
# its replica (sredis-2) and three Sentinels (sentinel-1..3) watching it
# under the name "sundial", for the Sentinel tests.
#
# The Cassandra nodes share 127.0.0.1 and differ by their native, storage and
# JMX ports; they start one after the other, each bootstrapping into the
# ring of the ones before (cassandra-1 is the seed). Settings come from
# SUNDIAL_* environment variables; deploy/local/README.md lists them.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/../.." && pwd -P)

STACK_DIR=$(realpath -m "${SUNDIAL_STACK_DIR:-$REPO/.stack}")
CLUSTER_DIR=$(realpath -m "${SUNDIAL_CLUSTER_DIR:-$STACK_DIR/cluster}")
DATA_DIR=$CLUSTER_DIR/data
LOG_DIR=$CLUSTER_DIR/logs
RUN_DIR=$CLUSTER_DIR/run
# The settings `up` started the cluster with. Every other command reads them
# back, so that `start NODE` from a test restarts a node exactly as it ran,
# whatever the test's environment says.
SETTINGS=$RUN_DIR/settings
if [[ ${1-} != up && -f $SETTINGS ]]; then
  # shellcheck disable=SC1090 # written by save_settings
  source "$SETTINGS"
fi
DIST_DIR=$(realpath -m "${SUNDIAL_STACK_DIST_DIR:-$STACK_DIR/dist}")

KAFKA_PORT=${SUNDIAL_KAFKA_CLUSTER_PORT:-24092}
KAFKA_CONTROLLER_PORT=${SUNDIAL_KAFKA_CLUSTER_CONTROLLER_PORT:-24192}
REDIS_PORT=${SUNDIAL_REDIS_CLUSTER_PORT:-26101}
REDIS_BUS_PORT=${SUNDIAL_REDIS_CLUSTER_BUS_PORT:-26201}
# The Sentinel group: the master, its replica, then the three Sentinels.
SENTINEL_PORT=${SUNDIAL_SENTINEL_PORT:-25201}
SENTINEL_MASTER=sundial
# The Cassandra nodes: native transport (CQL), storage (gossip and
# replication) and JMX (nodetool, on 127.0.0.1 only), each port and the next
# two.
CASSANDRA_PORT=${SUNDIAL_CASSANDRA_CLUSTER_PORT:-24042}
CASSANDRA_STORAGE_PORT=${SUNDIAL_CASSANDRA_CLUSTER_STORAGE_PORT:-24070}
CASSANDRA_JMX_PORT=${SUNDIAL_CASSANDRA_CLUSTER_JMX_PORT:-24080}
CASSANDRA_HEAP=${SUNDIAL_CASSANDRA_CLUSTER_HEAP:-640m}
KAFKA_HEAP=${SUNDIAL_KAFKA_CLUSTER_HEAP:-512m}
KAFKA_SESSION_TIMEOUT_MS=${SUNDIAL_KAFKA_CLUSTER_SESSION_TIMEOUT_MS:-3000}
REDIS_NODE_TIMEOUT_MS=${SUNDIAL_REDIS_CLUSTER_NODE_TIMEOUT_MS:-2000}
TIMEOUT=${SUNDIAL_STACK_TIMEOUT:-240}
STOP_GRACE=${SUNDIAL_STACK_STOP_GRACE:-30}

# Secured mode (deploy/local/secure-cluster.sh sets it, with a folder and
# ports of its own): Redis only, TLS on client, cluster bus and replication
# links, and the sundial ACL user, whose password the replicas use to reach
# their master; the default user is off.
SECURE=${SUNDIAL_CLUSTER_SECURE:-false}
TLS_DIR=$CLUSTER_DIR/tls
SECRETS_DIR=$CLUSTER_DIR/secrets
# The script a user runs, for the command our messages suggest.
SELF=cluster.sh
[[ $SECURE != true ]] || SELF=secure-cluster.sh

KAFKA_NODES=(kafka-1 kafka-2 kafka-3)
REDIS_NODES=(redis-1 redis-2 redis-3 redis-4 redis-5 redis-6)
SENTINEL_NODES=(sredis-1 sredis-2 sentinel-1 sentinel-2 sentinel-3)
CASSANDRA_NODES=(cassandra-1 cassandra-2 cassandra-3)
MARKER=-Dsundial.cluster=$CLUSTER_DIR
STACKCHECK=$CLUSTER_DIR/bin/stackcheck

save_settings() {
  mkdir -p "$RUN_DIR"
  {
    echo "SUNDIAL_STACK_DIST_DIR=${DIST_DIR@Q}"
    echo "SUNDIAL_KAFKA_CLUSTER_PORT=$KAFKA_PORT"
    echo "SUNDIAL_KAFKA_CLUSTER_CONTROLLER_PORT=$KAFKA_CONTROLLER_PORT"
    echo "SUNDIAL_REDIS_CLUSTER_PORT=$REDIS_PORT"
    echo "SUNDIAL_REDIS_CLUSTER_BUS_PORT=$REDIS_BUS_PORT"
    echo "SUNDIAL_SENTINEL_PORT=$SENTINEL_PORT"
    echo "SUNDIAL_CASSANDRA_CLUSTER_PORT=$CASSANDRA_PORT"
    echo "SUNDIAL_CASSANDRA_CLUSTER_STORAGE_PORT=$CASSANDRA_STORAGE_PORT"
    echo "SUNDIAL_CASSANDRA_CLUSTER_JMX_PORT=$CASSANDRA_JMX_PORT"
    echo "SUNDIAL_CASSANDRA_CLUSTER_HEAP=$CASSANDRA_HEAP"
    echo "SUNDIAL_KAFKA_CLUSTER_HEAP=$KAFKA_HEAP"
    echo "SUNDIAL_KAFKA_CLUSTER_SESSION_TIMEOUT_MS=$KAFKA_SESSION_TIMEOUT_MS"
    echo "SUNDIAL_REDIS_CLUSTER_NODE_TIMEOUT_MS=$REDIS_NODE_TIMEOUT_MS"
    echo "SUNDIAL_CLUSTER_SECURE=$SECURE"
  } >"$SETTINGS"
}

say() { printf '%s\n' "$*"; }
warn() { printf 'cluster: %s\n' "$*" >&2; }
die() {
  warn "$*"
  exit 1
}

validate() {
  local bad=() name value
  for name in KAFKA_PORT KAFKA_CONTROLLER_PORT REDIS_PORT REDIS_BUS_PORT SENTINEL_PORT \
    CASSANDRA_PORT CASSANDRA_STORAGE_PORT CASSANDRA_JMX_PORT; do
    value=${!name}
    if [[ ! $value =~ ^[0-9]{1,5}$ ]] || ((10#$value < 1 || 10#$value > 65530)); then
      local var=${name/KAFKA_/KAFKA_CLUSTER_}
      var=${var/REDIS_/REDIS_CLUSTER_}
      var=${var/CASSANDRA_/CASSANDRA_CLUSTER_}
      bad+=("SUNDIAL_$var=$value: want a TCP port number 1-65530 (the nodes use it and the next ones)")
    fi
  done
  [[ $KAFKA_HEAP =~ ^[0-9]+[kKmMgG]$ ]] || bad+=("SUNDIAL_KAFKA_CLUSTER_HEAP=$KAFKA_HEAP: want a JVM size such as 512m")
  [[ $CASSANDRA_HEAP =~ ^[0-9]+[kKmMgG]$ ]] || bad+=("SUNDIAL_CASSANDRA_CLUSTER_HEAP=$CASSANDRA_HEAP: want a JVM size such as 640m")
  [[ $KAFKA_SESSION_TIMEOUT_MS =~ ^[0-9]+$ ]] && ((KAFKA_SESSION_TIMEOUT_MS >= 1000)) ||
    bad+=("SUNDIAL_KAFKA_CLUSTER_SESSION_TIMEOUT_MS=$KAFKA_SESSION_TIMEOUT_MS: want at least 1000")
  [[ $REDIS_NODE_TIMEOUT_MS =~ ^[0-9]+$ ]] && ((REDIS_NODE_TIMEOUT_MS >= 500)) ||
    bad+=("SUNDIAL_REDIS_CLUSTER_NODE_TIMEOUT_MS=$REDIS_NODE_TIMEOUT_MS: want at least 500")
  [[ $TIMEOUT =~ ^[0-9]+$ ]] && ((TIMEOUT > 0)) || bad+=("SUNDIAL_STACK_TIMEOUT=$TIMEOUT: want a positive number of seconds")
  [[ $STOP_GRACE =~ ^[0-9]+$ ]] && ((STOP_GRACE > 0)) || bad+=("SUNDIAL_STACK_STOP_GRACE=$STOP_GRACE: want a positive number of seconds")
  if ((${#bad[@]} == 0)); then
    local ports dup
    ports=$(for n in "${KAFKA_NODES[@]}" "${REDIS_NODES[@]}" "${SENTINEL_NODES[@]}" "${CASSANDRA_NODES[@]}"; do ports_of "$n"; done | tr ' ' '\n')
    dup=$(sort <<<"$ports" | uniq -d | tr '\n' ' ')
    [[ -z $dup ]] || bad+=("the port ranges overlap: ${dup% } used twice")
  fi
  if ((${#bad[@]})); then
    warn "bad settings:"
    printf '  %s\n' "${bad[@]}" >&2
    exit 2
  fi
}

# ---------------------------------------------------------------- nodes

index_of() { echo "${1##*-}"; } # kafka-2 -> 2

# ports_of NODE prints every port NODE listens on.
ports_of() {
  local i
  i=$(index_of "$1")
  case $1 in
    kafka-*) echo "$((KAFKA_PORT + i - 1)) $((KAFKA_CONTROLLER_PORT + i - 1))" ;;
    redis-*) echo "$((REDIS_PORT + i - 1)) $((REDIS_BUS_PORT + i - 1))" ;;
    sredis-*) echo "$((SENTINEL_PORT + i - 1))" ;;
    sentinel-*) echo "$((SENTINEL_PORT + i + 1))" ;;
    cassandra-*) echo "$((CASSANDRA_PORT + i - 1)) $((CASSANDRA_STORAGE_PORT + i - 1)) $((CASSANDRA_JMX_PORT + i - 1))" ;;
  esac
}

addr_of() {
  local i
  i=$(index_of "$1")
  case $1 in
    kafka-*) echo "127.0.0.1:$((KAFKA_PORT + i - 1))" ;;
    redis-*) echo "127.0.0.1:$((REDIS_PORT + i - 1))" ;;
    sredis-* | sentinel-*) echo "127.0.0.1:$(ports_of "$1")" ;;
    cassandra-*) echo "127.0.0.1:$((CASSANDRA_PORT + i - 1))" ;;
  esac
}

addrs_of() { # kafka|redis|cassandra: comma-separated client addresses
  local n out=()
  for n in $(nodes_of "$1"); do out+=("$(addr_of "$n")"); done
  local IFS=,
  echo "${out[*]}"
}

nodes_of() {
  case $1 in
    kafka) echo "${KAFKA_NODES[*]}" ;;
    redis) echo "${REDIS_NODES[*]}" ;;
    sentinel) echo "${SENTINEL_NODES[*]}" ;;
    cassandra) echo "${CASSANDRA_NODES[*]}" ;;
    *) die "unknown backend '$1': want kafka, redis, cassandra or sentinel" ;;
  esac
}

check_node() {
  [[ " ${KAFKA_NODES[*]} ${REDIS_NODES[*]} ${CASSANDRA_NODES[*]} ${SENTINEL_NODES[*]} " == *" $1 "* ]] ||
    die "unknown node '$1': want one of ${KAFKA_NODES[*]} ${REDIS_NODES[*]} ${CASSANDRA_NODES[*]} ${SENTINEL_NODES[*]}"
}

# is_ours PID NODE: whether PID is NODE of this cluster, judged by its
# command line (a zombie's is empty).
is_ours() {
  local pid=$1 node=$2 args=() stat a has_marker='' has_node=''
  mapfile -d '' -t args 2>/dev/null <"/proc/$pid/cmdline" || return 1
  ((${#args[@]})) || return 1
  read -r stat 2>/dev/null <"/proc/$pid/stat" || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != [ZX] ]] || return 1
  if [[ $node == redis-* || $node == sredis-* || $node == sentinel-* ]]; then
    [[ ${args[0]##*/} == redis-server && ${args[1]-} == "$RUN_DIR/$node/redis.conf" ]]
    return
  fi
  for a in "${args[@]}"; do
    [[ $a == "$MARKER" ]] && has_marker=1
    [[ $a == "-Dsundial.cluster.node=$node" ]] && has_node=1
  done
  [[ -n $has_marker && -n $has_node ]]
}

# node_pid NODE prints the pid of the running node, or nothing; a lost pid
# file does not hide a process.
node_pid() {
  local f=$RUN_DIR/$1.pid pid p
  if [[ -f $f ]]; then
    pid=$(<"$f")
    if [[ $pid =~ ^[0-9]+$ ]] && is_ours "$pid" "$1"; then
      echo "$pid"
      return
    fi
  fi
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    if is_ours "$pid" "$1"; then
      echo "$pid"
      return
    fi
  done
  return 0
}

port_busy() { (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# launch NODE OUTFILE COMMAND...: start COMMAND in its own session, detached
# from our lock and terminal, and record its pid.
launch() {
  local node=$1 out=$2 pid i
  shift 2
  [[ ! -s $out ]] || mv -f "$out" "$out.prev"
  (cd "$RUN_DIR/$node" && exec setsid "$@") </dev/null >>"$out" 2>&1 9>&- &
  pid=$!
  for ((i = 0; i < 50; i++)); do
    is_ours "$pid" "$node" && break
    sleep 0.1
  done
  is_ours "$pid" "$node" || pid=$(node_pid "$node")
  [[ -n $pid ]] || return 1
  echo "$pid" >"$RUN_DIR/$node.pid"
  echo "$pid"
}

# render TEMPLATE OUT NAME=VALUE... replaces @NAME@ placeholders.
render() {
  local in=$1 out=$2 kv args=()
  shift 2
  for kv in "$@"; do
    local v=${kv#*=}
    v=${v//\\/\\\\}
    v=${v//|/\\|}
    v=${v//&/\\&}
    args+=(-e "s|@${kv%%=*}@|$v|g")
  done
  sed "${args[@]}" "$in" >"$out"
  local left
  left=$(grep -v '^[[:space:]]*#' "$out" | grep -o '@[A-Z_]*@' || true)
  [[ -z $left ]] || die "unrendered placeholder in $out: ${left//$'\n'/ }"
}

JAVA=${JAVA_HOME:+$JAVA_HOME/bin/java}
JAVA=${JAVA:-java}

kafka_voters() {
  local n i out=()
  for n in "${KAFKA_NODES[@]}"; do
    i=$(index_of "$n")
    out+=("$i@127.0.0.1:$((KAFKA_CONTROLLER_PORT + i - 1))")
  done
  local IFS=,
  echo "${out[*]}"
}

start_kafka_node() {
  local node=$1 i lib conf data logs
  i=$(index_of "$node")
  lib=$DIST_DIR/kafka-$KAFKA_VERSION/lib
  conf=$RUN_DIR/$node
  data=$DATA_DIR/$node
  logs=$LOG_DIR/$node
  mkdir -p "$conf" "$data" "$logs"
  render "$HERE/cluster/kafka.properties.in" "$conf/server.properties" \
    NODE_ID="$i" VOTERS="$(kafka_voters)" PORT=$((KAFKA_PORT + i - 1)) \
    CONTROLLER_PORT=$((KAFKA_CONTROLLER_PORT + i - 1)) DATA_DIR="$data" \
    SESSION_TIMEOUT_MS="$KAFKA_SESSION_TIMEOUT_MS" HEARTBEAT_MS=$((KAFKA_SESSION_TIMEOUT_MS / 6))
  cp "$HERE/kafka/log4j2.xml" "$conf/log4j2.xml"
  local common=(
    -Djava.awt.headless=true
    "-Dkafka.logs.dir=$logs"
    "-Dlog4j2.configurationFile=$conf/log4j2.xml"
    -cp "$lib/*"
  )
  if [[ ! -f $data/meta.properties ]]; then
    # Every node of one cluster is formatted with the same cluster id.
    local id
    id=$(<"$CLUSTER_DIR/kafka.cluster-id")
    if ! "$JAVA" "${common[@]}" kafka.tools.StorageTool format --ignore-formatted \
      -t "$id" -c "$conf/server.properties" >"$logs/format.log" 2>&1; then
      warn "$node: formatting the storage in $data failed:"
      tail -n 20 "$logs/format.log" >&2
      return 1
    fi
  fi
  launch "$node" "$logs/kafka.out" "$JAVA" \
    "-Xms$KAFKA_HEAP" "-Xmx$KAFKA_HEAP" \
    -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError \
    -XX:TieredStopAtLevel=1 -XX:CICompilerCount=2 \
    "-XX:ErrorFile=$logs/hs_err_%p.log" \
    "$MARKER" "-Dsundial.cluster.node=$node" \
    "${common[@]}" kafka.Kafka "$conf/server.properties"
}

# JVM flags Cassandra 5.0 needs on Java 17, shared with stack.sh.
read -r -d '' -a CASSANDRA_JDK17_FLAGS < <(grep -v '^[[:space:]]*#' "$HERE/cassandra/jvm17.options") || true

# start_cassandra_node starts a node as stack.sh starts the single one, with
# a small heap, the ports of its index and JMX on 127.0.0.1 only. A node
# with no data yet bootstraps into the ring of the running ones.
start_cassandra_node() {
  local node=$1 i lib conf data logs jamm
  i=$(index_of "$node")
  lib=$DIST_DIR/cassandra-$CASSANDRA_VERSION/lib
  conf=$RUN_DIR/$node
  data=$DATA_DIR/$node
  logs=$LOG_DIR/$node
  mkdir -p "$conf/triggers" "$data" "$logs"
  render "$HERE/cluster/cassandra.yaml.in" "$conf/cassandra.yaml" \
    SEED_STORAGE_PORT="$CASSANDRA_STORAGE_PORT" STORAGE_PORT=$((CASSANDRA_STORAGE_PORT + i - 1)) \
    NATIVE_PORT=$((CASSANDRA_PORT + i - 1)) DATA_DIR="$data"
  cp "$HERE/cassandra/logback.xml" "$conf/logback.xml"
  jamm=$(compgen -G "$lib/jamm-*.jar" | head -n1) || true
  [[ -n $jamm ]] || die "$node: no jamm jar in $lib"
  # No mlockall() of the heap when run as root (see stack.sh).
  local nolock=()
  if ((EUID == 0)) && setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock true 2>/dev/null; then
    nolock=(setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock)
  fi
  launch "$node" "$logs/cassandra.out" "${nolock[@]}" "$JAVA" \
    "-Xms$CASSANDRA_HEAP" "-Xmx$CASSANDRA_HEAP" -Xss256k \
    -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1 \
    -XX:G1RSetUpdatingPauseTimePercent=5 -XX:MaxGCPauseMillis=300 \
    -XX:InitiatingHeapOccupancyPercent=70 \
    -XX:+UseTLAB -XX:+ResizeTLAB -XX:+PerfDisableSharedMem -XX:+ExitOnOutOfMemoryError \
    -XX:TieredStopAtLevel=1 -XX:CICompilerCount=2 \
    "-XX:ErrorFile=$logs/hs_err_%p.log" \
    -Djava.net.preferIPv4Stack=true \
    "${CASSANDRA_JDK17_FLAGS[@]}" \
    "-javaagent:$jamm" \
    "$MARKER" "-Dsundial.cluster.node=$node" \
    -Dcassandra-foreground=yes \
    "-Dcassandra.config=file://$conf/cassandra.yaml" \
    "-Dcassandra.storagedir=$data" \
    "-Dcassandra.logdir=$logs" \
    "-Dlogback.configurationFile=$conf/logback.xml" \
    "-Dcassandra.triggers_dir=$conf/triggers" \
    "-Dcassandra.jmx.local.port=$((CASSANDRA_JMX_PORT + i - 1))" \
    -Dcassandra.skip_wait_for_gossip_to_settle=0 \
    -Dcassandra.ring_delay_ms=1000 \
    -Dcassandra.superuser_setup_delay_ms=0 \
    -Dcassandra.shutdown_announce_in_ms=0 \
    -Dchronicle.analytics.disable=true \
    -cp "$lib/*" org.apache.cassandra.service.CassandraDaemon
}

start_redis_node() {
  local node=$1 i conf data logs
  i=$(index_of "$node")
  conf=$RUN_DIR/$node
  data=$DATA_DIR/$node
  logs=$LOG_DIR/$node
  mkdir -p "$conf" "$data" "$logs"
  render "$HERE/cluster/redis.conf.in" "$conf/redis.conf" \
    PORT=$((REDIS_PORT + i - 1)) BUS_PORT=$((REDIS_BUS_PORT + i - 1)) \
    DATA_DIR="$data" LOG_DIR="$logs" NODE_TIMEOUT_MS="$REDIS_NODE_TIMEOUT_MS"
  if [[ $SECURE == true ]]; then
    # The configuration holds the password: only its owner reads it.
    chmod 600 "$conf/redis.conf"
    (umask 077 && render "$HERE/cluster/redis-secure.conf.in" "$conf/redis.conf.secure" \
      PORT=$((REDIS_PORT + i - 1)) TLS_DIR="$TLS_DIR" PASSWORD="$(<"$SECRETS_DIR/redis-sundial.password")")
    cat "$conf/redis.conf.secure" >>"$conf/redis.conf"
    rm -f "$conf/redis.conf.secure"
  fi
  launch "$node" "$logs/redis.out" "$(command -v redis-server)" "$conf/redis.conf"
}

# start_sredis_node and start_sentinel_node render a node's configuration on
# its first start only: the node rewrites it (CONFIG REWRITE) when Sentinel
# moves the master, and a restart keeps what it learnt.
start_sredis_node() {
  local node=$1 i conf data logs replica=''
  i=$(index_of "$node")
  conf=$RUN_DIR/$node
  data=$DATA_DIR/$node
  logs=$LOG_DIR/$node
  mkdir -p "$conf" "$data" "$logs"
  if [[ ! -f $conf/redis.conf ]]; then
    ((i == 1)) || replica="replicaof $(addr_of sredis-1 | tr : ' ')"
    render "$HERE/cluster/sentinel-redis.conf.in" "$conf/redis.conf" \
      PORT="$(ports_of "$node")" DATA_DIR="$data" LOG_DIR="$logs" REPLICAOF="$replica"
  fi
  launch "$node" "$logs/redis.out" "$(command -v redis-server)" "$conf/redis.conf"
}

start_sentinel_node() {
  local node=$1 conf logs master
  conf=$RUN_DIR/$node
  logs=$LOG_DIR/$node
  mkdir -p "$conf" "$logs"
  master=$(addr_of sredis-1)
  if [[ ! -f $conf/redis.conf ]]; then
    render "$HERE/cluster/sentinel.conf.in" "$conf/redis.conf" \
      PORT="$(ports_of "$node")" DIR="$conf" LOG_DIR="$logs" MASTER="$SENTINEL_MASTER" \
      MASTER_HOST="${master%:*}" MASTER_PORT="${master#*:}" DOWN_AFTER_MS="$REDIS_NODE_TIMEOUT_MS"
  fi
  launch "$node" "$logs/redis.out" "$(command -v redis-server)" "$conf/redis.conf" --sentinel
}

# wait_sentinels waits until every Sentinel knows the replica and the two
# other Sentinels: before that, a failover has nothing to promote or no
# majority to agree.
wait_sentinels() {
  local n a deadline=$((SECONDS + TIMEOUT)) info
  for n in sentinel-1 sentinel-2 sentinel-3; do
    a=$(addr_of "$n")
    while :; do
      info=$(redis-cli -h "${a%:*}" -p "${a#*:}" sentinel master "$SENTINEL_MASTER" 2>/dev/null | tr -d '\r' | paste -sd ' ')
      [[ " $info " == *" num-slaves 1 "* && " $info " == *" num-other-sentinels 2 "* ]] && break
      ((SECONDS < deadline)) || die "$n: does not see the replica and the other Sentinels after ${TIMEOUT}s: $info"
      sleep 0.5
    done
  done
}

log_of() {
  case $1 in
    kafka-*) echo "$LOG_DIR/$1/server.log" ;;
    redis-* | sredis-* | sentinel-*) echo "$LOG_DIR/$1/redis.log" ;;
    cassandra-*) echo "$LOG_DIR/$1/system.log" ;;
  esac
}

show_failure() {
  local f
  for f in "$(log_of "$1")" "$LOG_DIR/$1/kafka.out" "$LOG_DIR/$1/redis.out" "$LOG_DIR/$1/cassandra.out"; do
    [[ -s $f ]] || continue
    warn "$1: the end of $f:"
    tail -n 30 "$f" | sed 's/^/    /' >&2
  done
}

KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$HERE/kafka/pom.xml" | head -n1)
CASSANDRA_VERSION=$(sed -n 's:.*<cassandra.version>\(.*\)</cassandra.version>.*:\1:p' "$HERE/cassandra/pom.xml" | head -n1)

# prepare downloads Kafka and Cassandra (once, into the single-node stack's download
# folder, which it shares) and builds the readiness checker into the
# cluster's folder, through stack.sh.
# In secured mode stack.sh also writes the certificates and passwords into
# the cluster's folder.
prepare() {
  SUNDIAL_STACK_DIR=$CLUSTER_DIR SUNDIAL_STACK_DIST_DIR=$DIST_DIR SUNDIAL_STACK_SECURE=$SECURE \
    "$HERE/stack.sh" prepare "$@" ||
    die "could not prepare the cluster (see above)"
}

lock() {
  mkdir -p "$CLUSTER_DIR"
  exec 9>"$CLUSTER_DIR/.cluster.lock"
  if ! flock -n 9; then
    say "cluster: waiting for another cluster.sh on $CLUSTER_DIR to finish"
    flock -w $((TIMEOUT * 2 + 120)) 9 || die "gave up waiting for the lock $CLUSTER_DIR/.cluster.lock"
  fi
}

now_ms() {
  local t=${EPOCHREALTIME/./}
  echo $((t / 1000))
}
since_ms() {
  local d=$(($(now_ms) - $1))
  printf '%d.%ds' $((d / 1000)) $((d % 1000 / 100))
}

# start_nodes NODE...: starts the nodes that are not running; sets STARTED
# to node=pid words of every node (running or started).
STARTED=()
start_nodes() {
  local n pid port busy=()
  STARTED=()
  for n in "$@"; do
    pid=$(node_pid "$n")
    if [[ -n $pid ]]; then
      STARTED+=("$n=$pid")
      continue
    fi
    for port in $(ports_of "$n"); do
      port_busy "$port" && busy+=("$n needs port $port, which is in use")
    done
  done
  if ((${#busy[@]})); then
    warn "cannot start:"
    printf '  %s\n' "${busy[@]}" >&2
    die "stop that process, or move the cluster's ports (deploy/local/README.md)"
  fi
  mkdir -p "$RUN_DIR" "$DATA_DIR" "$LOG_DIR"
  if [[ " $* " == *" kafka-"* && ! -f $CLUSTER_DIR/kafka.cluster-id ]]; then
    # 16 random bytes in URL-safe base64, never starting with "-" (the
    # format tool would read such an id as an option).
    local id=-
    while [[ $id == -* ]]; do
      id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    done
    printf '%s' "$id" >"$CLUSTER_DIR/kafka.cluster-id"
  fi
  for n in "$@"; do
    [[ -z $(node_pid "$n") ]] || continue
    if ! pid=$("start_${n%%-*}_node" "$n"); then
      show_failure "$n"
      die "$n: did not start"
    fi
    say "$n: started (pid $pid) on $(addr_of "$n")"
    STARTED+=("$n=$pid")
  done
}

# check_flags prints the stackcheck flags that log in to a secured node.
check_flags() {
  [[ $SECURE == true ]] || return 0
  printf '%s\n' -tls-ca "$TLS_DIR/ca.pem" -redis-user sundial -redis-password-file "$SECRETS_DIR/redis-sundial.password"
}

# wait_nodes FLAGS NODE=PID...: waits, in parallel, until every node answers
# the stackcheck probe with FLAGS; a node that is not ready is reported with
# its logs.
wait_nodes() {
  local flags=$1 kv n pid ok=0
  shift
  declare -A jobs=()
  for kv in "$@"; do
    n=${kv%%=*}
    pid=${kv#*=}
    # shellcheck disable=SC2086 # flags are words
    # A subshell, so that its status is the checker's (pipefail), not sed's.
    local probe=${n%%-*}
    [[ $probe == kafka || $probe == cassandra ]] || probe=redis
    ("$STACKCHECK" "-$probe" "$(addr_of "$n")" "-$probe-pid" "$pid" $flags $(check_flags) -timeout "${TIMEOUT}s" |
      sed "s/^[a-z]*: /$n: /") &
    jobs[$n]=$!
  done
  for n in "${!jobs[@]}"; do
    if ! wait "${jobs[$n]}"; then
      show_failure "$n"
      ok=1
    fi
  done
  return "$ok"
}

# redis_cli NODE ARGS... runs redis-cli against NODE.
redis_cli() {
  local a
  a=$(addr_of "$1")
  shift
  redis_cli_at "${a%:*}" "${a#*:}" "$@"
}

# redis_cli_at HOST PORT ARGS... runs redis-cli, over TLS as the sundial
# user in secured mode; the password goes through the environment, not the
# command line.
redis_cli_at() {
  local host=$1 port=$2
  shift 2
  if [[ $SECURE == true ]]; then
    REDISCLI_AUTH=$(<"$SECRETS_DIR/redis-sundial.password") \
      redis-cli --tls --cacert "$TLS_DIR/ca.pem" --user sundial -h "$host" -p "$port" "$@"
  else
    redis-cli -h "$host" -p "$port" "$@"
  fi
}

# create_redis_cluster assigns the slots once: on nodes that were never part
# of a cluster, redis-cli makes redis-1..3 masters and redis-4..6 their
# replicas. A cluster that exists (nodes.conf in every node's folder) is
# left as it is: its masters may have moved by failovers.
create_redis_cluster() {
  local known
  known=$(redis_cli redis-1 cluster info | tr -d '\r' | sed -n 's/^cluster_known_nodes://p')
  [[ $known == 1 ]] || return 0
  local addrs=() n
  for n in "${REDIS_NODES[@]}"; do addrs+=("$(addr_of "$n")"); done
  say "redis: creating the cluster (3 masters, 1 replica each)"
  redis_cli_at 127.0.0.1 "$REDIS_PORT" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$LOG_DIR/redis-create.log" 2>&1 || {
    cat "$LOG_DIR/redis-create.log" >&2
    die "redis: creating the cluster failed"
  }
}

cmd_up() {
  local start b backends=("$@")
  start=$(now_ms)
  if ((${#backends[@]} == 0)); then
    backends=(kafka redis cassandra)
    [[ $SECURE != true ]] || backends=(redis)
  fi
  for b in "${backends[@]}"; do
    nodes_of "$b" >/dev/null
    [[ $SECURE != true || $b == redis ]] || die "the secured cluster runs Redis only, not $b"
  done
  validate
  lock
  save_settings
  # The Sentinel group runs the same redis-server.
  prepare "${backends[@]/sentinel/redis}"
  for b in "${backends[@]}"; do
    local t0
    t0=$(now_ms)
    if [[ $b == cassandra ]]; then
      up_cassandra
      say "$b: cluster ready at $(addrs_of "$b") $(since_ms "$t0") after its start"
      continue
    fi
    # shellcheck disable=SC2046 # node names are words
    start_nodes $(nodes_of "$b")
    case $b in
      kafka)
        wait_nodes "-kafka-brokers ${#KAFKA_NODES[@]}" "${STARTED[@]}" || die "kafka: not ready (logs: cluster.sh logs kafka-1)"
        ;;
      redis)
        wait_nodes "" "${STARTED[@]}" || die "redis: a node is not ready"
        create_redis_cluster
        wait_nodes "-redis-cluster 3" "${STARTED[@]}" || die "redis: the cluster is not ready"
        ;;
      sentinel)
        wait_nodes "" "${STARTED[@]}" || die "sentinel: a node is not ready"
        wait_sentinels
        ;;
    esac
    say "$b: cluster ready at $(addrs_of "$b") $(since_ms "$t0") after its start"
  done
  say "cluster: ready in $(since_ms "$start"); use it with: source <($HERE/$SELF env)"
}

# up_cassandra starts the Cassandra nodes one after the other: a node joins
# the ring (bootstraps, on its first start) only once the one before serves,
# as Cassandra allows one joining node at a time.
up_cassandra() {
  local n k=0 t0 total=${#CASSANDRA_NODES[@]}
  for n in "${CASSANDRA_NODES[@]}"; do
    k=$((k + 1))
    t0=$(now_ms)
    start_nodes "$n"
    say "$n: waiting until it serves and lists $((k - 1)) peers ($k of $total)"
    wait_nodes "-cassandra-nodes $k" "${STARTED[@]}" || die "$n: not ready (logs: $SELF logs $n)"
    say "$n: in the ring ($k of $total) $(since_ms "$t0") after its start"
  done
}

# stop NODE...: SIGTERM, a grace period, then SIGKILL.
stop() {
  local n pid t0 deadline killed=''
  declare -A left=()
  t0=$(now_ms)
  for n in "$@"; do
    pid=$(node_pid "$n")
    rm -f "$RUN_DIR/$n.pid"
    [[ -n $pid ]] || continue
    left[$n]=$pid
    kill -TERM "$pid" 2>/dev/null || true
  done
  deadline=$((SECONDS + STOP_GRACE))
  while ((${#left[@]})); do
    for n in "${!left[@]}"; do
      if ! is_ours "${left[$n]}" "$n"; then
        say "$n: stopped (pid ${left[$n]}) after $(since_ms "$t0")"
        unset "left[$n]"
      fi
    done
    ((${#left[@]})) || break
    if ((SECONDS >= deadline)); then
      [[ -z $killed ]] || die "pids ${left[*]} survived SIGKILL"
      for n in "${!left[@]}"; do
        warn "$n: still running ${STOP_GRACE}s after SIGTERM; sending SIGKILL"
        kill -KILL "${left[$n]}" 2>/dev/null || true
      done
      killed=1
      deadline=$((SECONDS + 10))
    fi
    sleep 0.2
  done
}

cmd_down() {
  local b nodes=()
  (($#)) || set -- kafka redis cassandra sentinel
  # shellcheck disable=SC2207 # node names are words
  for b in "$@"; do nodes+=($(nodes_of "$b")); done
  lock
  stop "${nodes[@]}"
}

cmd_kill() {
  (($# == 1)) || die "kill takes one node"
  check_node "$1"
  local pid
  lock
  pid=$(node_pid "$1")
  [[ -n $pid ]] || die "$1: not running"
  kill -KILL "$pid"
  while is_ours "$pid" "$1"; do sleep 0.05; done
  rm -f "$RUN_DIR/$1.pid"
  say "$1: killed (pid $pid)"
}

cmd_start() {
  (($# == 1)) || die "start takes one node"
  check_node "$1"
  local t0 flags
  t0=$(now_ms)
  validate
  lock
  local backend=${1%%-*}
  [[ $backend == kafka || $backend == cassandra ]] || backend=redis
  [[ -x $STACKCHECK ]] || prepare "$backend"
  start_nodes "$1"
  case $1 in
    kafka-*) flags="-kafka-brokers ${#KAFKA_NODES[@]}" ;;
    redis-*) flags="-redis-cluster 3" ;;
    cassandra-*) flags="-cassandra-nodes ${#CASSANDRA_NODES[@]}" ;;
    *) flags="" ;;
  esac
  wait_nodes "$flags" "${STARTED[@]}" || die "$1: not ready"
  say "$1: ready $(since_ms "$t0") after its start"
}

cmd_status() {
  local n pid state role all=0 nodes=("${KAFKA_NODES[@]}" "${REDIS_NODES[@]}" "${CASSANDRA_NODES[@]}")
  [[ $SECURE != true ]] || nodes=("${REDIS_NODES[@]}")
  printf '%-12s %-8s %-8s %-16s %s\n' NODE STATE PID ADDRESS READY
  # The Sentinel group is optional: it is listed when it runs, and its
  # absence fails nothing.
  for n in "${nodes[@]}" "${SENTINEL_NODES[@]}"; do
    pid=$(node_pid "$n")
    state=stopped role=-
    if [[ -n $pid ]]; then
      state=running
      if [[ -x $STACKCHECK ]]; then
        local probe=redis flags=''
        case $n in
          kafka-*) probe=kafka flags="-kafka-brokers ${#KAFKA_NODES[@]}" ;;
          cassandra-*) probe=cassandra flags="-cassandra-nodes ${#CASSANDRA_NODES[@]}" ;;
          redis-*) flags="-redis-cluster 3 $(check_flags | tr '\n' ' ')" ;;
        esac
        # shellcheck disable=SC2086
        role=$("$STACKCHECK" "-$probe" "$(addr_of "$n")" $flags -timeout 3s -progress 0s 2>&1 | head -n1 | sed 's/^[a-z]*: //') || all=3
      fi
    elif [[ $n == sredis-* || $n == sentinel-* ]]; then
      continue
    else
      all=3
    fi
    printf '%-12s %-8s %-8s %-16s %s\n' "$n" "$state" "${pid:--}" "$(addr_of "$n")" "$role"
  done
  say "cluster dir: $CLUSTER_DIR"
  return "$all"
}

cmd_env() {
  (($# == 0)) || die "env takes no arguments"
  echo "export SUNDIAL_KAFKA_CLUSTER_BROKERS=$(addrs_of kafka)"
  echo "export SUNDIAL_REDIS_CLUSTER_ADDRS=$(addrs_of redis)"
  echo "export SUNDIAL_CASSANDRA_CLUSTER_HOSTS=$(addrs_of cassandra)"
  echo "export SUNDIAL_SENTINEL_MASTER=$SENTINEL_MASTER"
  echo "export SUNDIAL_SENTINEL_ADDRS=$(addr_of sentinel-1),$(addr_of sentinel-2),$(addr_of sentinel-3)"
  echo "export SUNDIAL_CLUSTER_CTL=$HERE/cluster.sh"
  echo "export SUNDIAL_CLUSTER_DIR=$CLUSTER_DIR"
}

# cmd_secure_env: the secured cluster's SUNDIAL_SECURE_* export lines.
cmd_secure_env() {
  echo "export SUNDIAL_SECURE_REDIS_CLUSTER_ADDRS=$(addrs_of redis)"
  echo "export SUNDIAL_SECURE_CLUSTER_TLS_DIR=$TLS_DIR"
  echo "export SUNDIAL_SECURE_CLUSTER_SECRETS_DIR=$SECRETS_DIR"
}

cmd_logs() {
  local lines=50 n files=()
  if [[ ${1-} == -n ]]; then
    [[ ${2-} =~ ^[0-9]+$ ]] || die "logs -n wants a number of lines"
    lines=$2
    shift 2
  fi
  (($#)) || set -- "${KAFKA_NODES[@]}" "${REDIS_NODES[@]}" "${CASSANDRA_NODES[@]}"
  for n in "$@"; do
    check_node "$n"
    [[ -f $(log_of "$n") ]] && files+=("$(log_of "$n")")
  done
  ((${#files[@]})) || die "no logs yet in $LOG_DIR"
  tail -n "$lines" "${files[@]}"
}

cmd_reset() {
  (($# == 0)) || die "reset takes no arguments"
  lock
  stop "${KAFKA_NODES[@]}" "${REDIS_NODES[@]}" "${CASSANDRA_NODES[@]}" "${SENTINEL_NODES[@]}"
  rm -rf "$DATA_DIR" "$LOG_DIR" "$RUN_DIR" "$CLUSTER_DIR/kafka.cluster-id"
  say "cluster: data and logs deleted"
}

usage() {
  sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
}

main() {
  local cmd=${1-}
  (($#)) && shift
  case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    status) cmd_status "$@" ;;
    env)
      if [[ $SECURE == true ]]; then cmd_secure_env "$@"; else cmd_env "$@"; fi
      ;;
    kill) cmd_kill "$@" ;;
    start) cmd_start "$@" ;;
    logs) cmd_logs "$@" ;;
    reset) cmd_reset "$@" ;;
    -h | --help | help) usage ;;
    *)
      usage >&2
      exit 2
      ;;
  esac
}

main "$@"

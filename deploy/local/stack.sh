#!/usr/bin/env bash
# Sundial's local real stack: Apache Kafka (KRaft, one combined node), Apache
# Cassandra 5.0 and Redis as plain processes on 127.0.0.1, no Docker.
#
#   stack.sh up [BACKEND...]      download once, start, wait until each serves requests
#   stack.sh down [BACKEND...]    stop; no process is left behind
#   stack.sh kill [BACKEND...]    SIGKILL at once, no clean shutdown (crash tests)
#   stack.sh status               state, pid, address, version and readiness
#   stack.sh logs [-f] [-n N] [BACKEND...]   show (or follow) the logs
#   stack.sh env                  export lines: source <(deploy/local/stack.sh env)
#   stack.sh flags [BACKEND...]   (secured stack) sundial's flags that reach it
#   stack.sh reset                down, then delete data and logs (keeps downloads)
#   stack.sh prepare [BACKEND...] download and build what is missing, start nothing
#
# BACKEND is kafka, cassandra or redis (default: all three). Settings come
# from SUNDIAL_* environment variables; deploy/local/README.md lists them.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/../.." && pwd -P)

STACK_DIR=$(realpath -m "${SUNDIAL_STACK_DIR:-$REPO/.stack}")
DIST_DIR=$(realpath -m "${SUNDIAL_STACK_DIST_DIR:-$STACK_DIR/dist}")
DATA_DIR=$(realpath -m "${SUNDIAL_STACK_DATA_DIR:-$STACK_DIR/data}")
LOG_DIR=$(realpath -m "${SUNDIAL_STACK_LOG_DIR:-$STACK_DIR/logs}")
RUN_DIR=$STACK_DIR/run

KAFKA_PORT=${SUNDIAL_KAFKA_PORT:-19092}
KAFKA_CONTROLLER_PORT=${SUNDIAL_KAFKA_CONTROLLER_PORT:-19093}
CASSANDRA_PORT=${SUNDIAL_CASSANDRA_PORT:-19042}
CASSANDRA_STORAGE_PORT=${SUNDIAL_CASSANDRA_STORAGE_PORT:-17000}
REDIS_PORT=${SUNDIAL_REDIS_PORT:-16379}
KAFKA_HEAP=${SUNDIAL_KAFKA_HEAP:-1g}
CASSANDRA_HEAP=${SUNDIAL_CASSANDRA_HEAP:-2g}
CASSANDRA_CONCURRENT_WRITES=${SUNDIAL_CASSANDRA_CONCURRENT_WRITES:-16}
KAFKA_AUTO_CREATE_TOPICS=${SUNDIAL_KAFKA_AUTO_CREATE_TOPICS:-false}
TIMEOUT=${SUNDIAL_STACK_TIMEOUT:-240}
STOP_GRACE=${SUNDIAL_STACK_STOP_GRACE:-30}
# Secured mode (deploy/local/secure.sh sets it, with a folder and ports of
# its own): TLS everywhere, SCRAM users and ACLs on Kafka, passwords on
# Cassandra and Redis. The certificates and passwords live in the stack
# folder, and survive `reset` so that a client's files stay valid.
SECURE=${SUNDIAL_STACK_SECURE:-false}
TLS_DIR=$STACK_DIR/tls
SECRETS_DIR=$STACK_DIR/secrets
# The script a user runs, for the commands our messages suggest.
SELF=stack.sh
[[ $SECURE != true ]] || SELF=secure.sh

ALL=(kafka cassandra redis)
# The marker that tells this stack's JVMs apart from every other process,
# including another checkout's stack.
MARKER=-Dsundial.stack=$STACK_DIR

say() { printf '%s\n' "$*"; }
warn() { printf 'stack: %s\n' "$*" >&2; }
die() {
  warn "$*"
  exit 1
}

# ---------------------------------------------------------------- settings

validate() {
  local bad=() name value
  for name in KAFKA_PORT KAFKA_CONTROLLER_PORT CASSANDRA_PORT CASSANDRA_STORAGE_PORT REDIS_PORT; do
    value=${!name}
    if [[ ! $value =~ ^[0-9]{1,5}$ ]] || ((10#$value < 1 || 10#$value > 65535)); then
      bad+=("SUNDIAL_$name=$value: want a TCP port number 1-65535")
    fi
  done
  local ports="$KAFKA_PORT $KAFKA_CONTROLLER_PORT $CASSANDRA_PORT $CASSANDRA_STORAGE_PORT $REDIS_PORT"
  local dup
  dup=$(tr ' ' '\n' <<<"$ports" | sort | uniq -d | tr '\n' ' ')
  [[ -z $dup ]] || bad+=("ports must differ, but ${dup% } is used twice ($ports)")
  for name in KAFKA_HEAP CASSANDRA_HEAP; do
    [[ ${!name} =~ ^[0-9]+[kKmMgG]$ ]] || bad+=("SUNDIAL_$name=${!name}: want a JVM size such as 512m or 2g")
  done
  [[ $CASSANDRA_CONCURRENT_WRITES =~ ^[0-9]+$ ]] && ((CASSANDRA_CONCURRENT_WRITES > 0)) ||
    bad+=("SUNDIAL_CASSANDRA_CONCURRENT_WRITES=$CASSANDRA_CONCURRENT_WRITES: want a positive number of threads")
  [[ $SECURE =~ ^(true|false)$ ]] || bad+=("SUNDIAL_STACK_SECURE=$SECURE: want true or false")
  [[ $KAFKA_AUTO_CREATE_TOPICS =~ ^(true|false)$ ]] ||
    bad+=("SUNDIAL_KAFKA_AUTO_CREATE_TOPICS=$KAFKA_AUTO_CREATE_TOPICS: want true or false")
  [[ $TIMEOUT =~ ^[0-9]+$ ]] && ((TIMEOUT > 0)) ||
    bad+=("SUNDIAL_STACK_TIMEOUT=$TIMEOUT: want a positive number of seconds")
  [[ $STOP_GRACE =~ ^[0-9]+$ ]] && ((STOP_GRACE > 0)) ||
    bad+=("SUNDIAL_STACK_STOP_GRACE=$STOP_GRACE: want a positive number of seconds")
  if ((${#bad[@]})); then
    warn "bad settings:"
    printf '  %s\n' "${bad[@]}" >&2
    exit 2
  fi
}

# select_backends NAME... checks the names and sets SELECTED to them, or to
# all backends when none is named.
SELECTED=()
select_backends() {
  local b
  (($#)) || set -- "${ALL[@]}"
  for b in "$@"; do
    case $b in
      kafka | cassandra | redis) ;;
      *) die "unknown backend '$b': want kafka, cassandra or redis" ;;
    esac
  done
  SELECTED=("$@")
}

pom_version() { # component
  local tag=$1.version
  sed -n "s:.*<$tag>\(.*\)</$tag>.*:\1:p" "$HERE/$1/pom.xml" | head -n1
}

KAFKA_VERSION=$(pom_version kafka)
CASSANDRA_VERSION=$(pom_version cassandra)

port_of() {
  case $1 in
    kafka) echo "$KAFKA_PORT" ;;
    cassandra) echo "$CASSANDRA_PORT" ;;
    redis) echo "$REDIS_PORT" ;;
  esac
}

ports_of() { # every port a backend listens on, as PORT:SETTING words
  case $1 in
    kafka) echo "$KAFKA_PORT:SUNDIAL_KAFKA_PORT $KAFKA_CONTROLLER_PORT:SUNDIAL_KAFKA_CONTROLLER_PORT" ;;
    cassandra) echo "$CASSANDRA_PORT:SUNDIAL_CASSANDRA_PORT $CASSANDRA_STORAGE_PORT:SUNDIAL_CASSANDRA_STORAGE_PORT" ;;
    redis) echo "$REDIS_PORT:SUNDIAL_REDIS_PORT" ;;
  esac
}

# The settings a running backend was started with; a running backend whose
# ports differ from the current settings is an error, other differences a
# warning.
settings_of() {
  case $1 in
    kafka) echo "ports=$KAFKA_PORT,$KAFKA_CONTROLLER_PORT version=$KAFKA_VERSION heap=$KAFKA_HEAP auto_create_topics=$KAFKA_AUTO_CREATE_TOPICS secure=$SECURE$(ca_of)" ;;
    cassandra) echo "ports=$CASSANDRA_PORT,$CASSANDRA_STORAGE_PORT version=$CASSANDRA_VERSION heap=$CASSANDRA_HEAP secure=$SECURE$(ca_of)" ;;
    redis) echo "ports=$REDIS_PORT secure=$SECURE$(ca_of)" ;;
  esac
}

# ca_of prints, on the secured stack, " ca=" and a short digest of the CA
# certificate: a server started before new certificates were written still
# presents the old ones, and `up` says so.
ca_of() {
  [[ $SECURE == true && -f $TLS_DIR/ca.pem ]] || return 0
  printf ' ca=%.12s' "$(sha256sum <"$TLS_DIR/ca.pem")"
}

# addr_of prints the client address of a backend: the one it was started
# with when it runs, else the configured one.
addr_of() {
  local f=$RUN_DIR/$1.settings
  if [[ -f $f ]] && [[ -n $(backend_pid "$1") ]]; then
    sed -n 's/.*ports=\([0-9]*\).*/127.0.0.1:\1/p' "$f"
  else
    echo "127.0.0.1:$(port_of "$1")"
  fi
}

# ---------------------------------------------------------------- processes

# is_ours PID BACKEND: whether PID is a live process of BACKEND of this stack,
# judged by its command line (a zombie's is empty). Only bash builtins: it
# runs for every process on the machine.
is_ours() {
  local pid=$1 backend=$2 args=() stat
  mapfile -d '' -t args 2>/dev/null <"/proc/$pid/cmdline" || return 1
  ((${#args[@]})) || return 1
  read -r stat 2>/dev/null <"/proc/$pid/stat" || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != [ZX] ]] || return 1
  if [[ $backend == redis ]]; then
    [[ ${args[0]##*/} == redis-server && ${args[1]-} == "$RUN_DIR/redis/redis.conf" ]]
    return
  fi
  local a has_marker='' has_backend=''
  for a in "${args[@]}"; do
    [[ $a == "$MARKER" ]] && has_marker=1
    [[ $a == "-Dsundial.stack.component=$backend" ]] && has_backend=1
  done
  [[ -n $has_marker && -n $has_backend ]]
}

# find_pids BACKEND sets FOUND to every process of BACKEND of this stack,
# found by its command line: a lost pid file does not hide a process.
FOUND=()
find_pids() {
  local p pid
  FOUND=()
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    if is_ours "$pid" "$1"; then FOUND+=("$pid"); fi
  done
  return 0
}

# backend_pid BACKEND prints the pid of the running backend, or nothing.
backend_pid() {
  local f=$RUN_DIR/$1.pid pid
  if [[ -f $f ]]; then
    pid=$(<"$f")
    if [[ $pid =~ ^[0-9]+$ ]] && is_ours "$pid" "$1"; then
      echo "$pid"
      return
    fi
  fi
  find_pids "$1"
  if ((${#FOUND[@]})); then echo "${FOUND[0]}"; fi
  return 0
}

# port_owner PORT prints who listens on PORT ("pid 123: python3 -m http.server
# 19092", or which other Sundial stack), "an unknown process" when the port
# answers but its owner cannot be seen, or nothing when the port is free.
port_owner() {
  local port=$1 hex inodes inode fd pid args=() a
  printf -v hex '%04X' "$port"
  # Listening sockets (state 0A) on that port, any local address.
  inodes=$(awk -v h=":$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == h { print $10 }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u)
  for inode in $inodes; do
    fd=$(find /proc/[0-9]*/fd -maxdepth 1 -lname "socket:\[$inode\]" -print -quit 2>/dev/null || true)
    [[ -n $fd ]] || continue
    pid=${fd#/proc/}
    pid=${pid%%/*}
    mapfile -d '' -t args 2>/dev/null <"/proc/$pid/cmdline" || true
    local other=''
    for a in "${args[@]}"; do
      [[ $a == -Dsundial.stack=* ]] && other=${a#-Dsundial.stack=}
    done
    if [[ ${args[0]-} == *redis-server && ${args[1]-} == */run/redis/redis.conf ]]; then
      other=${args[1]%/run/redis/redis.conf}
    fi
    if [[ -n $other ]]; then
      echo "pid $pid of the Sundial stack in $other (stop it with: SUNDIAL_STACK_DIR=$other $HERE/stack.sh down)"
    else
      a="${args[*]}"
      echo "pid $pid: ${a:0:160}"
    fi
    return
  done
  if [[ -n $inodes ]] || (: <"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "an unknown process"
  fi
}

# launch BACKEND OUTFILE COMMAND...: start COMMAND in its own session (so a
# Ctrl-C in the terminal or the end of `make` does not reach it), detached
# from our lock and terminal, and record its pid.
launch() {
  local backend=$1 out=$2 pid i
  shift 2
  # One file per run, so a failure shows this run's output; one run is kept.
  [[ ! -s $out ]] || mv -f "$out" "$out.prev"
  (cd "$RUN_DIR/$backend" && exec setsid "$@") </dev/null >>"$out" 2>&1 9>&- &
  pid=$!
  # setsid execs in place, so $! is the backend's pid; make sure of it.
  for ((i = 0; i < 50; i++)); do
    is_ours "$pid" "$backend" && break
    sleep 0.1
  done
  if ! is_ours "$pid" "$backend"; then
    find_pids "$backend"
    pid=${FOUND[0]-}
  fi
  [[ -n $pid ]] || return 1
  echo "$pid" >"$RUN_DIR/$backend.pid"
  settings_of "$backend" >"$RUN_DIR/$backend.settings"
  echo "$pid"
}

# ---------------------------------------------------------------- tools

JAVA=${JAVA_HOME:+$JAVA_HOME/bin/java}
JAVA=${JAVA:-java}

need_java() {
  command -v "$JAVA" >/dev/null ||
    die "java not found: Kafka and Cassandra need OpenJDK 17 (apt-get install openjdk-17-jre-headless)"
  local v major
  v=$("$JAVA" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n1)
  major=${v%%.*}
  [[ $major == 1 ]] && major=$(cut -d. -f2 <<<"$v")
  [[ $major =~ ^[0-9]+$ ]] || die "cannot read the version of $JAVA (got '$v')"
  ((major >= 17)) || die "$JAVA is Java $v: Kafka 4 and Cassandra 5.0 need Java 17"
  ((major == 17)) || warn "$JAVA is Java $v; Cassandra 5.0 is supported on Java 17 (set JAVA_HOME to a JDK 17 if it fails)"
}

need_redis() {
  command -v redis-server >/dev/null && return
  if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
    say "redis: redis-server not found; installing Debian's redis-server package"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    command -v redis-server >/dev/null || die "redis-server still missing after apt-get install"
  else
    die "redis-server not found: install it (apt-get install redis-server)"
  fi
}

# fetch BACKEND: the backend's jars, downloaded by Maven from its pom.xml
# once. A marker with the pom's checksum says the folder is complete, so a
# second run neither calls Maven nor downloads anything.
fetch() {
  local backend=$1 version dir sum tmp log
  version=$(pom_version "$backend")
  dir=$DIST_DIR/$backend-$version
  sum=$(sha256sum <"$HERE/$backend/pom.xml" | cut -d' ' -f1)
  if [[ -f $dir/.complete && $(<"$dir/.complete") == "$sum" ]]; then
    return
  fi
  command -v mvn >/dev/null || die "mvn not found: Maven downloads Kafka and Cassandra (apt-get install maven)"
  say "$backend: downloading $backend $version and its dependencies with Maven (once)"
  mkdir -p "$DIST_DIR" "$LOG_DIR"
  tmp=$dir.partial.$$
  log=$LOG_DIR/mvn-$backend.log
  rm -rf "$tmp"
  if ! mvn -B -q -f "$HERE/$backend/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$tmp/lib" >"$log" 2>&1; then
    rm -rf "$tmp"
    warn "$backend: Maven failed; the end of $log:"
    tail -n 30 "$log" >&2
    exit 1
  fi
  compgen -G "$tmp/lib/*.jar" >/dev/null || die "$backend: Maven copied no jar into $tmp/lib"
  echo "$sum" >"$tmp/.complete"
  rm -rf "$dir"
  mv "$tmp" "$dir"
}

STACKCHECK=$STACK_DIR/bin/stackcheck
CERTS=$STACK_DIR/bin/certs

build_stackcheck() { build_tool stackcheck; }

# build_tool NAME builds the Go program deploy/local/NAME (the readiness
# checker, the certificate generator) into the stack's bin folder when its
# sources or the versions of the client libraries changed (not on every
# change of go.mod, which other work touches often); a failed rebuild falls
# back to the old binary.
build_tool() {
  local name=$1 bin=$STACK_DIR/bin/$1 stamp
  stamp=$({
    cat "$HERE/$name"/*.go
    grep -E 'github.com/(gocql/gocql|twmb/franz-go|redis/go-redis)|go-pkcs12' "$REPO/go.mod" || true
  } | sha256sum | cut -d' ' -f1)
  if [[ -x $bin && -f $bin.stamp && $(<"$bin.stamp") == "$stamp" ]]; then
    return
  fi
  command -v go >/dev/null || die "go not found: deploy/local/$name is a Go program"
  mkdir -p "$(dirname "$bin")"
  if (cd "$REPO" && go build -o "$bin.tmp" "./deploy/local/$name") 2>"$bin.log"; then
    mv "$bin.tmp" "$bin"
    echo "$stamp" >"$bin.stamp"
  elif [[ -x $bin ]]; then
    warn "rebuilding deploy/local/$name failed; using the previous build:"
    cat "$bin.log" >&2
  else
    cat "$bin.log" >&2
    die "cannot build deploy/local/$name"
  fi
}

# sed_escape makes a string literal in the replacement of s|...|...|.
sed_escape() {
  local v=$1
  v=${v//\\/\\\\}
  v=${v//|/\\|}
  v=${v//&/\\&}
  printf '%s' "$v"
}

# render TEMPLATE OUT replaces the @NAME@ placeholders of a config template.
render() {
  local kdata cdata rdata rlog secure=()
  kdata=$(sed_escape "$DATA_DIR/kafka")
  cdata=$(sed_escape "$DATA_DIR/cassandra")
  rdata=$(sed_escape "$DATA_DIR/redis")
  rlog=$(sed_escape "$LOG_DIR/redis")
  if [[ $SECURE == true ]]; then
    secure=(
      -e "s|@TLS_DIR@|$(sed_escape "$TLS_DIR")|g"
      -e "s|@KEYSTORE_PASSWORD@|$(sed_escape "$(<"$TLS_DIR/keystore.password")")|g"
      -e "s|@KAFKA_ADMIN_PASSWORD@|$(sed_escape "$(secret kafka-admin)")|g"
      -e "s|@REDIS_SUNDIAL_PASSWORD@|$(sed_escape "$(secret redis-sundial)")|g"
      -e "s|@CASSANDRA_AUTHENTICATOR@|PasswordAuthenticator|g"
      -e "s|@CASSANDRA_AUTHORIZER@|CassandraAuthorizer|g"
    )
  else
    secure=(
      -e "s|@CASSANDRA_AUTHENTICATOR@|AllowAllAuthenticator|g"
      -e "s|@CASSANDRA_AUTHORIZER@|AllowAllAuthorizer|g"
    )
  fi
  sed "${secure[@]}" -e "s|@KAFKA_PORT@|$KAFKA_PORT|g" \
    -e "s|@KAFKA_CONTROLLER_PORT@|$KAFKA_CONTROLLER_PORT|g" \
    -e "s|@KAFKA_DATA_DIR@|$kdata|g" \
    -e "s|@KAFKA_AUTO_CREATE_TOPICS@|$KAFKA_AUTO_CREATE_TOPICS|g" \
    -e "s|@CASSANDRA_PORT@|$CASSANDRA_PORT|g" \
    -e "s|@CASSANDRA_STORAGE_PORT@|$CASSANDRA_STORAGE_PORT|g" \
    -e "s|@CASSANDRA_DATA_DIR@|$cdata|g" \
    -e "s|@CASSANDRA_CONCURRENT_WRITES@|$CASSANDRA_CONCURRENT_WRITES|g" \
    -e "s|@REDIS_PORT@|$REDIS_PORT|g" \
    -e "s|@REDIS_DATA_DIR@|$rdata|g" \
    -e "s|@REDIS_LOG_DIR@|$rlog|g" \
    "$1" >"$2"
  local left
  left=$(grep -v '^[[:space:]]*#' "$2" | grep -o '@[A-Z_]*@' || true)
  [[ -z $left ]] || die "unrendered placeholder in $2: ${left//$'\n'/ }"
}

# render_config TEMPLATE OUT renders a backend's configuration and, in
# secured mode, appends the rendered fragment of the same name in secure/,
# whose settings come later and so replace the plain ones (listeners, ports).
# Secured configurations hold passwords: only their owner reads them.
render_config() {
  local out=$2
  if [[ $SECURE == true ]]; then
    # Made private before anything is written into them.
    : >"$out" && : >"$out.secure"
    chmod 600 "$out" "$out.secure"
  fi
  render "$1" "$out"
  if [[ $SECURE == true ]]; then
    render "$HERE/secure/${1##*/}" "$out.secure"
    cat "$out.secure" >>"$out"
    rm -f "$out.secure"
  fi
}

# ---------------------------------------------------------------- secured mode

# The users of the secured stack, each with a random password made once:
#   kafka-admin      Kafka super user (the broker's own inter-broker login)
#   kafka-sundial    Kafka user allowed on sundial.* topics and sundial* groups
#   kafka-other      Kafka user with no ACL at all
#   kafka-team-a, kafka-team-b  Kafka users of two teams, each allowed to
#                    write its own topic sundial.jobs.<team> only
#   cassandra-admin  the password that replaces Cassandra's default superuser's
#   cassandra-sundial  Cassandra login role with every permission on every keyspace
#   redis-sundial    Redis ACL user; the default user is off
SECRETS=(kafka-admin kafka-sundial kafka-other kafka-team-a kafka-team-b cassandra-admin cassandra-sundial redis-sundial)

secret() { cat "$SECRETS_DIR/$1.password"; }

# prepare_secure writes the certificates (deploy/local/certs) and the
# passwords that are missing.
prepare_secure() {
  [[ $SECURE == true ]] || return 0
  local name
  build_tool certs
  "$CERTS" -dir "$TLS_DIR" >/dev/null || die "could not write the certificates into $TLS_DIR"
  mkdir -p "$SECRETS_DIR"
  chmod 700 "$SECRETS_DIR"
  for name in "${SECRETS[@]}"; do
    [[ -s $SECRETS_DIR/$name.password ]] && continue
    (umask 077 && head -c 18 /dev/urandom | base64 | tr '+/' 'xy' >"$SECRETS_DIR/$name.password")
  done
}

# check_flags BACKEND prints the stackcheck flags that reach BACKEND: none
# on the plain stack; TLS and the administrator's login on the secured one.
check_flags() {
  [[ $SECURE == true ]] || return 0
  printf '%s\n' -tls-ca "$TLS_DIR/ca.pem"
  case $1 in
    kafka) printf '%s\n' -kafka-user admin -kafka-password-file "$SECRETS_DIR/kafka-admin.password" ;;
    # Cassandra's superuser password is the default until the first start
    # replaced it; the file beside the data says which one is in force.
    cassandra) printf '%s\n' -cassandra-user cassandra -cassandra-password-file "$DATA_DIR/cassandra-admin.password" ;;
    redis) printf '%s\n' -redis-user sundial -redis-password-file "$SECRETS_DIR/redis-sundial.password" ;;
  esac
}

# provision_flags BACKEND prints the stackcheck flags that create the
# secured stack's users once BACKEND is ready (none for Redis, whose users
# are in its configuration).
provision_flags() {
  [[ $SECURE == true ]] || return 0
  case $1 in
    kafka) printf '%s\n' -kafka-grant-user sundial -kafka-grant-prefix sundial \
      -kafka-teams team-a,team-b -kafka-team-password-dir "$SECRETS_DIR" ;;
    cassandra)
      printf '%s\n' -cassandra-role sundial -cassandra-role-password-file "$SECRETS_DIR/cassandra-sundial.password" \
        -cassandra-new-password-file "$SECRETS_DIR/cassandra-admin.password"
      ;;
  esac
}

# ---------------------------------------------------------------- backends

start_kafka() {
  local lib=$DIST_DIR/kafka-$KAFKA_VERSION/lib conf=$RUN_DIR/kafka
  local data=$DATA_DIR/kafka logs=$LOG_DIR/kafka
  mkdir -p "$conf" "$data" "$logs"
  render_config "$HERE/kafka/server.properties.in" "$conf/server.properties"
  cp "$HERE/kafka/log4j2.xml" "$conf/log4j2.xml"
  local common=(
    -Djava.awt.headless=true
    "-Dkafka.logs.dir=$logs"
    "-Dlog4j2.configurationFile=$conf/log4j2.xml"
    -cp "$lib/*"
  )
  if [[ ! -f $data/meta.properties ]]; then
    # A new KRaft node's storage is formatted once with a fresh cluster id
    # (16 random bytes in URL-safe base64, as Kafka writes them). Like
    # Kafka's own generator, it never starts with "-": the format tool
    # would read such an id as an option and refuse to format.
    local id=- scram=() user
    while [[ $id == -* ]]; do
      id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    done
    if [[ $SECURE == true ]]; then
      # SCRAM users exist from the first start: the broker logs in to
      # itself as admin, and the tests need sundial and other.
      for user in admin sundial other; do
        scram+=(--add-scram "SCRAM-SHA-512=[name=$user,password=$(secret "kafka-$user")]")
      done
    fi
    if ! "$JAVA" "${common[@]}" kafka.tools.StorageTool format --ignore-formatted \
      -t "$id" -c "$conf/server.properties" "${scram[@]}" >"$logs/format.log" 2>&1; then
      warn "kafka: formatting the storage in $data failed:"
      tail -n 20 "$logs/format.log" >&2
      return 1
    fi
  fi
  launch kafka "$logs/kafka.out" "$JAVA" \
    "-Xms$KAFKA_HEAP" "-Xmx$KAFKA_HEAP" \
    -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError \
    "-XX:ErrorFile=$logs/hs_err_%p.log" \
    "$MARKER" -Dsundial.stack.component=kafka \
    "${common[@]}" kafka.Kafka "$conf/server.properties"
}

# JVM flags Cassandra 5.0 needs on Java 17 (cluster.sh reads the same file).
read -r -d '' -a CASSANDRA_JDK17_FLAGS < <(grep -v '^[[:space:]]*#' "$HERE/cassandra/jvm17.options") || true

start_cassandra() {
  local lib=$DIST_DIR/cassandra-$CASSANDRA_VERSION/lib conf=$RUN_DIR/cassandra
  local data=$DATA_DIR/cassandra logs=$LOG_DIR/cassandra jamm
  mkdir -p "$conf/triggers" "$logs"
  if [[ $SECURE == true && ! -d $data ]]; then
    # A new node creates the superuser cassandra with the default password;
    # provisioning replaces it and records the new one here.
    mkdir -p "$DATA_DIR"
    (umask 077 && echo cassandra >"$DATA_DIR/cassandra-admin.password")
  fi
  mkdir -p "$data"
  render_config "$HERE/cassandra/cassandra.yaml.in" "$conf/cassandra.yaml"
  cp "$HERE/cassandra/logback.xml" "$conf/logback.xml"
  # Cassandra measures memtable sizes with jamm's instrumentation agent.
  jamm=$(compgen -G "$lib/jamm-*.jar" | head -n1) || true
  [[ -n $jamm ]] || die "cassandra: no jamm jar in $lib"
  # Run as root, Cassandra mlockall()s its whole heap at startup: that costs
  # seconds of page faults on every start and pins gigabytes on a shared
  # machine. Without CAP_IPC_LOCK the call fails (logged, harmless) and the
  # node starts faster.
  local nolock=()
  if ((EUID == 0)) && setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock true 2>/dev/null; then
    nolock=(setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock)
  fi
  launch cassandra "$logs/cassandra.out" "${nolock[@]}" "$JAVA" \
    "-Xms$CASSANDRA_HEAP" "-Xmx$CASSANDRA_HEAP" -Xss256k \
    -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1 \
    -XX:G1RSetUpdatingPauseTimePercent=5 -XX:MaxGCPauseMillis=300 \
    -XX:InitiatingHeapOccupancyPercent=70 \
    -XX:+UseTLAB -XX:+ResizeTLAB -XX:+PerfDisableSharedMem -XX:+ExitOnOutOfMemoryError \
    "-XX:ErrorFile=$logs/hs_err_%p.log" \
    -Djava.net.preferIPv4Stack=true \
    "${CASSANDRA_JDK17_FLAGS[@]}" \
    "-javaagent:$jamm" \
    "$MARKER" -Dsundial.stack.component=cassandra \
    -Dcassandra-foreground=yes \
    "-Dcassandra.config=file://$conf/cassandra.yaml" \
    "-Dcassandra.storagedir=$data" \
    "-Dcassandra.logdir=$logs" \
    "-Dlogback.configurationFile=$conf/logback.xml" \
    "-Dcassandra.triggers_dir=$conf/triggers" \
    -Dcassandra.skip_wait_for_gossip_to_settle=0 \
    -Dcassandra.ring_delay_ms=1000 \
    -Dcassandra.superuser_setup_delay_ms=0 \
    -Dcassandra.shutdown_announce_in_ms=0 \
    -Dchronicle.analytics.disable=true \
    -cp "$lib/*" org.apache.cassandra.service.CassandraDaemon
}

start_redis() {
  local conf=$RUN_DIR/redis
  mkdir -p "$conf" "$DATA_DIR/redis" "$LOG_DIR/redis"
  render_config "$HERE/redis/redis.conf.in" "$conf/redis.conf"
  launch redis "$LOG_DIR/redis/redis.out" "$(command -v redis-server)" "$conf/redis.conf"
}

main_log_of() {
  case $1 in
    kafka) echo "$LOG_DIR/kafka/server.log" ;;
    cassandra) echo "$LOG_DIR/cassandra/system.log" ;;
    redis) echo "$LOG_DIR/redis/redis.log" ;;
  esac
}

# show_failure BACKEND prints the end of the backend's logs.
show_failure() {
  local f
  for f in "$(main_log_of "$1")" "$LOG_DIR/$1/$1.out"; do
    [[ -s $f ]] || continue
    warn "$1: the end of $f:"
    tail -n 40 "$f" | sed 's/^/    /' >&2
  done
}

version_of() {
  case $1 in
    kafka) echo "$KAFKA_VERSION" ;;
    cassandra) echo "$CASSANDRA_VERSION" ;;
    redis) command -v redis-server >/dev/null && redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p' || echo "not installed" ;;
  esac
}

# ---------------------------------------------------------------- locking

# lock serialises up, down and reset of one stack: several `make test` runs
# at once must not start two Kafkas on the same port.
lock() {
  mkdir -p "$STACK_DIR"
  exec 9>"$STACK_DIR/.lock"
  if ! flock -n 9; then
    say "stack: waiting for another stack.sh on $STACK_DIR to finish"
    flock -w $((TIMEOUT * 2 + 120)) 9 || die "stack: gave up waiting for the lock $STACK_DIR/.lock"
  fi
}

# ---------------------------------------------------------------- commands

cmd_up() {
  local start b pid owner port busy=() failed=()
  start=$(now_ms)
  select_backends "$@"
  local selected=("${SELECTED[@]}")
  validate
  lock
  # Certificates and passwords first: a running backend is checked against
  # the certificates it should present.
  prepare_secure
  declare -A pids=() t_start=()
  for b in "${selected[@]}"; do
    pid=$(backend_pid "$b")
    if [[ -n $pid ]]; then
      pids[$b]=$pid
      local was now
      was=$(cat "$RUN_DIR/$b.settings" 2>/dev/null || true)
      now=$(settings_of "$b")
      local was_ca=${was##* ca=} now_ca=${now##* ca=}
      [[ $was == *" ca="* ]] || was_ca=''
      [[ $now == *" ca="* ]] || now_ca=''
      if [[ ${was%% *} != "${now%% *}" ]]; then
        die "$b runs (pid $pid) with ${was%% *} but the settings say ${now%% *}: run '$SELF down $b' first"
      elif [[ $was_ca != "$now_ca" ]]; then
        # It presents a certificate of the CA that was replaced: no client
        # of the new one would get through.
        die "$b runs (pid $pid) with the certificates of CA ${was_ca:-none}, but $TLS_DIR holds CA ${now_ca:-none}: run '$SELF down $b' first"
      elif [[ $was != "$now" ]]; then
        warn "$b runs (pid $pid) with [$was], the settings say [$now]: '$SELF down $b && $SELF up' applies them"
      fi
      continue
    fi
    for port in $(ports_of "$b"); do
      owner=$(port_owner "${port%%:*}")
      [[ -z $owner ]] || busy+=("$b needs port ${port%%:*} (${port#*:}), which is in use by $owner")
    done
  done
  if ((${#busy[@]})); then
    warn "cannot start the stack:"
    printf '  %s\n' "${busy[@]}" >&2
    warn "stop that process, or set the named variable to a free port (deploy/local/README.md)"
    exit 1
  fi

  mkdir -p "$RUN_DIR" "$DATA_DIR" "$LOG_DIR"
  # Build the checker and download what is missing in parallel: on a new
  # machine these are most of the time `up` takes.
  local prep=()
  build_stackcheck &
  prep+=($!)
  for b in "${selected[@]}"; do
    [[ -z ${pids[$b]-} ]] || continue
    case $b in
      kafka | cassandra)
        need_java
        fetch "$b" &
        prep+=($!)
        ;;
      redis) need_redis ;;
    esac
  done
  for pid in "${prep[@]}"; do
    wait "$pid" || die "could not prepare the stack (see above)"
  done
  for b in "${selected[@]}"; do
    [[ -z ${pids[$b]-} ]] || continue
    if ! pid=$("start_$b"); then
      show_failure "$b"
      failed+=("$b")
      continue
    fi
    pids[$b]=$pid
    t_start[$b]=$(now_ms)
    say "$b: started (pid $pid)"
  done

  # Wait for each backend to serve requests; the fast ones first.
  local order=() out
  for b in redis kafka cassandra; do
    [[ " ${selected[*]} " == *" $b "* && -n ${pids[$b]-} ]] && order+=("$b")
  done
  for b in "${order[@]}"; do
    # The time limit counts from the backend's start, not from this check.
    local limit=$TIMEOUT
    if [[ -n ${t_start[$b]-} ]]; then
      limit=$((TIMEOUT - ($(now_ms) - t_start[$b]) / 1000))
      ((limit >= 5)) || limit=5
    fi
    local flags=() provision=()
    mapfile -t flags < <(check_flags "$b")
    mapfile -t provision < <(provision_flags "$b")
    if out=$("$STACKCHECK" "-$b" "$(addr_of "$b")" "-$b-pid" "${pids[$b]}" "${flags[@]}" -timeout "${limit}s"); then
      if [[ -n ${t_start[$b]-} ]]; then
        say "$b: ready at $(addr_of "$b") $(since_ms "${t_start[$b]}") after its start (${out#* (}"
      else
        say "$b: already running (pid ${pids[$b]}): ${out#"$b: "}"
      fi
      if ((${#provision[@]})); then
        # Users and grants the server's configuration cannot hold; the
        # first line repeats the readiness the call above reported.
        if out=$("$STACKCHECK" "-$b" "$(addr_of "$b")" "${flags[@]}" "${provision[@]}" -timeout 60s); then
          say "$(tail -n +2 <<<"$out")"
        else
          warn "$b: provisioning its users failed"
          failed+=("$b")
        fi
      fi
    else
      show_failure "$b"
      warn "$b: not ready; stopping it"
      stop "$b" >&2 || true
      failed+=("$b")
    fi
  done
  if ((${#failed[@]})); then
    die "not ready: ${failed[*]} (logs: $SELF logs ${failed[*]})"
  fi
  say "stack: ready in $(since_ms "$start"); use it with: source <($HERE/$SELF env)"
}

# now_ms prints the wall clock in milliseconds; since_ms T prints the seconds
# since T with one decimal.
now_ms() {
  local t=${EPOCHREALTIME/./}
  echo $((t / 1000))
}
since_ms() {
  local d=$(($(now_ms) - $1))
  printf '%d.%ds' $((d / 1000)) $((d % 1000 / 100))
}

# stop BACKEND...: SIGTERM to all of them at once, a grace period for a clean
# shutdown, then SIGKILL for whatever is left. Returns non-zero if a process
# survives even that.
stop() {
  local b pid t0 ok=0 killed='' deadline
  declare -A left=() victims=()
  t0=$(now_ms)
  for b in "$@"; do
    find_pids "$b"
    victims[$b]=$({ backend_pid "$b"; printf '%s\n' "${FOUND[@]}"; } | sort -u | tr '\n' ' ')
    victims[$b]=${victims[$b]# }
    if [[ -z ${victims[$b]// /} ]]; then
      say "$b: not running"
      rm -f "$RUN_DIR/$b.pid" "$RUN_DIR/$b.settings"
      continue
    fi
    left[$b]=${victims[$b]}
    # shellcheck disable=SC2086 # a list of pids
    kill -TERM ${victims[$b]} 2>/dev/null || true
  done
  deadline=$((SECONDS + STOP_GRACE))
  while ((${#left[@]})); do
    for b in "${!left[@]}"; do
      local still=''
      for pid in ${left[$b]}; do is_ours "$pid" "$b" && still+="$pid "; done
      if [[ -z $still ]]; then
        unset "left[$b]"
        rm -f "$RUN_DIR/$b.pid" "$RUN_DIR/$b.settings"
        say "$b: stopped (pid ${victims[$b]% }) after $(since_ms "$t0")"
      else
        left[$b]=$still
      fi
    done
    ((${#left[@]})) || break
    if ((SECONDS >= deadline)); then
      if [[ -n $killed ]]; then
        for b in "${!left[@]}"; do warn "$b: pid ${left[$b]% } survived SIGKILL"; done
        ok=1
        break
      fi
      for b in "${!left[@]}"; do
        warn "$b: pid ${left[$b]% } still running ${STOP_GRACE}s after SIGTERM; sending SIGKILL"
        # shellcheck disable=SC2086
        kill -KILL ${left[$b]} 2>/dev/null || true
      done
      killed=1
      deadline=$((SECONDS + 10))
    fi
    sleep 0.2
  done
  return "$ok"
}

cmd_down() {
  select_backends "$@"
  lock
  stop "${SELECTED[@]}"
}

# cmd_kill BACKEND...: SIGKILL with no grace period, as a crash or a power
# cut would end the process; the data stays for the next `up` to recover.
cmd_kill() {
  select_backends "$@"
  lock
  local b pid t0 victims still deadline
  for b in "${SELECTED[@]}"; do
    t0=$(now_ms)
    find_pids "$b"
    victims=$({ backend_pid "$b"; printf '%s\n' "${FOUND[@]}"; } | sort -u | tr '\n' ' ')
    victims=${victims# }
    if [[ -z ${victims// /} ]]; then
      say "$b: not running"
      rm -f "$RUN_DIR/$b.pid" "$RUN_DIR/$b.settings"
      continue
    fi
    # shellcheck disable=SC2086 # a list of pids
    kill -KILL $victims 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while :; do
      still=''
      for pid in $victims; do is_ours "$pid" "$b" && still+="$pid "; done
      [[ -z $still ]] && break
      ((SECONDS < deadline)) || die "$b: pid ${still% } survived SIGKILL"
      sleep 0.1
    done
    rm -f "$RUN_DIR/$b.pid" "$RUN_DIR/$b.settings"
    say "$b: killed (SIGKILL, pid ${victims% }) after $(since_ms "$t0")"
  done
}

cmd_reset() {
  (($# == 0)) || die "reset takes no arguments"
  lock
  stop "${ALL[@]}"
  rm -rf "$DATA_DIR" "$LOG_DIR" "$RUN_DIR"
  say "stack: data and logs deleted (downloads kept in $DIST_DIR)"
}

# cmd_prepare downloads the jars, installs redis-server and builds the
# readiness checker where they are missing, and starts nothing: cluster.sh
# runs its nodes from the same downloads and checks them with the same
# checker.
cmd_prepare() {
  select_backends "$@"
  local selected=("${SELECTED[@]}") prep=() b pid
  validate
  lock
  mkdir -p "$LOG_DIR"
  build_stackcheck &
  prep+=($!)
  prepare_secure
  for b in "${selected[@]}"; do
    case $b in
      kafka | cassandra)
        need_java
        fetch "$b" &
        prep+=($!)
        ;;
      redis) need_redis ;;
    esac
  done
  for pid in "${prep[@]}"; do
    wait "$pid" || die "could not prepare the stack (see above)"
  done
}

cmd_status() {
  (($# == 0)) || die "status takes no arguments"
  local b pid all=0 check=() out=''
  declare -A st=()
  for b in "${ALL[@]}"; do
    pid=$(backend_pid "$b")
    st[$b]=$pid
    if [[ -n $pid ]]; then
      check+=("-$b" "$(addr_of "$b")" "-$b-pid" "$pid")
      mapfile -t -O "${#check[@]}" check < <(check_flags "$b")
    fi
  done
  if ((${#check[@]})) && [[ -x $STACKCHECK ]]; then
    out=$("$STACKCHECK" "${check[@]}" -timeout 3s -progress 0s 2>&1) || true
  fi
  printf '%-10s %-8s %-8s %-16s %-10s %s\n' BACKEND STATE PID ADDRESS VERSION READY
  for b in "${ALL[@]}"; do
    local ready=- state=stopped
    pid=${st[$b]}
    if [[ -n $pid ]]; then
      state=running
      ready=$(grep "^$b: " <<<"$out" | head -n1 | sed -e "s/^$b: //" -e 's/^ready at [^ ]* after [^ ]* /ready /')
      ready=${ready:-unknown (stackcheck not built)}
      [[ $ready == ready* ]] || all=3
    else
      all=3
    fi
    printf '%-10s %-8s %-8s %-16s %-10s %s\n' "$b" "$state" "${pid:--}" "$(addr_of "$b")" "$(version_of "$b")" "$ready"
  done
  say "stack dir: $STACK_DIR"
  return "$all"
}

cmd_env() {
  (($# == 0)) || die "env takes no arguments"
  if [[ $SECURE == true ]]; then
    # Names of their own, so that the plain stack's and the secured stack's
    # variables can be in one shell; `flags` prints the client flags.
    echo "export SUNDIAL_SECURE_KAFKA_BROKERS=$(addr_of kafka)"
    echo "export SUNDIAL_SECURE_CASSANDRA_HOSTS=$(addr_of cassandra)"
    echo "export SUNDIAL_SECURE_REDIS_ADDR=$(addr_of redis)"
    echo "export SUNDIAL_SECURE_TLS_DIR=$TLS_DIR"
    echo "export SUNDIAL_SECURE_SECRETS_DIR=$SECRETS_DIR"
    return
  fi
  echo "export SUNDIAL_KAFKA_BROKERS=$(addr_of kafka)"
  echo "export SUNDIAL_CASSANDRA_HOSTS=$(addr_of cassandra)"
  echo "export SUNDIAL_REDIS_ADDR=$(addr_of redis)"
}

# cmd_flags [BACKEND...] prints the sundial command's flags that reach the
# secured stack's backends as the user sundial, one a line, passwords by
# file (a command takes the flags of the backends it uses).
cmd_flags() {
  [[ $SECURE == true ]] || die "flags: only the secured stack (secure.sh) needs client flags"
  select_backends "$@"
  local ca=$TLS_DIR/ca.pem b
  for b in "${SELECTED[@]}"; do
    case $b in
      kafka)
        printf '%s\n' --kafka-brokers "$(addr_of kafka)" --kafka-tls --kafka-tls-ca-file "$ca" \
          --kafka-sasl-mechanism SCRAM-SHA-512 --kafka-sasl-username sundial \
          --kafka-sasl-password-file "$SECRETS_DIR/kafka-sundial.password"
        ;;
      cassandra)
        printf '%s\n' --cassandra-hosts "$(addr_of cassandra)" --cassandra-tls --cassandra-tls-ca-file "$ca" \
          --cassandra-username sundial --cassandra-password-file "$SECRETS_DIR/cassandra-sundial.password"
        ;;
      redis)
        printf '%s\n' --redis-addr "$(addr_of redis)" --redis-tls --redis-tls-ca-file "$ca" \
          --redis-username sundial --redis-password-file "$SECRETS_DIR/redis-sundial.password"
        ;;
    esac
  done
}

cmd_logs() {
  local follow='' lines=50 b f files=()
  while (($#)); do
    case $1 in
      -f) follow=1 ;;
      -n)
        [[ ${2-} =~ ^[0-9]+$ ]] || die "logs -n wants a number of lines"
        lines=$2
        shift
        ;;
      *) break ;;
    esac
    shift
  done
  select_backends "$@"
  for b in "${SELECTED[@]}"; do
    f=$(main_log_of "$b")
    [[ -f $f ]] && files+=("$f")
    # The process's own output, when it said anything (JVM errors, crashes).
    f=$LOG_DIR/$b/$b.out
    [[ -s $f ]] && files+=("$f")
  done
  ((${#files[@]})) || die "no logs yet in $LOG_DIR"
  if [[ -n $follow ]]; then
    exec tail -n "$lines" -F "${files[@]}"
  fi
  tail -n "$lines" "${files[@]}"
}

usage() {
  sed -n '2,16s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

main() {
  local cmd=${1-}
  (($#)) && shift
  case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    kill) cmd_kill "$@" ;;
    status) cmd_status "$@" ;;
    logs) cmd_logs "$@" ;;
    env) cmd_env "$@" ;;
    flags) cmd_flags "$@" ;;
    reset) cmd_reset "$@" ;;
    prepare) cmd_prepare "$@" ;;
    -h | --help | help) usage ;;
    *)
      usage >&2
      exit 2
      ;;
  esac
}

main "$@"

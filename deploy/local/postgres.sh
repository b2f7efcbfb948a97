#!/usr/bin/env bash
# A local PostgreSQL for the bench's River peer (`sundial bench peer`), as a
# plain process on 127.0.0.1 like the stack's other backends. Sundial itself
# does not use PostgreSQL.
#
#   postgres.sh up       initialise (first time), start, wait until it serves
#   postgres.sh down     stop; no process is left behind
#   postgres.sh status   state, pid, address, version
#   postgres.sh env      export lines: source <(deploy/local/postgres.sh env)
#   postgres.sh logs     the end of its log
#   postgres.sh reset    down, then delete its data
#
# It uses Debian's postgresql package (installed when missing and apt-get
# can run). Settings: SUNDIAL_STACK_DIR (its folder is <stack dir>/postgres),
# SUNDIAL_POSTGRES_PORT (default 15432). Its one user, "sundial", connects
# without a password, from 127.0.0.1 only; it is a bench backend, never a
# production one.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/../.." && pwd -P)
STACK_DIR=$(realpath -m "${SUNDIAL_STACK_DIR:-$REPO/.stack}")
PG_DIR=$STACK_DIR/postgres
DATA=$PG_DIR/data
RUN=$PG_DIR/run
LOG=$PG_DIR/postgres.log
PORT=${SUNDIAL_POSTGRES_PORT:-15432}
TIMEOUT=${SUNDIAL_STACK_TIMEOUT:-120}

say() { echo "postgres: $*" >&2; }
die() { say "$*"; exit 1; }

pg_bin() {
  local bin
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [[ -z $bin ]]; then
    if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
      say "not installed; installing Debian's postgresql package"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
      bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    fi
    [[ -n $bin ]] || die "not installed: apt-get install postgresql"
  fi
  echo "$bin"
}

# as_owner runs a PostgreSQL program as the owner of the data folder:
# PostgreSQL refuses to run as root, so root runs it as the postgres user.
as_owner() {
  if [[ $EUID -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

pid_of() {
  [[ -f $DATA/postmaster.pid ]] || return 1
  local pid
  pid=$(head -n 1 "$DATA/postmaster.pid")
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

cmd_up() {
  local bin
  bin=$(pg_bin)
  if pid_of >/dev/null; then
    say "already running (pid $(pid_of)) at 127.0.0.1:$PORT"
    return
  fi
  mkdir -p "$PG_DIR" "$RUN"
  if [[ ! -f $DATA/PG_VERSION ]]; then
    say "initialising $DATA"
    mkdir -p "$DATA"
    [[ $EUID -eq 0 ]] && chown -R postgres:postgres "$PG_DIR"
    as_owner "$bin/initdb" -D "$DATA" -U sundial --auth=trust --encoding=UTF8 >/dev/null
  fi
  [[ $EUID -eq 0 ]] && chown -R postgres:postgres "$PG_DIR"
  say "starting at 127.0.0.1:$PORT (log $LOG)"
  as_owner "$bin/pg_ctl" -D "$DATA" -l "$LOG" -w -t "$TIMEOUT" \
    -o "-p $PORT -k $RUN -c listen_addresses=127.0.0.1 -c max_connections=300 -c shared_buffers=256MB -c synchronous_commit=on" start >/dev/null
  local waited=0
  until "$bin/pg_isready" -q -h 127.0.0.1 -p "$PORT"; do
    ((waited++ < TIMEOUT)) || die "not ready after ${TIMEOUT}s; see $LOG"
    sleep 1
  done
  if ! "$bin/psql" -h 127.0.0.1 -p "$PORT" -U sundial -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'sundial'" | grep -q 1; then
    "$bin/createdb" -h 127.0.0.1 -p "$PORT" -U sundial sundial
  fi
  say "ready at 127.0.0.1:$PORT; use it with: source <($HERE/postgres.sh env)"
}

cmd_down() {
  pid_of >/dev/null || { say "not running"; return; }
  as_owner "$(pg_bin)/pg_ctl" -D "$DATA" -m fast -w -t "$TIMEOUT" stop >/dev/null
  say "stopped"
}

cmd_status() {
  local pid state=stopped version=-
  if pid=$(pid_of); then state=running; else pid=-; fi
  [[ -f $DATA/PG_VERSION ]] && version=$(cat "$DATA/PG_VERSION")
  printf '%-10s %-8s %-8s %-16s %s\n' BACKEND STATE PID ADDRESS VERSION
  printf '%-10s %-8s %-8s %-16s %s\n' postgres "$state" "$pid" "127.0.0.1:$PORT" "$version"
}

case ${1-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) echo "export SUNDIAL_POSTGRES_URL=postgres://sundial@127.0.0.1:$PORT/sundial?sslmode=disable" ;;
  logs) tail -n "${2:-50}" "$LOG" ;;
  reset) cmd_down; rm -rf "$PG_DIR"; say "data deleted" ;;
  *) sed -n '2,17p' "$0" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Sundial's secured local stack: the same Kafka, Cassandra and Redis as
# stack.sh, run by stack.sh, but with TLS on every client connection, SASL
# SCRAM-SHA-512 users and ACLs on Kafka, PasswordAuthenticator on Cassandra
# and an ACL user on Redis, in a folder and on ports of its own, so that it
# runs beside the plain stack.
#
#   secure.sh up [BACKEND...]     write certificates and passwords once, start, wait, create users
#   secure.sh down [BACKEND...]   stop
#   secure.sh status              state and readiness, probed over TLS with a login
#   secure.sh env                 SUNDIAL_SECURE_* export lines: source <(deploy/local/secure.sh env)
#   secure.sh flags [BACKEND...]  the sundial command's flags that reach it, one a line
#   secure.sh logs|kill|reset|prepare   as for stack.sh
#
# Settings: SUNDIAL_SECURE_STACK_DIR (default: <stack dir>/secure),
# SUNDIAL_SECURE_KAFKA_PORT (25092), SUNDIAL_SECURE_KAFKA_CONTROLLER_PORT
# (25093), SUNDIAL_SECURE_CASSANDRA_PORT (25042),
# SUNDIAL_SECURE_CASSANDRA_STORAGE_PORT (25070), SUNDIAL_SECURE_REDIS_PORT
# (25379), SUNDIAL_SECURE_KAFKA_HEAP (512m), SUNDIAL_SECURE_CASSANDRA_HEAP
# (1g). The downloads are the plain stack's (SUNDIAL_STACK_DIST_DIR).
# deploy/local/README.md says more.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/../.." && pwd -P)

case ${1-} in
  -h | --help | help | '')
    sed -n '2,22s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    [[ -n ${1-} ]] || exit 2
    exit 0
    ;;
esac

base=$(realpath -m "${SUNDIAL_STACK_DIR:-$REPO/.stack}")
export SUNDIAL_STACK_SECURE=true
export SUNDIAL_STACK_DIR=${SUNDIAL_SECURE_STACK_DIR:-$base/secure}
export SUNDIAL_STACK_DIST_DIR=${SUNDIAL_STACK_DIST_DIR:-$base/dist}
# The plain stack's own folders and ports must not leak in: a shell that
# moved the plain stack (as .ci/run does) would otherwise move this one onto
# the same ports.
unset SUNDIAL_STACK_DATA_DIR SUNDIAL_STACK_LOG_DIR SUNDIAL_KAFKA_AUTO_CREATE_TOPICS
export SUNDIAL_KAFKA_PORT=${SUNDIAL_SECURE_KAFKA_PORT:-25092}
export SUNDIAL_KAFKA_CONTROLLER_PORT=${SUNDIAL_SECURE_KAFKA_CONTROLLER_PORT:-25093}
export SUNDIAL_CASSANDRA_PORT=${SUNDIAL_SECURE_CASSANDRA_PORT:-25042}
export SUNDIAL_CASSANDRA_STORAGE_PORT=${SUNDIAL_SECURE_CASSANDRA_STORAGE_PORT:-25070}
export SUNDIAL_REDIS_PORT=${SUNDIAL_SECURE_REDIS_PORT:-25379}
export SUNDIAL_KAFKA_HEAP=${SUNDIAL_SECURE_KAFKA_HEAP:-512m}
export SUNDIAL_CASSANDRA_HEAP=${SUNDIAL_SECURE_CASSANDRA_HEAP:-1g}
exec "$HERE/stack.sh" "$@"
